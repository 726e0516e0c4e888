"""Recovery soak: a long-lived node (one Prover, a device backend, faults on) proves N
blocks and must end every proof with nothing booked (issue #28).

    PYTHONPATH=. python bench/recovery_soak.py --proofs 200 [--backend emu] \
        [--budget 60000] [--faults 'oom@*:0.3'] [-k 10] [--blocks 4] [--json]

The blocks are blocks of RISC-V transactions (block format 2): block s is
``bench/make_block.py -k K --seed S+s --hash-share 0.25`` (:func:`bench.v2_blocks.sized_block`;
K >= 10, its smallest: the bench guest and a hello, 34 tables).  The default budget,
60,000 device bytes, admits the small tables of such a block (BITWISE, SHIFT, MUL, DIV,
STORE, IOWORD, P2CALL, POSEIDON2, ...: 3-60 KB each) and declines the larger ones (the
65,536-row BYTES table, ~137 MB; MEMORY, ALU, PROGRAM) at their first allocation, so
every proof mixes device tables, injected OOMs and host recoveries.
Each block is proved once on the host first (its reference bytes); then on the device
backend under the budget with ``PROVER_FAULTS`` (a fresh seed per proof, so each proof
draws other faults).  After every proof: the bytes equal the reference, the device
memory's ledger books 0 bytes and holds no live buffer.  At the end: no stale free was
dropped.  Prints one line per 10 proofs, then ``recovery_soak: N/N identical, booked
after every proof 0, retries R, downgrades D, stale frees 0, S s`` (or a JSON object);
exits 1 on any violation.  The test-sized variant is
tests/test_recovery_lifetime.py::test_a_node_proving_50_proofs_with_faults_ends_with_nothing_booked.
``--actor``: the same for a cluster actor (:func:`actor_rounds`; its test-sized variant is
tests/test_cluster_actor_lifetime.py).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from steadfast.prover.api import Prover, ProverConfig  # noqa: E402
from steadfast.prover.device.pipeline import device_memory  # noqa: E402

from bench.v2_blocks import K_RANGE, check_k, sized_block, tiny_block  # noqa: E402


def actor_rounds(rounds: int, budget: int | None, backend: str = "emu", queries: int = 8):
    """``rounds`` rounds on one cluster actor (:class:`prover.cluster.worker._Worker`,
    in this process, no Ray; PROVER_FAULTS as set by the caller): each round holds a
    sharded job's R1 pieces (every table's main commit, the AIRs rebuilt from the block's
    :class:`prover.blocks.prover.TxBlockAirs` as a cluster worker does), proves a whole
    block meanwhile (its epoch ends under the held pieces), then drops the job ->
    (whole-block proof bytes per round, ledger bytes in use after each round, live
    buffers after each round, the DeviceMemory).  The block:
    :func:`bench.v2_blocks.tiny_block` (one hello transaction, 18 tables), sent to the
    whole-block proof as its JSON, as the coordinator sends it."""
    import numpy as np
    from steadfast.prover.cluster.worker import _Worker
    from steadfast.prover.core.prove import prepare
    from steadfast.prover.blocks.prover import txblock_airs_spec
    cfg = ProverConfig(backend=backend, vram_budget=budget, num_queries=queries, pow_bits=2)
    worker = _Worker(cfg)
    block = tiny_block()
    params = cfg.params()
    exs, bt = Prover(cfg)._build_txblock(block, {})
    airs, traces, pvs = list(bt.airs), list(bt.traces), bt.table_public_values
    shapes = list(prepare(traces, airs, pvs, params, check=False).shapes)
    spec = txblock_airs_spec(block, exs, bt, params.log_blowup)
    obj = block.to_json()
    mem = device_memory(backend, budget)
    proofs, in_use, live = [], [], []
    for r in range(rounds):
        job = f"job{r}"
        for i in range(len(airs)):                 # a sharded job's R1 pieces, held
            worker.main_commit(job, i, spec, np.ascontiguousarray(traces[i]), params, shapes)
        proofs.append(worker.prove(obj, key=f"block{r}")[0])     # ends an epoch meanwhile
        worker.drop(job)                           # the job ends (or is abandoned)
        in_use.append(int(mem.ledger.in_use))
        live.append(len(mem._live))
    return proofs, in_use, live, mem


def _actor_main(args) -> int:
    t0 = time.perf_counter()
    os.environ["PROVER_FAULTS"] = f"{args.faults},seed=1"
    proofs, in_use, live, mem = actor_rounds(args.proofs, args.budget, args.backend, args.queries)
    bad = [f"round {k}: {b} B booked, {n} live buffers" for k, (b, n) in enumerate(zip(in_use, live)) if b or n]
    bad += [f"round {k}: bytes differ" for k, p in enumerate(proofs) if p != proofs[0]]
    secs = time.perf_counter() - t0
    out = {"mode": "actor", "rounds": args.proofs, "violations": bad[:20],
           "stale_frees_dropped": mem.stale_frees_dropped, "seconds": round(secs, 1)}
    if args.json:
        print(json.dumps(out))
    else:
        for v in bad[:20]:
            print("VIOLATION", v)
        print(f"recovery_soak --actor: {args.proofs} rounds (sharded pieces held across a whole "
              f"block each), {len(bad)} violations, booked after every round "
              f"{'0' if not bad else 'NOT 0'}, stale frees {mem.stale_frees_dropped}, {secs:.1f} s")
    return 1 if bad else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--proofs", type=int, default=200)
    ap.add_argument("--backend", default="emu", choices=("emu", "sim", "cuda"))
    ap.add_argument("--budget", type=int, default=60_000, help="device bytes")
    ap.add_argument("--faults", default="oom@*:0.3", help="PROVER_FAULTS terms (no seed)")
    ap.add_argument("--log-cycles", "-k", type=int, default=10,
                    help=f"about 2^k cycles a block (make_block's k, {K_RANGE[0]}..{K_RANGE[1]})")
    ap.add_argument("--blocks", type=int, default=4, help="distinct blocks, cycled")
    ap.add_argument("--seed", type=int, default=0, help="block s is make_block's seed SEED + s")
    ap.add_argument("--queries", type=int, default=8)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--actor", action="store_true",
                    help="a cluster actor instead of a node: --proofs rounds of held sharded "
                         "pieces + a whole block + drop (tests/test_cluster_actor_lifetime.py)")
    args = ap.parse_args(argv)
    if args.actor:
        return _actor_main(args)
    check_k(ap, args.log_cycles)
    kw = dict(num_queries=args.queries, pow_bits=2)
    blocks = [sized_block(args.log_cycles, 0.25, args.seed + s) for s in range(args.blocks)]
    host = Prover(ProverConfig(backend="host", **kw))
    refs = [host.prove_block(b).proof for b in blocks]
    node = Prover(ProverConfig(backend=args.backend, vram_budget=args.budget, **kw))
    mem = device_memory(args.backend, args.budget)
    bad, retries, downgrades = [], 0, 0
    t0 = time.perf_counter()
    for k in range(args.proofs):
        os.environ["PROVER_FAULTS"] = f"{args.faults},seed={k}"
        res = node.prove_block(blocks[k % len(blocks)])
        if res.proof != refs[k % len(blocks)]:
            bad.append(f"proof {k}: bytes differ")
        if mem.ledger.in_use or mem._live:
            bad.append(f"proof {k}: {mem.ledger.in_use} B booked, {len(mem._live)} live buffers")
        dev = res.stats.counters.get("device", {}) if res.stats is not None else {}
        for c in dev.get("recovery", {}).values():
            retries += c["retries"]
            downgrades += c["downgrades"]
        if (k + 1) % 10 == 0 and not args.json:
            print(f"  {k + 1} proofs, {time.perf_counter() - t0:.1f} s, booked {mem.ledger.in_use}",
                  flush=True)
    if mem.stale_frees_dropped:
        bad.append(f"{mem.stale_frees_dropped} stale frees dropped")
    secs = time.perf_counter() - t0
    out = {"proofs": args.proofs, "identical_and_nothing_booked": args.proofs - len(bad),
           "retries": retries, "downgrades": downgrades,
           "stale_frees_dropped": mem.stale_frees_dropped, "seconds": round(secs, 1),
           "violations": bad[:20]}
    if args.json:
        print(json.dumps(out))
    else:
        for b in bad[:20]:
            print("VIOLATION", b)
        print(f"recovery_soak: {args.proofs - len(bad)}/{args.proofs} identical, booked after "
              f"every proof {'0' if not bad else 'NOT 0'}, retries {retries}, downgrades "
              f"{downgrades}, stale frees {mem.stale_frees_dropped}, {secs:.1f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
