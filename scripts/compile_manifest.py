#!/usr/bin/env python3
"""Write prover/cli/compile_manifest.json: the host kernels a proof compiles, in call order.

    .venv/bin/python scripts/compile_manifest.py            # rewrite the manifest
    .venv/bin/python scripts/compile_manifest.py --check    # exit 1 if it is stale
    .venv/bin/python scripts/compile_manifest.py --keep-order   # rewrite, keeping the
                                                    # committed helper order (kept_order)

Proves examples/block.json, then examples/hello.elf, in a fresh process on an empty numba
cache (a temporary NUMBA_CACHE_DIR: a cold start, so the njit callees compile too) and
records every compile of a cached steadfast function in the order the compiles start
(prover/cli/compile_ahead.record): the entries the compile-ahead helper
(prover/cli/compile_ahead.py) compiles from the last one backwards -- a kernel's callees
before the kernel -- while a cold ``prove`` compiles from the first one forwards.
``--check`` proves on the current cache and fails if a kernel the proofs call from Python
is missing.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _child(out: str) -> None:
    os.environ["STEADFAST_COMPILE_AHEAD"] = "0"
    from steadfast.prover.cli import compile_ahead
    from steadfast.prover.cli import main_prove
    rows: list = []
    with tempfile.TemporaryDirectory() as tmp, compile_ahead.record(rows):
        for argv in (["examples/block.json"], ["examples/hello.elf", "--input", "examples/hello.in"]):
            rc = main_prove(argv + ["-o", os.path.join(tmp, "p.proof"), "-q"])
            if rc:
                raise SystemExit(f"prove {argv[0]} exited {rc}")
    with open(out, "w") as fh:
        json.dump(rows, fh)


def recorded(cold: bool = True) -> list[dict]:
    """The entries a fresh process's proofs compile (run in a subprocess; on an empty
    numba cache when ``cold``)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rows.json")
        env = dict(os.environ)
        if cold:
            env["NUMBA_CACHE_DIR"] = os.path.join(tmp, "numba")
        subprocess.run([sys.executable, os.path.abspath(__file__), "--child", out],
                       cwd=ROOT, check=True, env=env)
        with open(out) as fh:
            return json.load(fh)


def kept_order(doc: dict, rows: list[dict], planned: list[int]) -> list[int]:
    """``--keep-order``: the committed manifest's helper order for the entries it has (by
    module and name), each new entry placed before the first entry after it in call order
    that the committed order has (at the end if none), in the planned order among
    themselves.  For when the measured cold start (bench/cold_start_bench.py, same
    session) is faster with the committed order than with the plan: the plan comes from
    compile_ahead._simulate, a model (solo-recorded seconds, no contention between the
    two processes) that can rank two orders the wrong way round."""
    old = doc.get("entries", [])
    old_order = doc.get("helper_order", [])
    def key(e):
        return e["module"], e["name"]
    where = {}
    for i in range(len(rows)):
        where.setdefault(key(rows[i]), i)
    order = [where[key(old[j])] for j in old_order
             if j < len(old) and key(old[j]) in where]
    order = list(dict.fromkeys(order))
    for i in sorted(set(range(len(rows))) - set(order), key=planned.index):
        after = [order.index(j) for j in range(i + 1, len(rows)) if j in order]
        order.insert(after[0] if after else len(order), i)
    return order


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        _child(argv[1])
        return 0
    from steadfast.prover.cli.compile_ahead import (MANIFEST, _simulate, load_doc, load_manifest,
                                                plan)
    rows = recorded(cold=argv[:1] != ["--check"])
    if argv[:1] == ["--check"]:
        have = {(e["module"], e["name"], e["sig"]) for e in load_manifest()}
        missing = [r for r in rows if r["depth"] == 0
                   and (r["module"], r["name"], r["sig"]) not in have]
        for r in missing:
            print(f"not in the manifest: {r['module']}.{r['name']}{r['sig']}")
        if missing:
            print("rerun scripts/compile_manifest.py")
        return 1 if missing else 0
    order = plan(rows)
    how = "planned"
    if "--keep-order" in argv:
        order, how = kept_order(load_doc(), rows, order), "kept"
    back = list(range(len(rows) - 1, -1, -1))
    print(f"simulated prover finish: {_simulate(rows, back):.1f} s with the helper going "
          f"backwards, {_simulate(rows, order):.1f} s with the {how} order; alone "
          f"{_simulate(rows, []):.1f} s")
    doc = {"about": "host kernels a proof compiles, in call order, with the seconds of a cold "
                    "compile on the machine that wrote it (scripts/compile_manifest.py; read by "
                    "prover/cli/compile_ahead.py)", "helper_order": order, "entries": rows}
    with open(MANIFEST, "w") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    print(f"wrote {len(rows)} entries to {os.path.relpath(MANIFEST, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
