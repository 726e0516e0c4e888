"""Every device kernel compiles to PTX for sm_90 (typing and overflow checks, no GPU)."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.timeout(1200)
def test_all_device_kernels_compile_to_sm90_ptx():
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-m", "steadfast.kernels.ptx_check"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1100)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "FAIL" not in out
    assert "kernels compiled for sm_90" in out
