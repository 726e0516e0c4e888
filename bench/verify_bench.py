"""Verify time of block proofs (issue #13's target: <= 0.1 s at 2^18 cycles, first call
after import), measured in fresh processes (docs/benchmarks.md, "Verifier speed").

    PYTHONPATH=. python bench/verify_bench.py prove K OUT.stbp [--blowup B --queries Q ...]
    PYTHONPATH=. python bench/verify_bench.py measure OUT.stbp [OUT2.stbp ...] [--reps 3]

``prove`` writes the block proof (TxBlockProof, block format 2) of ``bench/make_block.py
-k K --hash-share 0.25`` (``make_block.v2_block(K, 0.25)``, seed 1; K >= 10: a block of
RISC-V transactions; host backend, the default parameters unless given) to OUT and the
block itself to OUT.block.json.  ``measure`` runs, per proof, a fresh Python process that
imports the library (timed), builds the block's AIRs (rv32.block.block_airs at the slots
read off the proof), then times:

* ``first``: the first ``steadfast.verifier.verify`` of the STARK proof after import
  (AIRs built beforehand: the AIR construction belongs to the statement, not the
  verifier), and ``api_first``: the block-level ``steadfast.prover.api.verify`` in
  another fresh process against OUT.block.json (AIR construction, the statement's
  programs, inputs and claims included);
* ``warm``: the best of ``--reps`` further calls, and its split: the per-table forks with
  their composition checks (``tables``) and the join (``join``: every opening, the DEEP
  quotients, the FRI), from the verifier's own entry points on the same proof.

Every figure is CPU time of the measuring process (``time.process_time``: user +
system), so that a loaded shared machine inflates it far less than wall time; the
ratios between figures of one run are the comparable part.  ``--root DIR`` measures
another checkout's library (e.g. a ``git archive`` of an earlier commit) with this
script: same-run before/after comparisons.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LIB = os.environ.get("VERIFY_BENCH_ROOT", ROOT)     # the checkout a child measures
if _LIB not in sys.path:
    sys.path.insert(0, _LIB)


def prove(k: int, out: str, params: dict) -> None:
    from steadfast.prover.api import Prover, ProverConfig
    from steadfast.rv32.blockfile import parse_block
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from bench.make_block import dump_v2, v2_block
    obj = v2_block(k, 0.25)[0]
    prover = Prover(ProverConfig(backend="host", **params))
    t = time.perf_counter()
    proof = prover.prove_block(parse_block(obj))
    proof.save(out)
    with open(out + ".block.json", "w") as fh:
        fh.write(dump_v2(obj))
    print(json.dumps({"k": k, "prove_s": round(time.perf_counter() - t, 2),
                      "bytes": len(proof.to_bytes()), "out": out}))


def _child(path: str, mode: str, reps: int) -> dict:
    t0 = time.process_time()
    if mode == "api":
        from steadfast.prover.api import verify as api_verify
        imp = time.process_time() - t0
        t = time.process_time()
        api_verify(path, block=path + ".block.json", min_security_bits=0)
        return {"import_s": imp, "api_first_s": time.process_time() - t}
    import numpy as np
    from steadfast.verifier import verify
    V = sys.modules["steadfast.verifier.verify"]     # (the package's ``verify`` is the function)
    from steadfast.prover.blocks.proof import TxBlockProof
    from steadfast.rv32 import block as rblock
    from steadfast.rv32.blockfile import load_block
    from steadfast.verifier.proof_format import decode
    imp = time.process_time() - t0
    bp = TxBlockProof.load(path)
    blk = load_block(path + ".block.json")
    # the slots (k items per row) as the verifier reads them: the tables' widths
    dec = decode(bp.proof)
    tx_slots, p2 = rblock.slots_of(dec, bp.n_tx)
    airs = rblock.block_airs([t.program for t in blk.transactions],
                             [t.input for t in blk.transactions], bp.outputs,
                             dec.params.log_blowup, tx_slots, p2)
    t = time.process_time()
    res = verify(bp.proof, airs, None, min_security_bits=0)
    first = time.process_time() - t
    warm = []
    for _ in range(reps):
        t = time.process_time()
        verify(bp.proof, airs, None, min_security_bits=0)
        warm.append(time.process_time() - t)
    # the split, with the verifier's own entry points (same steps as verify)
    from steadfast.air import CHALLENGE_NAMES
    from steadfast.verifier.field import ef_col
    from steadfast.verifier.proof_format import decode
    from steadfast.verifier.protocol import absorb_statement
    from steadfast.verifier.transcript import Transcript
    split = {"decode_shapes": [], "tables": [], "join": []}
    for _ in range(reps):
        t = time.process_time()
        proof = decode(bp.proof)
        shapes = V.check_shapes(proof, airs)
        t1 = time.process_time()
        tr = Transcript()
        absorb_statement(tr, proof.params, airs, shapes, [list(map(int, tp.public_values))
                                                          for tp in proof.tables])
        tr.absorb("main_cap", proof.commits.main_cap)
        tr.check_pow("logup_pow", proof.logup_nonce, proof.params.logup_pow_bits)
        chal = {CHALLENGE_NAMES[0]: ef_col(tr.sample_ef("logup_beta")),
                CHALLENGE_NAMES[1]: ef_col(tr.sample_ef("logup_gamma"))}
        states = [V.verify_table(tr.fork(i), a, sh, tp, proof.params, chal, proof.commits)
                  for i, (a, sh, tp) in enumerate(zip(airs, shapes, proof.tables))]
        t2 = time.process_time()
        V.verify_join(tr, proof.params, shapes, proof.tables, states, proof.fri, proof.commits)
        t3 = time.process_time()
        split["decode_shapes"].append(t1 - t)
        split["tables"].append(t2 - t1)
        split["join"].append(t3 - t2)
    return {"import_s": imp, "first_s": first, "warm_s": min(warm),
            **{f"{k}_s": min(v) for k, v in split.items()},
            "log_ns": [int(t.log_n) for t in decode(bp.proof).tables],
            "params": vars(decode(bp.proof).params), "bytes": len(bp.to_bytes()),
            "security_bits": res.security.bits}


def measure(paths, reps: int, root: str | None = None) -> list:
    out = []
    env = dict(os.environ)
    root = os.path.abspath(root or ROOT)
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    env["VERIFY_BENCH_ROOT"] = root
    for p in paths:
        row = {"proof": p}
        for mode in ("stark", "api"):
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "_child", p, mode,
                                str(reps)], capture_output=True, text=True, env=env, cwd=root)
            if r.returncode:
                raise RuntimeError(r.stderr)
            d = json.loads(r.stdout.strip().splitlines()[-1])
            if mode == "api":
                d = {"api_import_s": d["import_s"], "api_first_s": d["api_first_s"]}
            row.update(d)
        print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}),
              flush=True)
        out.append(row)
    return out


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "_child":
        print(json.dumps(_child(argv[1], argv[2], int(argv[3]))))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prove")
    p.add_argument("k", type=int)
    p.add_argument("out")
    for name in ("log_blowup", "num_queries", "log_fri_arity", "log_cap", "pow_bits"):
        p.add_argument("--" + name.replace("_", "-"), type=int, default=None)
    m = sub.add_parser("measure")
    m.add_argument("paths", nargs="+")
    m.add_argument("--reps", type=int, default=3)
    m.add_argument("--root", default=None, help="the library checkout to measure (default: "
                   "this one)")
    a = ap.parse_args(argv)
    if a.cmd == "prove":
        params = {n: getattr(a, n) for n in ("log_blowup", "num_queries", "log_fri_arity",
                                             "log_cap", "pow_bits") if getattr(a, n) is not None}
        prove(a.k, a.out, params)
    else:
        measure(a.paths, a.reps, a.root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
