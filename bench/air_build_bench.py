"""AIR construction (docs/benchmarks.md "Verifier speed (v3)", "AIR construction"): the
CPU seconds of building the RV32IM tables' AIRs in a fresh process -- what ``api.verify``
pays on every call -- with this checkout's ``air/`` against ``air/`` of an earlier commit.

    PYTHONPATH=. python bench/air_build_bench.py [--base REV] [--rounds 5]
        [--txs 3 16] [--proof /tmp/b.proof --block examples/block.json] [--json out.json]

The base tree is a copy of this checkout (without .git and .venv) whose ``--paths``
(default ``air``, ``rv32/tables.py``, ``rv32/block.py`` and ``rv32/chips``, the files AIR construction
runs) are those of commit ``--base``: only they differ.  Every measurement is a fresh
subprocess (``python -c``, cwd and PYTHONPATH the tree), base and new alternating, the
order swapped every round; a child reports ``time.process_time()`` around the measured
call only (imports excluded).  Cases: POSEIDON2 (``static_air("poseidon2", 2, k)``) and
a slotted instruction chip (``--chip``, default ALU, ``static_air(chip, 2, k)``) for
every k the bench names, ``rv32.tables.table_airs`` of guests/bin/hello.elf's image (its
three statement tables and the static ones, at ``--block-slots``) plus every AIR's
``fingerprint()`` (the verifier's use per transaction), ``rv32.block.block_airs`` of a
block of ``--txs`` transactions (examples/hello, transfer and merkle in turn; their images
are built inside, the first before the clock starts) with every fingerprint, and ``api.verify`` of ``--proof``
against ``--block`` (a block of RISC-V transactions; prove it first: ``python -m
steadfast.prover prove examples/block.json -o /tmp/b.proof``).  The medians and new/base
ratios are printed with the machine's load (uptime).
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
case, arg = sys.argv[1], sys.argv[2]
from steadfast.rv32 import tables
if case == "verify":
    from steadfast.prover import api
    proof, block = json.loads(arg)
    t = time.process_time()
    api.verify(proof, block=block)
elif case == "p2":
    t = time.process_time()
    tables.static_air("poseidon2", 2, int(arg)).fingerprint()
elif case.startswith("chip"):
    name = case.split("=", 1)[1]
    t = time.process_time()
    tables.static_air(name, 2, int(arg)).fingerprint()
elif case == "block":
    from steadfast.rv32.chips.program import image_of
    from steadfast.rv32.elf import load_elf
    image = image_of(load_elf("guests/bin/hello.elf"))
    t = time.process_time()
    for a in tables.table_airs(image, b"abc", b"hello from rv32im\ncba", 2, json.loads(arg)):
        a.fingerprint()
elif case == "txs":
    from steadfast.rv32 import block
    from steadfast.rv32.chips.program import image_of
    from steadfast.rv32.elf import load_elf
    progs = [load_elf(f"examples/{p}.elf") for p in ("hello", "transfer", "merkle")]
    image_of(progs[0])          # numba's first dispatch, outside the measurement
    n = int(arg)
    programs = [progs[i % 3] for i in range(n)]
    t = time.process_time()
    for a in block.block_airs(programs, [b""] * n, [b""] * n, 2, [{}] * n, 1):
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
    ap.add_argument("--paths", nargs="+", default=["air", "rv32/tables.py", "rv32/block.py", "rv32/chips"])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--proof", help="a block proof (format 2) for the api.verify case "
                                    "(default: skipped); needs --block")
    ap.add_argument("--block", help="the block file --proof proves")
    ap.add_argument("--p2", type=int, nargs="*", default=None,
                    help="POSEIDON2 slot counts (default: its whole menu)")
    ap.add_argument("--chip", default="alu", help="the slotted chip of the chip case")
    ap.add_argument("--chip-slots", type=int, nargs="*", default=[4])
    ap.add_argument("--block-slots", default='{"poseidon2": 3, "alu": 4}')
    ap.add_argument("--txs", type=int, nargs="*", default=[3, 16],
                    help="transactions of the block_airs case (default 3 16)")
    ap.add_argument("--json", help="write the raw samples here")
    args = ap.parse_args(argv)
    if args.proof and not args.block:
        ap.error("--proof needs --block")
    sys.path.insert(0, ROOT)
    from steadfast.rv32 import tables
    p2 = args.p2 if args.p2 is not None else list(tables.slot_menu("poseidon2"))
    cases = ([("p2", str(k)) for k in p2] + [(f"chip={args.chip}", str(k))
                                             for k in args.chip_slots]
             + [("block", args.block_slots)] + [("txs", str(n)) for n in args.txs])
    if args.proof:
        cases.append(("verify", json.dumps([os.path.abspath(args.proof),
                                            os.path.abspath(args.block)])))
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
