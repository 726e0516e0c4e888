"""The compile-ahead helper of a cold start (prover/cli/compile_ahead.py): its manifest is
current, its signatures round-trip, its plan beats going backwards in its own model, and
the helper compiles into numba's cache, stops at what is cached, and stops where the
prover holds a kernel's compile lock (each in a fresh process on an empty cache)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steadfast.prover.cli import compile_ahead as ca

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# two small cached kernels (well under a second each to compile)
SMALL = ("steadfast.prover.core.hostops", "_ef_chain")


def _entries():
    return ca.load_manifest()


def test_manifest_entries_resolve_and_round_trip():
    entries = _entries()
    assert len(entries) >= 20
    for e in entries:
        got = ca.resolve(e)
        assert got is not None, f"stale manifest entry {e['module']}.{e['name']} " \
                                f"(rerun scripts/compile_manifest.py)"
        disp, sig = got
        assert ca.sig_text(sig) == e["sig"]
        assert e["own"] >= 0 and e["t"] >= 0 and e["depth"] >= 0
    doc = ca.load_doc()
    assert sorted(doc["helper_order"]) == list(range(len(entries)))
    # a call site passing a literal (``f(x, 1)`` inside njit code) compiles a second
    # signature of a kernel for Literal[int](1): 7.8 CPU-s of every cold start once
    literal = [f"{e['module']}.{e['name']}{e['sig']}" for e in entries if "Literal[" in e["sig"]]
    assert not literal, literal


def test_manifest_is_current():
    """What the example block's and hello.elf's proofs call from Python is in the
    manifest (scripts/compile_manifest.py --check: a fresh process, the current cache)."""
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "compile_manifest.py"),
                           "--check"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_stale_entry_is_none():
    assert ca.resolve({"module": "steadfast.kernels.hostlib", "name": "no_such_kernel",
                       "sig": "(int64,)"}) is None
    assert ca.resolve({"module": "steadfast.no_such_module", "name": "f",
                       "sig": "(int64,)"}) is None
    assert ca.resolve({"module": SMALL[0], "name": SMALL[1], "sig": "(NoSuchType,)"}) is None


def test_switch():
    for off in ("0", "false", "off", "no"):
        os.environ["STEADFAST_COMPILE_AHEAD"] = off
        try:
            assert not ca.enabled()
        finally:
            del os.environ["STEADFAST_COMPILE_AHEAD"]
    assert ca.enabled()


_entry = st.fixed_dictionaries({"t": st.floats(0, 50), "own": st.floats(0, 20)})


@settings(max_examples=60, deadline=None)
@given(st.lists(_entry, min_size=1, max_size=9))
def test_plan_is_a_permutation_no_slower_than_backwards(rows):
    rows = sorted(rows, key=lambda r: r["t"])
    n = len(rows)
    order = ca.plan(rows, rounds=3)
    assert sorted(order) == list(range(n))
    back = list(range(n - 1, -1, -1))
    alone = ca._simulate(rows, [])
    assert ca._simulate(rows, order) <= ca._simulate(rows, back) + 1e-9
    assert ca._simulate(rows, back) <= alone + 1e-9     # waiting never beats compiling


def test_simulate_alone_is_the_recorded_timeline():
    rows = [{"t": 0.0, "own": 2.0}, {"t": 5.0, "own": 1.0}, {"t": 6.0, "own": 4.0}]
    assert ca._simulate(rows, []) == pytest.approx(10.0)
    # the helper takes the last entry at t = 0 and is done at 4, before the prover needs it
    assert ca._simulate(rows, [2]) == pytest.approx(6.0)


def _run_child(code: str, cache: str, extra_env: dict | None = None) -> str:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, STEADFAST_COMPILE_AHEAD="0")
    env.update(extra_env or {})
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


_HELPER = """
    import json
    from steadfast.prover.cli import compile_ahead as ca
    entries = [e for e in ca.load_manifest() if e["name"] in ("_ef_chain", "_eval_chunks")]
    assert len(entries) == 2, entries
    out = []
    done = ca.run_helper(entries, lambda e, o, s: out.append([e["name"], o]))
    print(json.dumps({"steps": out, "done": done}))
"""


def test_helper_compiles_then_stops_at_the_cache(tmp_path):
    cache = str(tmp_path / "numba")
    first = json.loads(_run_child(_HELPER, cache).splitlines()[-1])
    assert [o for _, o in first["steps"]] == ["compiled", "compiled"]
    assert first["done"]["compiled"] == 2
    assert any(f.endswith(".nbi") for _, _, fs in os.walk(cache) for f in fs)
    second = json.loads(_run_child(_HELPER, cache).splitlines()[-1])
    assert second["steps"][0][1] == "cached" and len(second["steps"]) == 1
    assert second["done"]["stopped_at"] == 1


def test_helper_stops_where_the_prover_holds_the_lock(tmp_path):
    """The prover's side holds _eval_chunks's compile lock: the helper, told the lock
    directory, reports it busy and compiles nothing."""
    cache, locks = str(tmp_path / "numba"), str(tmp_path / "locks")
    os.makedirs(locks)
    code = """
        import fcntl, json, os, subprocess, sys
        from steadfast.prover.cli import compile_ahead as ca
        e = [e for e in ca.load_manifest() if e["name"] == "_eval_chunks"][0]
        disp, sig = ca.resolve(e)
        ca._LOCK_DIR.append(os.environ["LOCKS"])
        fh = open(ca._lock_path(disp, sig), "a+b")
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        env = dict(os.environ, STEADFAST_COMPILE_AHEAD_DIR=os.environ["LOCKS"])
        p = subprocess.run([sys.executable, "-c", os.environ["CHILD"]], env=env,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        print(p.stdout.strip().splitlines()[-1])
    """
    child = textwrap.dedent("""
        import json
        from steadfast.prover.cli import compile_ahead as ca
        e = [e for e in ca.load_manifest() if e["name"] == "_eval_chunks"]
        out = []
        print(json.dumps(ca.run_helper(e, lambda e, o, s: out.append(o)) | {"steps": out}))
    """)
    res = json.loads(_run_child(code, cache, {"LOCKS": locks, "CHILD": child}).splitlines()[-1])
    assert res["steps"] == ["busy"] and res["compiled"] == 0 and res["stopped_at"] == 0


def test_cold_prove_with_the_helper_gives_the_same_bytes(tmp_path):
    """``prove examples/block.json`` on an empty numba cache with the helper on: the helper
    compiles part of the manifest (its log says so, nothing failed or stale) and the proof
    is byte for byte the one of a warm process without it."""
    from steadfast.prover.cli import main_prove
    warm = tmp_path / "warm.proof"
    assert main_prove(["examples/block.json", "-o", str(warm), "-q"]) == 0
    cold, log = tmp_path / "cold.proof", tmp_path / "ahead.log"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), STEADFAST_COMPILE_AHEAD="1",
               STEADFAST_COMPILE_AHEAD_LOG=str(log))
    proc = subprocess.run([sys.executable, "-m", "steadfast.prover", "prove", "examples/block.json",
                           "-o", str(cold), "-q"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert cold.read_bytes() == warm.read_bytes()
    rows = [json.loads(ln) for ln in log.read_text().splitlines()]
    outcomes = [r["outcome"] for r in rows if "outcome" in r]
    assert outcomes.count("compiled") >= 3, rows
    assert "failed" not in outcomes and "stale" not in outcomes, rows


def test_simulate_counts_callees_with_their_caller():
    """An entry's callees (deeper entries after it) are compiled with it: the helper taking
    the caller takes them too, and the prover then waits for the whole subtree."""
    rows = [{"t": 0.0, "own": 1.0, "depth": 0},             # a kernel called first
            {"t": 10.0, "own": 1.0, "depth": 0},            # a caller of ...
            {"t": 10.5, "own": 8.0, "depth": 1},            # ... a costly callee
            {"t": 19.5, "own": 1.0, "depth": 0}]
    assert [list(r) for r in ca._subtrees(rows)] == [[0], [1, 2], [2], [3]]
    # alone: 1 + 9 of gap, the caller with its callee 9 + 0.5 of gap, 1 = 20.5
    assert ca._simulate(rows, []) == pytest.approx(20.5)
    # the helper takes the caller (and its callee) at t = 0: ready at 9, before the
    # prover needs it at 10, so the prover compiles only the first and the last
    assert ca._simulate(rows, [1]) == pytest.approx(11.5)
    # the callee alone first: the prover compiles the caller's own second, not the 8
    assert ca._simulate(rows, [2]) == pytest.approx(12.5)
    assert ca._simulate(rows, ca.plan(rows)) <= 11.5 + 1e-9       # e.g. [1, 3, ...]: 10.5


def test_kept_order_keeps_the_committed_order_and_places_new_entries():
    """scripts/compile_manifest.py --keep-order: the committed helper order for the
    entries it has, a new entry before its first successor in call order that it has,
    entries gone dropped."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    try:
        import compile_manifest as cm
    finally:
        sys.path.pop(0)
    row = lambda name: {"module": "m", "name": name}           # noqa: E731
    old = {"entries": [row(n) for n in "abcd"], "helper_order": [2, 0, 3, 1]}   # c a d b
    same = [row(n) for n in "abcd"]
    assert cm.kept_order(old, same, [3, 2, 1, 0]) == [2, 0, 3, 1]
    # "d" gone, "x" new between "a" and "b" in call order: before b in the kept order
    new = [row(n) for n in "axbc"]
    order = cm.kept_order(old, new, [3, 2, 1, 0])
    assert [new[i]["name"] for i in order] == ["c", "a", "x", "b"]
    assert sorted(order) == list(range(len(new)))
