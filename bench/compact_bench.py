"""Compact proofs (proof format 3, issue #13): proof size, prove time and security figure
per parameter set, against the format-2 prover measured in the same run
(docs/benchmarks.md, "Compact proofs (v3)"; docs/protocol.md section 7).

    PYTHONPATH=. python bench/compact_bench.py [--sizes 12 14 16] [--base /work/base]
        [--sets 1,100,2,2 1,100,3,2 2,50,2,2 ...] [--repeat 1] [--json out.json]
    PYTHONPATH=. python bench/compact_bench.py --model /tmp/block.proof

A set is ``log_blowup,num_queries,log_fri_arity,log_cap``.  Every (tree, set, block) runs
in a fresh subprocess that first proves a tiny block (loads the compiled kernels), then
proves the block on the host backend without the self-check (the prove time is the
proof's own ``phases["prove"]``, the CPU time user+system seconds of the process during
the proof -- steadier than wall time on a shared machine).  ``--base``: a checkout of
the format-2 prover (its default parameters) run the same way with PYTHONPATH=BASE; the
ratio column is v3 / v2 prove seconds of the same block (the base must prove blocks of
RISC-V transactions too).  Blocks (block format 2): ``examples/block.json`` and
``bench/make_block.py -k K --hash-share 0.25`` (``make_block.v2_block(k, 0.25)``, seed 1:
about 2^k cycles; k >= 10).  Security: the figure of ``verifier.security.proof_security``
for the block's tables, and at the 2^24-row limit (every table at 2^24 rows but those of
fixed height: PROGRAM, REGISTERS, IO and BYTES).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def worker(kind: str, pset: str) -> dict:
    """Runs inside the subprocess (PYTHONPATH = the tree under test)."""
    from steadfast.prover.api import Prover, ProverConfig
    from steadfast.rv32.blockfile import load_block, parse_block
    kw = {}
    if pset != "v2":
        lb, q, la, lc = (int(x) for x in pset.split(","))
        kw = dict(log_blowup=lb, num_queries=q, log_fri_arity=la, log_cap=lc)
    prover = Prover(ProverConfig(backend="host", self_check=False, **kw))
    prover.prove_block(tiny_block())                                          # warm-up
    if kind == "example":
        block = load_block(os.path.join(ROOT, "examples", "block.json"))
    else:
        sys.path.insert(0, ROOT)
        from bench.make_block import v2_block
        block = parse_block(v2_block(int(kind), 0.25)[0])
    sec = prover.execute(block).security_bits
    c0 = _cpu()
    proof = prover.prove_block(block)
    cpu = _cpu() - c0
    out = {"kind": kind, "set": pset, "file_bytes": len(proof.to_bytes()),
           "proof_bytes": len(proof.proof), "prove_s": proof.stats.phases["prove"],
           "cpu_s": cpu, "security_bits": int(sec)}
    if pset != "v2":
        out["limit_bits"] = limit_bits(prover.config.params(), block)
    return out


def tiny_block():
    """One hello transaction (guests/bin/hello.elf on b"abc"): the warm-up."""
    from steadfast.rv32.blockfile import Block, Transaction
    from steadfast.rv32.elf import load_elf
    prog = load_elf(os.path.join(ROOT, "guests", "bin", "hello.elf"))
    return Block((Transaction(prog, b"abc", None, None, "hello"),), 1 << 16, bytes(32))


def limit_bits(params, block) -> int:
    """The security figure with every table at 2^24 rows but those of fixed height
    (PROGRAM, REGISTERS, IO, BYTES keep theirs)."""
    from steadfast.rv32.block import build_block_traces
    from steadfast.rv32.run import execute
    from steadfast.verifier.security import proof_security
    exs = [execute(t.program, t.input, block.max_cycles, record=True)
           for t in block.transactions]
    bt = build_block_traces([t.program for t in block.transactions], exs, block.max_cycles,
                            params.log_blowup)
    log_ns = [(t.shape[0].bit_length() - 1) if a.fixed_height else 24
              for a, t in zip(bt.airs, bt.traces)]
    return int(proof_security(params, bt.airs, log_ns).bits)


def size_model(proof_path: str, trials: int = 40) -> None:
    """Expected file size per parameter set for the block of ``proof_path`` (a block
    proof of format 2's ``prove`` output), averaged over ``trials`` random query sets: the query-independent
    bytes of that proof plus rows, multiproof nodes, caps and FRI values counted exactly
    (kernels.multiproof) for each draw.  One proof's size varies by ~2 % with its queries,
    more than the differences between neighbouring sets."""
    import numpy as np
    from steadfast.kernels.mmcs import mixed_cap_height
    from steadfast.kernels.multiproof import multiproof_count
    from steadfast.prover.core.rounds import fri_layer_heights
    from steadfast.prover.blocks.proof import TxBlockProof
    from steadfast.verifier.proof_format import decode
    with open(proof_path, "rb") as f:
        bp = TxBlockProof.from_bytes(f.read())
    d, total0 = decode(bp.proof), len(bp.to_bytes())
    var = 0
    for t in d.tables:
        for a in (t.main_rows, t.aux_rows, t.parts_rows):
            var += a.size * 4
    c = d.commits
    for a in (c.main_nodes, c.aux_nodes, c.parts_nodes, c.main_cap, c.aux_cap, c.parts_cap):
        var += a.size * 4
    for a in d.fri.caps + d.fri.values + d.fri.nodes:
        var += a.size * 4 + 9                              # elements + array header
    fixed = total0 - var
    widths = [(t.log_n, t.main_rows.shape[1], t.aux_rows.shape[1] if t.has_aux else 0,
               t.parts_rows.shape[1]) for t in d.tables]
    rng = np.random.default_rng(0)

    def size(lb, q, la, lc):
        out = []
        for _ in range(trials):
            hs_t = [ln + lb for ln, _, _, _ in widths]
            hs = fri_layer_heights(hs_t, lb, d.params.log_final_poly_len, la)
            s = rng.integers(0, 1 << hs[0], q)
            b = fixed
            for (ln, w, a, p), h in zip(widths, hs_t):     # the opened rows
                idx = np.unique(s >> (hs[0] - h))
                b += 4 * idx.size * (w + a + p)
            for kind in (1, 2, 3):                         # one mixed tree per kind
                hk = [h for (wd, h) in zip(widths, hs_t) if wd[kind]]
                if hk:
                    ck = mixed_cap_height(hk, lc)
                    top = np.unique(s >> (hs[0] - max(hk)))
                    b += 4 * 8 * (multiproof_count(top, max(hk), ck) + (1 << ck))
            for h, hn in zip(hs, hs[1:]):
                k = h - hn
                pos = np.unique(s >> (hs[0] - h))
                leaves = np.unique(pos >> k)
                b += 4 * (4 * (leaves.size * (1 << k) - pos.size)
                          + 8 * multiproof_count(leaves, hn, lc) + 8 * (1 << min(lc, hn))) + 27
            out.append(b)
        return float(np.mean(out)), float(np.std(out))

    print(f"{proof_path}: {total0} bytes; model at its own parameters: "
          f"{size(d.params.log_blowup, d.params.num_queries, d.params.log_fri_arity, d.params.log_cap)}")
    print("| lb, q | log arity | " + " | ".join(f"cap {c} KB" for c in range(5)) + " |")
    print("|---|---|" + "---|" * 5)
    for lb, q in ((1, 100), (2, 50), (3, 34)):
        for la in (2, 3, 4):
            print(f"| {lb}, {q} | {la} | " + " | ".join(f"{size(lb, q, la, c)[0] / 1000:.1f}"
                                                     for c in range(5)) + " |")


def run(tree: str, kind: str, pset: str) -> dict:
    env = dict(os.environ, PYTHONPATH=tree)
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", kind, pset]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tree)
    if res.returncode:
        raise RuntimeError(f"{tree} {kind} {pset}: {res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["example", "12", "14", "16"])
    ap.add_argument("--sets", nargs="+", default=["1,100,2,2"])
    ap.add_argument("--base", default=None, help="checkout of the format-2 prover")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json")
    ap.add_argument("--model", metavar="PROOF",
                    help="only the expected-size model for the block of this proof file")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.model:
        size_model(args.model)
        return 0
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return 0
    rows = []
    for _ in range(args.repeat):
        for kind in args.sizes:
            base = run(args.base, kind, "v2") if args.base else None
            if base:
                rows.append(base)
                print(json.dumps(base), flush=True)
            for pset in args.sets:
                r = run(ROOT, kind, pset)
                if base:
                    r["ratio_prove_s"] = r["prove_s"] / base["prove_s"]
                    r["ratio_cpu_s"] = r["cpu_s"] / base["cpu_s"]
                    r["ratio_bytes"] = r["file_bytes"] / base["file_bytes"]
                rows.append(r)
                print(json.dumps(r), flush=True)
    print("| block | set (lb,q,arity,cap) | file KB | prove s | CPU s | v3/v2 prove | "
          "v3/v2 size | bits (block / 2^24 limit) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['kind']} | {r['set']} | {r['file_bytes'] / 1000:.1f} | {r['prove_s']:.2f} | "
              f"{r['cpu_s']:.2f} | {r.get('ratio_prove_s', float('nan')):.2f} | "
              f"{r.get('ratio_bytes', float('nan')):.2f} | {r['security_bits']} / "
              f"{r.get('limit_bits', '-')} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
