"""CI soak: 5 cycles per scenario of the example block on emu, under a reduced budget and
injected faults (bench/soak.py)."""
import subprocess
import sys
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.timeout(900)
def test_soak_emu_five_cycles_per_scenario():
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run([sys.executable, "bench/soak.py", "--cycles", "5", "--backend", "emu"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=880)
    last = proc.stdout.strip().splitlines()[-1]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert last == "soak: 15/15 valid, 15/15 identical, corruptions caught 15/15, " \
                   "invalid proofs written 0", last
