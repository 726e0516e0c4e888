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


# modules that use the kernel machinery without declaring a kernel of their own at import
_NOT_DEVICE_MODULES = {
    "steadfast.kernels.devicelib": "the kernel / device_function decorators themselves",
    "steadfast.kernels.constraint_codegen": "per-AIR kernels generated on demand, reached "
                                            "through constraint_device's ptx_examples hook",
}


def _declares_kernels(tree) -> bool:
    """A module declares a device kernel: a call of ``kernel(...)`` (devicelib's decorator,
    imported by that name) or of ``cuda.jit`` / ``numba.cuda.jit``, or a bare ``@cuda.jit``."""
    import ast
    uses_kernel = any(isinstance(n, ast.ImportFrom) and n.module and n.module.endswith("devicelib")
                      and any(a.name == "kernel" for a in n.names) for n in ast.walk(tree))

    def is_jit(f) -> bool:
        return isinstance(f, ast.Attribute) and f.attr == "jit" and (
            (isinstance(f.value, ast.Name) and f.value.id == "cuda")
            or (isinstance(f.value, ast.Attribute) and f.value.attr == "cuda"))
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and (is_jit(n.func) or (
                uses_kernel and isinstance(n.func, ast.Name) and n.func.id == "kernel")):
            return True
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                is_jit(d) for d in n.decorator_list):
            return True
    return False


def test_ptx_check_lists_every_device_module():
    """kernels/ptx_check.DEVICE_MODULES names every module of the packages that declares
    device kernels (a new module with ``@kernel`` or ``cuda.jit`` fails here until listed),
    and nothing else; the verifier declares none."""
    import ast
    found = set()
    for pkg in ("kernels", "prover", "air", "rv32", "verifier"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, pkg)):
            for f in files:
                if not f.endswith(".py"):
                    continue
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8") as fh:
                    tree = ast.parse(fh.read(), path)
                if _declares_kernels(tree):
                    rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                    found.add("steadfast." + rel.removesuffix(".__init__"))
    assert "steadfast.kernels.devicelib" in found      # the scan sees cuda.jit
    assert not any(m.startswith("steadfast.verifier") for m in found), found
    missing = found - set(DEVICE_MODULES) - set(_NOT_DEVICE_MODULES)
    assert not missing, f"declare kernels but are not in ptx_check.DEVICE_MODULES: {sorted(missing)}"
    stale = set(DEVICE_MODULES) - found
    assert not stale, f"in ptx_check.DEVICE_MODULES but declare no kernel: {sorted(stale)}"
