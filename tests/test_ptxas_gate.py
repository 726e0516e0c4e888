"""Issue #27, item 6: the resource gate of ``bench/ptxas_report.py --gate`` in CI.

Every registered device kernel, compiled to sm_90 PTX and assembled by ``ptxas -v`` (the
nvidia-cuda-nvcc wheel; no GPU), must keep registers x its largest launch block <= 65,536,
spills <= 512 B and a stack frame <= 1 KiB.  The whole set (60 kernels) took 246 s of
NVVM + ptxas on the loaded 2-core development VM (2026-12-01: all 60 pass; the largest
are the CPU quotients, 255 registers x 256 threads = 65,280, 360-408 B of spills and
stack); Since the protocol core
registers no machine's tables (kernels/constraint_device.register_example_airs: the
air/examples AIRs), CI gates the device modules' kernels, the example AIRs' and RV32IM
ALU's quotient and LogUp kernels at log_blowup 1 (``--rv32 alu --rv32-blowups 1``: 18
constraints, LogUp at degree 3 with 10 aux columns; the quotient alone took 117 s of NVVM
and 49 s of ptxas at load 33, 192 registers x 256 threads, no spills), and checks that
quotient is among the gated.  The full gate, every RV32 table at log_blowup 1 and 2:
``PYTHONPATH=. python3 bench/ptxas_report.py --gate --rv32 all``.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


RV32 = ["--rv32", "alu", "--rv32-blowups", "1"]


def _kept_alu_quotient() -> str:
    from steadfast.kernels.constraint_device import generated
    from steadfast.rv32.tables import static_air
    return generated(static_air("alu", 1)).quotient.__name__


@pytest.mark.timeout(600)
def test_ptxas_resource_gate():
    pytest.importorskip("nvidia")            # the CUDA compiler wheels of the test extra
    keep = _kept_alu_quotient()
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "ptxas_report.py"), "--gate",
                           *RV32], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=580)
    out = proc.stdout + proc.stderr
    if "ptxas not found" in out:
        pytest.skip("no ptxas (nvidia-cuda-nvcc wheel)")
    assert proc.returncode == 0, out[-5000:]
    assert "ptxas gate: passed" in out, out[-3000:]
    # a kernel's row (its name cut to 58 characters), not the summary naming the worst
    rows = [ln for ln in out.splitlines() if keep[:30] in ln and not ln.startswith("ptxas")]
    assert rows, f"{keep} was not gated:\n{out[-3000:]}"
    regs, st, ld, stack, block = (int(x) for x in rows[0].split()[3:8])
    assert regs * block <= 65536 and max(st, ld) <= 512 and stack <= 1024, rows[0]
    assert any("logup_rv32_alu" in ln and not ln.startswith("ptxas")
               for ln in out.splitlines()), out[-3000:]
