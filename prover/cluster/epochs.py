"""One long block proved in epochs on a cluster's workers
(:meth:`prover.cluster.ClusterProver.prove_block`, ``prove --cluster BLOCK.json``;
docs/rv32.md "Blocks in epochs").

The coordinator runs the block's transactions once without the record (sizing them and
checking the block's claims before any proving) and cuts the parts.  Every group part is
sent at once, as the sub-block of its transactions, to the least busy worker, which
proves it whole (one block STARK, the bytes one machine makes for those transactions);
every long transaction's segments are spread over the workers from checkpoints
(:mod:`prover.cluster.segments`, its kill and self-check re-runs included).  The parts are
assembled in order: the file is byte-identical to :meth:`Prover.prove_block` on one
machine.  A block within one epoch is one piece on one worker, as before.
"""
from __future__ import annotations

import time
from dataclasses import replace

from ..blocks.epoch_prover import block_plan, one_epoch, size_block, surely_one_epoch
from ..blocks.epochs import GROUP, LONG, BlockEpochsProof, Part
from ..blocks.proof import as_txblock, state_out_of
from ..common.stats import ProofStats, peak_rss_bytes
from ..programs.segment_prover import SegmentTotals


def prove_block(cp, block, timeout: float | None = None, progress=None):
    """Prove ``block`` on ``cp``'s workers -> a TxBlockProof (within one epoch) or a
    :class:`BlockEpochsProof`; ``progress(done, total, seconds, name)`` after each
    part."""
    t0 = time.perf_counter()
    blk = as_txblock(block)
    local = cp.local
    S = local.config.segment_cycles
    if S is None or local.dev_mode or surely_one_epoch(blk, S):
        return cp.submit(blk).result(timeout)
    runs = size_block(blk, S)
    plan = block_plan(runs, S)
    if one_epoch(plan):
        return cp.submit(blk).result(timeout)
    groups = {j: cp.submit(replace(blk, transactions=blk.transactions[a:a + c]))
              for j, (kind, a, c) in enumerate(plan) if kind == GROUP}
    parts: list = [None] * len(plan)
    totals = SegmentTotals()
    seconds = [0.0] * len(plan)
    segments, retries, done = 0, 0, 0

    def finished(j: int) -> None:
        nonlocal done
        done += 1
        seconds[j] = time.perf_counter() - t0
        if progress is not None:
            progress(done, len(plan), seconds[j], parts[j].name)

    for j, (kind, a, c) in enumerate(plan):
        if kind == LONG:
            tx = blk.transactions[a]
            sp = cp.prove_program_segmented(tx.program, tx.input, blk.max_cycles, S, timeout)
            parts[j] = Part(LONG, a, 1, sp.to_bytes())
            cl = sp.stats.counters.pop("cluster", {})
            sp.stats.counters.pop("segments", None)
            segments += len(sp.segments)
            retries += sum(cl.get("segment_retries", {}).values())
            totals.add(sp.stats)
            finished(j)
    for j, fut in groups.items():
        tp = fut.result(timeout)
        kind, a, c = plan[j]
        parts[j] = Part(GROUP, a, c, tp.proof)
        cl = tp.stats.counters.pop("cluster", {})
        retries += int(cl.get("retries", 0))
        totals.add(tp.stats)
        finished(j)
    out = BlockEpochsProof(len(blk.transactions), S, tuple(parts),
                           part_seconds=tuple(seconds))
    data = out.to_bytes()
    totals.phases["total"] = time.perf_counter() - t0
    totals.counters["parts"] = {"groups": len(groups), "long": len(plan) - len(groups),
                                "segments": segments}
    totals.counters["cluster"] = {"mode": "block-epochs", "workers": cp.workers,
                                  "parts": len(plan), "segments": segments,
                                  "retries": retries, "worker_deaths": cp.worker_deaths,
                                  "seconds": round(time.perf_counter() - t0, 4)}
    stats = ProofStats(counters=totals.counters, backend=local.backend,
                       cycles=sum(r.cycles for r in runs), phases=totals.phases,
                       proof_bytes=len(data), peak_rss_bytes=peak_rss_bytes())
    return replace(out, stats=stats, state_out=state_out_of(blk, runs))


__all__ = ["prove_block"]
