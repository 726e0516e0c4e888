"""Cluster mode on a local Ray (prover/cluster/__init__.py): N blocks on 1 vs 2 workers, and one
block sharded vs unsharded -- wall time, scheduling/transfer overhead as a share of the
proof, bytes moved through the object store.

    PYTHONPATH=. .venv/bin/python bench/cluster_bench.py [--blocks 4] [-k 10] [--seed 0]
        [--backend host|emu|sim|cuda]

The blocks are blocks of RISC-V transactions (block format 2): block s is
``bench/make_block.py -k K --seed SEED+s --hash-share 0.25`` (:func:`bench.v2_blocks.sized_block`,
K >= 10: the bench guest, 0-2 small guests and a hello), sent to the workers
self-contained (ELFs inline); every proof also carries the block's ``state_out``, which
must equal the one machine's.

``--backend``: the workers' backend (and the one-machine run's); every proof is compared
with the host backend's bytes of the same block.

Every figure is a same-run comparison.  The overhead is what the cluster adds around the
proving itself: for N blocks on one worker (one block in flight, so nothing overlaps),
(wall - sum of the workers' own proof times) / that sum; for the sharded block, (wall -
the coordinator's share (execute, traces, the join's FRI over the tables' DEEP
quotients, self-check) - the slowest worker's pieces: main commits, chains, openings) /
the one-machine proof.  On a
machine with few cores shared with other work the speed-up is not meaningful (two
workers on two busy cores); the overhead is.  Parameters are WEAK by default (8 queries,
little grinding: --queries / --pow-bits to change) -- the bench measures the cluster,
not the protocol.  Last line: ``cluster: W workers, speed-up S, overhead O %``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from steadfast.prover.api import Prover, ProverConfig, verify  # noqa: E402

from bench.v2_blocks import K_RANGE, check_k, sized_block  # noqa: E402


def _many(cp, blocks, per_worker):
    t = time.perf_counter()
    out = dict(cp.prove_many(blocks, per_worker=per_worker))
    wall = time.perf_counter() - t
    work = sum(p.stats.phases["total"] for p in out.values())
    moved = sum(p.stats.counters["cluster"]["bytes_through_object_store"] for p in out.values())
    return out, wall, work, moved


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=4, help="N blocks for the many-block runs")
    ap.add_argument("--log-cycles", "-k", type=int, default=10,
                    help=f"about 2^k cycles per block (make_block's k, {K_RANGE[0]}..{K_RANGE[1]})")
    ap.add_argument("--seed", type=int, default=0, help="block s is make_block's seed SEED + s")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--queries", type=int, default=8)
    ap.add_argument("--pow-bits", type=int, default=2)
    ap.add_argument("--backend", default="host", help="the workers' backend (default host)")
    args = ap.parse_args(argv)
    check_k(ap, args.log_cycles)
    import ray
    from steadfast.prover.cluster import ClusterProver
    cfg = ProverConfig(backend=args.backend, num_queries=args.queries, pow_bits=args.pow_bits,
                       logup_pow_bits=0, deep_pow_bits=0, commit_pow_bits=0)
    blocks = [sized_block(args.log_cycles, 0.25, args.seed + s) for s in range(args.blocks)]
    W = args.workers
    print(f"cluster bench: {args.blocks} blocks of ~2^{args.log_cycles} cycles "
          f"({'/'.join(str(len(b.transactions)) for b in blocks)} transactions), {W} workers, "
          f"{os.cpu_count()} cores, backend {args.backend}, WEAK parameters ({args.queries} queries, pow {args.pow_bits})")

    # one machine, in this process: the reference bytes and the proof time
    local = Prover(cfg)
    local.prove_block(blocks[0])                       # warm
    t = time.perf_counter()
    ref = [local.prove_block(b) for b in blocks]
    local_wall = time.perf_counter() - t
    if args.backend != "host":               # the bytes every backend must give
        import dataclasses
        host = Prover(dataclasses.replace(cfg, backend="host"))
        for b, r in zip(blocks, ref):
            assert host.prove_block(b).to_bytes() == r.to_bytes(), "backend bytes differ"
    print(f"local       : {args.blocks} blocks in {local_wall:7.2f}s "
          f"({local_wall / args.blocks:.2f}s per block)")

    t = time.perf_counter()
    ray.init(address="local", num_cpus=W, include_dashboard=False, log_to_driver=False,
             object_store_memory=256 << 20)
    print(f"ray start   : {time.perf_counter() - t:7.2f}s")
    res = {}
    for w in sorted({1, W}):
        t = time.perf_counter()
        with ClusterProver(config=cfg, workers=w) as cp:
            start = time.perf_counter() - t
            _many(cp, blocks[:1] * w, per_worker=1)          # warm every worker
            out, wall, work, moved = _many(cp, blocks, per_worker=1 if w == 1 else 2)
            for i, p in out.items():
                assert p.to_bytes() == ref[i].to_bytes(), f"block {i}: bytes differ"
                assert p.state_out == ref[i].state_out, f"block {i}: state_out differs"
                checked = verify(p, block=blocks[i], min_security_bits=0)   # weak parameters
                assert checked.state_out == ref[i].state_out
            res[w] = (wall, work, moved)
            print(f"{w} worker(s) : {args.blocks} blocks in {wall:7.2f}s (workers' proofs "
                  f"{work:.2f}s, start {start:.2f}s), {moved:,} bytes through the object store")
            if w == W:
                # one block, tables sharded, against the same block on one machine
                cp.prove_sharded(blocks[0])                           # warm the pieces
                t = time.perf_counter()
                sp = cp.prove_sharded(blocks[0])
                s_wall = time.perf_counter() - t
                assert sp.to_bytes() == ref[0].to_bytes(), "sharded bytes differ"
                assert sp.state_out == ref[0].state_out, "sharded state_out differs"
                c = sp.stats.counters["cluster"]
                per_worker: dict = {}
                tables = [tb.name for tb in sp.stats.tables]
                for name, tab, s in sp.stats.records:
                    if name in ("r1_main", "table", "table_open") and tab in tables:
                        k = tables.index(tab) % W
                        per_worker[k] = per_worker.get(k, 0.0) + s
                coord = sum(v for k, v in sp.stats.phases.items()
                            if k in ("execute", "traces", "join", "self_check"))
                one = ref[0].stats.phases["total"]
                s_over = (s_wall - coord - max(per_worker.values())) / one
                print(f"sharded     : 1 block in {s_wall:7.2f}s vs {one:.2f}s on one machine "
                      f"(ratio {one / s_wall:.2f}); slowest worker {max(per_worker.values()):.2f}s, "
                      f"coordinator {coord:.2f}s; overhead {100 * s_over:.1f} % of the proof; "
                      f"{c['bytes_through_object_store']:,} bytes through the object store")
    ray.shutdown()
    wall1, work1, _ = res[1]
    overhead = (wall1 - work1) / work1
    speedup = wall1 / res[W][0]
    print(f"overhead (1 worker, N blocks): wall {wall1:.2f}s - proofs {work1:.2f}s = "
          f"{wall1 - work1:.2f}s ({(wall1 - work1) / args.blocks:.3f}s per block)")
    print(f"cluster: {W} workers, speed-up {speedup:.2f}, overhead {100 * overhead:.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
