"""AIR construction (docs/benchmarks.md "Verifier speed (v3)", "AIR construction"): the
CPU seconds of building the VM's AIRs in a fresh process -- what ``api.verify`` pays on
every call -- with this checkout's ``air/`` against ``air/`` of an earlier commit.

    PYTHONPATH=. python bench/air_build_bench.py [--base REV] [--rounds 5]
                                                 [--proof /tmp/ex.proof] [--json out.json]

The base tree is a copy of this checkout (without .git and .venv) whose ``--paths``
(default ``air`` and ``vm/airs.py``, the files the AIR-construction work touched) are
those of commit ``--base``: only they differ.  Every measurement is a fresh
subprocess (``python -c``, cwd and PYTHONPATH the tree), base and new alternating, the
order swapped every round; a child reports ``time.process_time()`` around the measured
call only (imports excluded).  Cases: ``build_poseidon2(k)`` and ``build_memory(k)`` for
every k of their menus that the bench names, ``block_airs(rom, slots)`` plus every
AIR's ``fingerprint()`` (the verifier's use), and ``api.verify`` of ``--proof`` (prove it
first: ``python -m steadfast.prover prove examples/block.json -o /tmp/ex.proof``).  The
medians and new/base ratios are printed with the machine's load (uptime).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import sys, time, json
import numpy as np
case, arg = sys.argv[1], sys.argv[2]
from steadfast.vm import airs
if case == "verify":
    from steadfast.prover import api
    proof = api.BlockProof.load(arg)
    t = time.process_time()
    api.verify(proof)
elif case == "p2":
    t = time.process_time()
    airs.build_poseidon2(int(arg)).fingerprint()
elif case == "memory":
    t = time.process_time()
    airs.build_memory(int(arg)).fingerprint()
elif case == "block":
    rom = np.array([[1, 2, 3, 4], [5, 6, 7, 8], [2, 0, 0, 1]], dtype=np.int64)
    t = time.process_time()
    for a in airs.block_airs(rom, json.loads(arg)):
        a.fingerprint()
print(json.dumps(time.process_time() - t))
"""


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def base_tree(rev: str, paths, dest: str) -> str:
    """A copy of this checkout with the .py files under ``paths`` taken from ``rev``."""
    tree = os.path.join(dest, "base")
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(".git", ".venv", "__pycache__",
                                                              "*.proof", ".hypothesis"))
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "--", *paths],
                           cwd=ROOT, check=True, capture_output=True, text=True).stdout.split()
    for path in names:
        if path.endswith(".py"):
            src = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True,
                                 capture_output=True).stdout
            with open(os.path.join(tree, path), "wb") as fh:
                fh.write(src)
    return tree


def run_child(tree: str, case: str, arg: str) -> float:
    env = dict(os.environ, PYTHONPATH=tree)
    out = subprocess.run([sys.executable, "-c", CHILD, case, arg], cwd=tree, env=env,
                         check=True, capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="HEAD", help="the baseline commit of --paths")
    ap.add_argument("--paths", nargs="+", default=["air", "vm/airs.py"])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--proof", help="a block proof for the api.verify case (default: skipped)")
    ap.add_argument("--p2", type=int, nargs="*", default=None,
                    help="POSEIDON2 slot counts (default: its whole menu)")
    ap.add_argument("--memory", type=int, nargs="*", default=[16])
    ap.add_argument("--block-slots", default='{"poseidon2": 3, "memory": 9}')
    ap.add_argument("--json", help="write the raw samples here")
    args = ap.parse_args(argv)
    sys.path.insert(0, ROOT)
    from steadfast.vm import airs
    p2 = args.p2 if args.p2 is not None else list(airs.slot_menu("poseidon2"))
    cases = ([("p2", str(k)) for k in p2] + [("memory", str(k)) for k in args.memory]
             + [("block", args.block_slots)])
    if args.proof:
        cases.append(("verify", os.path.abspath(args.proof)))
    samples: dict = {f"{c}:{a}": {"base": [], "new": []} for c, a in cases}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"base": base_tree(args.base, args.paths, tmp), "new": ROOT}
        print(f"base {' '.join(args.paths)} = {args.base}; load {_load()}")
        for r in range(args.rounds):
            order = ("base", "new") if r % 2 == 0 else ("new", "base")
            for case, arg in cases:
                for side in order:
                    samples[f"{case}:{arg}"][side].append(run_child(trees[side], case, arg))
            print(f"round {r + 1}/{args.rounds} done; load {_load()}", flush=True)
    print(f"{'case':44s} {'base s':>9s} {'new s':>9s} {'new/base':>9s}   (median CPU s)")
    for key, s in samples.items():
        b, n = statistics.median(s["base"]), statistics.median(s["new"])
        print(f"{key:44s} {b:9.4f} {n:9.4f} {n / b:9.2f}")
    print(f"load {_load()}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"base": args.base, "load": _load(), "samples": samples}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
