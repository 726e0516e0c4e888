"""The prepared H200 script (bench/device_check.py) must not rot while no GPU is lent:
its --dry-run runs every check's code path under numba's CUDA simulator at tiny sizes
(the end-to-end part on ``emu``) and must report every comparison identical."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.timeout(600)
def test_device_check_dry_run_all_identical(tmp_path):
    out = tmp_path / "figures.json"
    env = dict(os.environ, PYTHONPATH=ROOT, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "device_check.py"),
                           "--dry-run", "--seed", "5", "--e2e-k", "10", "11", "--warm-k", "0",
                           "--json", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=580)
    tail = proc.stdout.strip().splitlines()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    last = tail[-1]
    assert last.startswith("device_check: ") and "identical" in last, last
    got, total = last.split()[1].split("/")
    assert got == total and int(total) >= 10, last
    rows = json.loads(out.read_text())["rows"]
    assert {r["identical"] for r in rows} <= {"yes", "n/a"}
    assert any(r["check"].startswith("prove block") and r["identical"] == "yes" for r in rows)
