"""The prepared H200 script (bench/device_check.py) must not rot while no GPU is lent:
its --dry-run runs every check's code path under numba's CUDA simulator at tiny sizes
(the end-to-end part on ``emu``) and must report every comparison identical, in the
order that makes a first GPU run count: versions, sanity launch, precompile, the first
device-vs-host proof comparison, then the microbenchmarks, the rest of the end-to-end
ladder, and the summary table last."""
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
    lines = proc.stdout.splitlines()

    def at(prefix):
        hits = [i for i, x in enumerate(lines) if x.startswith(prefix)
                or (x.startswith("[") and "] " in x and x.split("] ", 1)[1].startswith(prefix))]
        assert hits, f"no line {prefix!r} in\n" + proc.stdout[-3000:]
        return hits[0]
    order = [at(p) for p in ("versions: ", "sanity launch ", "precompile ", "prove block first ",
                             "copy D2D ", "ntt ", "poseidon2 KAT ", "prove block (emu) 2^11",
                             "== device_check summary ==")]
    assert order == sorted(order), order
    assert "numba-cuda=" in lines[order[0]] and "numpy=" in lines[order[0]]
    rows = json.loads(out.read_text())["rows"]
    assert {r["identical"] for r in rows} <= {"yes", "n/a"}
    assert any(r["check"].startswith("prove block") and r["identical"] == "yes" for r in rows)
    first = [r for r in rows if r["check"].startswith("prove block first")]
    assert first and first[0]["identical"] == "yes" and first[0]["size"] == "2^10 cycles"
    assert [r["identical"] for r in rows if r["check"] == "sanity launch"] == ["yes"]
    pre = [r for r in rows if r["check"] == "precompile"][0]
    steps = pre["data"]["steps"]
    assert steps and {s["how"] for s in steps} <= {"generated", "cache"}
