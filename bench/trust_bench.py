"""What trust by default costs (issue #11): the self-check and the grinding steps as a share
of the same proof, per block size, on the host path.

    PYTHONPATH=. python bench/trust_bench.py [--sizes 12 14 16 18] [--hash-share 0.25]
                                             [--repeat 1] [--json out.json]

For each size k: a block of RISC-V transactions (block format 2) of about 2^k cycles
(``bench/make_block.py -k K --seed 1 --hash-share H``, :func:`bench.make_block.v2_block`;
k >= 10) is proved once with the default parameters and ``self_check=True`` after a
warm-up proof of a one-transaction block (tests/txblocks.py ``one_tx_block``, so no
compile time is counted).  From that one proof's ``ProofStats``:

* ``self_check`` -- the phase that verifies the finished proof with the verifier's code
  (everything ``verify`` does, on the CPU), as a share of the ``prove`` phase;
* ``grind`` -- every proof of work the protocol version 2 added (LogUp, z, lambda, FRI
  folds: the ``grind`` spans), as a share of ``prove``; the query proof of work of
  version 1 (``r4_pow``) is shown apart for scale;
* the security figure of the proof (its own shapes, docs/protocol.md section 7).

Same-run ratios only; the last line is ``trust: self-check A % .. B %, grinding C % .. D %
of prove time`` over the sizes run.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from steadfast.prover.api import Prover, ProverConfig, verify  # noqa: E402
from steadfast.rv32.blockfile import parse_block  # noqa: E402

from bench.make_block import K_RANGE, v2_block  # noqa: E402
from tests.txblocks import one_tx_block  # noqa: E402


def measure(prover: Prover, k: int, hash_share: float, seed: int = 1) -> dict:
    block = parse_block(v2_block(k, hash_share, seed)[0])
    t0 = time.perf_counter()
    proof = prover.prove_block(block)
    wall = time.perf_counter() - t0
    st = proof.stats
    prove_s = st.phases["prove"]
    check_s = st.phases.get("self_check", 0.0)
    grind_s = sum(s for n, _, s in st.records if n in ("grind", "r1_pow"))
    pow_s = sum(s for n, _, s in st.records if n == "r4_pow")
    res = verify(proof, block=block)
    return {"k": k, "cycles": st.cycles, "prove_s": round(prove_s, 3),
            "self_check_s": round(check_s, 4), "self_check_pct": round(100 * check_s / prove_s, 2),
            "grind_s": round(grind_s, 4), "grind_pct": round(100 * grind_s / prove_s, 2),
            "query_pow_s": round(pow_s, 4), "wall_s": round(wall, 3),
            "security_bits": res.security_bits, "weakest": res.security.limiting,
            "proof_bytes": len(proof.proof)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[12, 14, 16, 18])
    ap.add_argument("--hash-share", type=float, default=0.25)
    ap.add_argument("--seed", type=int, default=1, help="make_block's seed")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", help="write the rows as JSON")
    args = ap.parse_args(argv)
    if any(not K_RANGE[0] <= k <= K_RANGE[1] for k in args.sizes):
        ap.error(f"sizes must be in [{K_RANGE[0]}, {K_RANGE[1]}] (make_block's k)")
    prover = Prover(ProverConfig(backend="host"))
    prover.prove_block(one_tx_block())                  # warm-up: compile, load caches
    print(f"# {platform.machine()} {os.cpu_count()} cpus, python {platform.python_version()}")
    print(f"{'k':>3} {'cycles':>8} {'prove s':>8} {'check s':>8} {'check %':>8} "
          f"{'grind s':>8} {'grind %':>8} {'qpow s':>7} {'bits':>5} weakest")
    rows = []
    for k in args.sizes:
        for _ in range(args.repeat):
            r = measure(prover, k, args.hash_share, args.seed)
            rows.append(r)
            print(f"{r['k']:>3} {r['cycles']:>8} {r['prove_s']:>8.2f} {r['self_check_s']:>8.3f} "
                  f"{r['self_check_pct']:>7.2f}% {r['grind_s']:>8.3f} {r['grind_pct']:>7.2f}% "
                  f"{r['query_pow_s']:>7.3f} {r['security_bits']:>5} {r['weakest']}", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    cp = [r["self_check_pct"] for r in rows]
    gp = [r["grind_pct"] for r in rows]
    print(f"trust: self-check {min(cp):.2f} % .. {max(cp):.2f} %, grinding {min(gp):.2f} % .. "
          f"{max(gp):.2f} % of prove time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
