"""The prepared H200 script (bench/device_check.py) must not rot while no GPU is lent:
its --dry-run runs every check's code path under numba's CUDA simulator at tiny sizes
(the end-to-end part on ``emu``) and must report every comparison identical, in the
order that makes a first GPU run count: the preflight, versions, sanity launch,
precompile, the first device-vs-host proof comparison, then the microbenchmarks, the rest
of the end-to-end ladder, and the summary table last.  A failed preflight is one line and
exit status 2 before anything touches a device."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.timeout(600)
def test_device_check_dry_run_all_identical(tmp_path):
    out = tmp_path / "figures.json"
    env = dict(os.environ, PYTHONPATH=ROOT, NUMBA_ENABLE_CUDASIM="1",
               PROVER_KERNEL_CACHE=str(tmp_path / "kernels"))
    env.pop("NUMBA_THREADING_LAYER", None)
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "device_check.py"),
                           "--dry-run", "--seed", "5", "--e2e-k", "10", "11", "--warm-k", "0",
                           "--warm-jobs", "2", "--json", str(out)],
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
    order = [at(p) for p in ("preflight: ok", "versions: ", "sanity launch ", "precompile ",
                             "prove block first ",
                             "copy D2D ", "ntt ", "poseidon2 KAT ", "prove block (emu) 2^11",
                             "prove block fastest (emu) 2^10", "== device_check summary ==")]
    assert order == sorted(order), order
    assert "numba-cuda=" in lines[order[1]] and "numpy=" in lines[order[1]]
    figures = json.loads(out.read_text())
    assert figures["budget_s"] == {"soft": 480.0, "hard": 590.0}
    pf = figures["preflight"]
    assert pf["ok"] and pf["failures"] == [] and pf["threading_layer"] in ("omp", "tbb")
    assert pf["nvvm"].startswith("simulator") and pf["numba-cuda"]
    assert pf["kernel_cache"]["writable"] and pf["kernel_cache"]["dir"].startswith(str(tmp_path))
    # the warm-up children (two precompile parts, one host proof) ran and finished
    children = figures["warmup"]["children"]
    assert set(children) == {"precompile 0", "precompile 1", "host 0"}, children
    assert all(c["exit"] == 0 for c in children.values()), children
    rows = figures["rows"]
    assert {r["identical"] for r in rows} <= {"yes", "n/a"}
    assert any(r["check"].startswith("prove block") and r["identical"] == "yes" for r in rows)
    first = [r for r in rows if r["check"].startswith("prove block first")]
    assert first and first[0]["identical"] == "yes" and first[0]["size"] == "2^10 cycles"
    fastest = [r for r in rows if r["check"].startswith("prove block fastest")]
    assert [r["identical"] for r in fastest] == ["yes"], fastest
    assert [r["identical"] for r in rows if r["check"] == "sanity launch"] == ["yes"]
    pre = [r for r in rows if r["check"] == "precompile"][0]
    steps = pre["data"]["steps"]
    assert steps and {s["how"] for s in steps} <= {"generated", "cache"}


@pytest.mark.timeout(120)
def test_a_failed_preflight_is_one_line_and_exit_2(tmp_path):
    out = tmp_path / "figures.json"
    env = dict(os.environ, PYTHONPATH=ROOT, NUMBA_ENABLE_CUDASIM="1",
               NUMBA_THREADING_LAYER="workqueue", PROVER_KERNEL_CACHE=str(tmp_path / "k"))
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "device_check.py"),
                           "--dry-run", "--json", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=110)
    assert proc.returncode == 2, proc.stdout + proc.stderr[-2000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("preflight")]
    assert len(lines) == 1 and lines[0].startswith("preflight: FAILED -- numba's threading "
                                                   "layer is 'workqueue'"), proc.stdout
    assert "sanity launch" not in proc.stdout and "Traceback" not in proc.stderr
    pf = json.loads(out.read_text())["preflight"]
    assert not pf["ok"] and pf["threading_layer"] == "workqueue" and len(pf["failures"]) == 1


def test_warm_up_parts_cover_every_kernel_once():
    sys.path.insert(0, ROOT)
    from bench.device_common import _OtherPart, in_part, partition_dispatchers
    from steadfast.kernels import devicelib, ptx_check
    ptx_check.registered_kernels([m for m in ptx_check.DEVICE_MODULES
                                  if not m.endswith("constraint_device")])
    names = list(devicelib.DISPATCHERS)
    assert len(names) > 20
    for n in names:
        assert sum(in_part(n, i, 4) for i in range(4)) == 1
    saved = devicelib.DISPATCHERS
    try:
        partition_dispatchers(1, 4)
        got = {n: not isinstance(devicelib.DISPATCHERS[n], _OtherPart) for n in names}
        assert got == {n: in_part(n, 1, 4) for n in names} and any(got.values())
        assert _OtherPart().compile("void()") is None
    finally:
        devicelib.DISPATCHERS = saved
