"""Every device kernel compiles to PTX for sm_90 (typing and overflow checks, no GPU): the
device modules' and the air/examples AIRs' (kernels/ptx_check.py's defaults), and -- the
protocol core registering no machine's tables -- RV32IM tables' generated kernels through
rv32/ptx_examples.py, loaded by module name in the same ptx_check run.

All 18 RV32 tables take many minutes of NVVM on the 2-core machine, so CI compiles a
representative subset (RV32_TABLES), about 13 s of CPU beside the device modules' 25 s:
POSEIDON2's LogUp kernel (the whole AIR generates no quotient: its device quotient is
split), the LogUp-only AIR of that split (poseidon2_logup: its quotient and LogUp
kernels), and BYTES (the shared preprocessed lookup table: quotient and LogUp).  The
split's other part, one slot's permutation quotient (poseidon2_slot, 282 constraints),
costs about 50 s of CPU alone (twice this whole check) and is left to the full run:
``python -m steadfast.kernels.ptx_check steadfast.rv32.ptx_examples``, or
``STEADFAST_PTX_RV32_TABLES=poseidon2_slot`` for it alone."""
import os
import re
import subprocess
import sys

import pytest

from steadfast.kernels.ptx_check import DEVICE_MODULES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RV32_TABLES = "poseidon2,poseidon2_logup,bytes"


@pytest.mark.timeout(1200)
def test_all_device_kernels_compile_to_sm90_ptx():
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["STEADFAST_PTX_RV32_TABLES"] = RV32_TABLES
    proc = subprocess.run([sys.executable, "-m", "steadfast.kernels.ptx_check",
                           *DEVICE_MODULES, "steadfast.rv32.ptx_examples"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1100)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "FAIL" not in out
    assert "kernels compiled for sm_90" in out
    # the RV32 kernels were among them: POSEIDON2's LogUp, the LogUp-only AIR's two, BYTES'
    for name in ("logup_poseidon2_", "quotient_poseidon2_logup_", "logup_poseidon2_logup_",
                 "quotient_rv32_bytes_", "logup_rv32_bytes_"):
        assert any(line.startswith("ok ") and name in line for line in out.splitlines()), name
    # the split AIR has no quotient kernel of its own
    assert not re.search(r"quotient_poseidon2_[0-9a-f]{16}\b", out)
