"""``prove``'s cold-start notice and the compile-ahead helper only when a host kernel is
really missing from numba's cache (issue #38 item 4: every ``prove`` of a fresh clone said
"first run here" and started the helper, because the check looked for cache files the host
backend never writes).  Real processes, each on its own ``NUMBA_CACHE_DIR``; the session's
``STEADFAST_COMPILE_AHEAD=0`` (conftest) is turned back on for them.

``test_second_prove_in_the_same_cache_is_quiet`` compiles the host kernels once (a cold
start: about 75 s on the 2-core development machine at low load, more when it is busy).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTICE = "first run here"

# prove in a child process, recording what prover/cli/compile_ahead.start() was asked and
# answered (True: the helper process was started)
_DRIVER = """
    import json, os, sys
    from steadfast.prover.cli import compile_ahead as ca
    calls = []
    _start = ca.start
    def start(*a, **k):
        got = _start(*a, **k)
        calls.append(got)
        return got
    ca.start = start
    from steadfast.prover.cli import main_prove
    rc = main_prove(sys.argv[1:])
    with open(os.environ["TEST_HELPER_CALLS"], "w") as fh:
        json.dump({"rc": rc, "start": calls}, fh)
    sys.exit(rc)
"""


def _env(cache: str, **extra) -> dict:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, STEADFAST_COMPILE_AHEAD="1")
    env.pop("PROVER_DEV_MODE", None)
    env.update(extra)
    return env


def _python(code: str, env: dict, *args, timeout: int = 600):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)


def _json(code: str, env: dict):
    proc = _python(code, env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def _prove(tmp_path, cache: str, tag: str) -> dict:
    calls, log = tmp_path / f"{tag}.calls.json", tmp_path / f"{tag}.helper.log"
    env = _env(cache, TEST_HELPER_CALLS=str(calls), STEADFAST_COMPILE_AHEAD_LOG=str(log))
    proc = _python(_DRIVER, env, "examples/block.json", "-o", str(tmp_path / f"{tag}.proof"),
                   timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {"out": proc.stdout, "err": proc.stderr, "calls": json.loads(calls.read_text()),
            "log": log.read_text() if log.exists() else None}


def _files(root: str) -> dict:
    return {os.path.join(d, f): (st.st_size, st.st_mtime_ns)
            for d, _, fs in os.walk(root) for f in fs
            for st in [os.stat(os.path.join(d, f))]}


def test_the_check_reads_numbas_own_index(tmp_path):
    """An empty cache misses every kernel a proof calls from Python; once two of them are
    compiled into it (the helper's run_helper), a new process finds exactly those two."""
    cache = str(tmp_path / "numba")
    code = """
        import json
        from steadfast.prover import cli
        from steadfast.prover.cli import compile_ahead as ca
        names = [e["name"] for e in ca.load_manifest()]
        before = [e["name"] for e in ca.missing_kernels()]
        two = [e for e in ca.load_manifest() if e["name"] in ("_ef_chain", "_count_kernel")]
        done = ca.run_helper(two)
        print(json.dumps({"top": [e["name"] for e in ca.load_manifest() if e["depth"] == 0],
                          "before": before, "cached": cli._host_kernels_cached(),
                          "done": done}))
    """
    first = _json(code, _env(cache))
    assert first["before"] == first["top"] and len(first["top"]) >= 10
    assert first["cached"] is False and first["done"]["compiled"] == 2
    code = """
        import json
        from steadfast.prover import cli
        from steadfast.prover.cli import compile_ahead as ca
        print(json.dumps({"missing": [e["name"] for e in ca.missing_kernels()],
                          "cached": cli._host_kernels_cached()}))
    """
    second = _json(code, _env(cache))
    assert second["missing"] == [n for n in first["top"] if n not in ("_ef_chain",
                                                                      "_count_kernel")]
    assert second["cached"] is False


def test_second_prove_in_the_same_cache_is_quiet(tmp_path):
    """A cold ``prove examples/block.json`` says it compiles and starts the helper (with two
    CPUs); a second process in the same cache says nothing about compiling, starts no
    helper and compiles nothing (numba's cache files untouched)."""
    cache = str(tmp_path / "numba")
    cold = _prove(tmp_path, cache, "cold")
    assert NOTICE in cold["err"] and "with the first compilation" in cold["out"], cold["err"]
    assert cold["calls"]["start"] == [(os.cpu_count() or 1) >= 2], cold["calls"]
    if cold["calls"]["start"] == [True]:
        assert "a second process compiles" in cold["err"] and cold["log"], cold["err"]
    before = _files(cache)
    warm = _prove(tmp_path, cache, "warm")
    assert NOTICE not in warm["err"] and "compiling" not in warm["err"], warm["err"]
    assert "first compilation" not in warm["out"] and "wrote " in warm["out"]
    assert warm["calls"]["start"] == [] and warm["log"] is None, warm["calls"]
    assert _files(cache) == before              # nothing compiled, nothing re-saved
    assert (tmp_path / "warm.proof").read_bytes() == (tmp_path / "cold.proof").read_bytes()
