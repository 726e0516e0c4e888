"""Proving a block in epochs (docs/rv32.md "Blocks in epochs"): the block's transactions
are run once without the record, to size them, check the block's claims and cut the
parts (:func:`prover.blocks.epochs.plan_parts`); then each part is proved in turn -- a
group of short transactions as one block STARK (run again with the record, its tables
built, proved and dropped), a long transaction as a segmented program proof
(:func:`prover.programs.segment_prover.prove_segments`, one segment at a time) -- so the
prover holds one epoch's tables at a time, whatever the block's length.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from ...rv32 import block as rblock
from ...rv32.errors import ExecutionError
from ...rv32.run import execute as rv32_execute
from ...rv32.segments import run_segments

from ..common.errors import UnprovableBlock
from ..common.stats import ProofStats, peak_rss_bytes
from ..programs.segment_prover import SegmentTotals, prove_segments, segment_downgrades
from .transactions import _check_claims, run_transaction
from .epochs import GROUP, LONG, BlockEpochsProof, Part, plan_parts

log = logging.getLogger("steadfast.prover")


@dataclass(frozen=True)
class TxRun:
    """A transaction as the sizing run found it: cycles, exit code, output (stderr only
    for a transaction within one epoch) and whether it is longer than one epoch."""
    cycles: int
    exit_code: int
    output: bytes
    stderr: bytes
    long: bool


def size_transaction(i: int, tx, max_cycles: int, segment_cycles: int) -> TxRun:
    """Run transaction ``i`` without the record: within one epoch by the fast
    interpreter, past it in segments (no touched words kept) -> :class:`TxRun`; an
    execution failure is an :class:`UnprovableBlock` naming the transaction (the cycle
    limit: the block's max_cycles)."""
    where = f"transaction {i} ({tx.name})"
    try:
        ex = rv32_execute(tx.program, tx.input, min(max_cycles, segment_cycles))
        return TxRun(int(ex.cycles), int(ex.exit_code), bytes(ex.output), bytes(ex.stderr),
                     False)
    except ExecutionError as exc:
        if exc.kind != "cycles" or max_cycles <= segment_cycles:
            raise UnprovableBlock(f"{where}: execution failed: {exc}",
                                  table=f"{rblock.tx_prefix(i)}rv32") from None
    cycles, out, code = 0, bytearray(), 0
    try:
        for seg in run_segments(tx.program, tx.input, max_cycles, segment_cycles,
                                record=False):
            cycles += seg.cycles
            out += seg.output
            code = int(seg.exit_code or 0)
    except ExecutionError as exc:
        raise UnprovableBlock(f"{where}: execution failed: {exc}",
                              table=f"{rblock.tx_prefix(i)}rv32") from None
    return TxRun(cycles, code, bytes(out), b"", True)


def size_block(blk, segment_cycles: int, claims: bool = True) -> list:
    """Every transaction's :class:`TxRun` (``claims``: the block's claims checked, a
    false one an :class:`UnprovableBlock`)."""
    runs = []
    for i, tx in enumerate(blk.transactions):
        r = size_transaction(i, tx, blk.max_cycles, segment_cycles)
        if claims:
            _check_claims(i, tx, r)
        runs.append(r)
    return runs


def surely_one_epoch(blk, segment_cycles: int) -> bool:
    """Whether the block fits one epoch whatever its transactions run: every one runs at
    most max_cycles, so n * max_cycles <= S bounds them all (no sizing run needed)."""
    return blk.max_cycles * len(blk.transactions) <= segment_cycles


def block_plan(runs, segment_cycles: int) -> list:
    """The parts of a block whose transactions ran ``runs``."""
    return plan_parts([None if r.long else r.cycles for r in runs], segment_cycles)


def one_epoch(plan) -> bool:
    """Whether the block is one group or empty (proved as one block STARK, STB2, as
    always)."""
    return not plan or (len(plan) == 1 and plan[0][0] == GROUP)


def part_airs(prover, blk, part) -> list:
    """The AIRs a part's proof uses (a long part: its first segment's; the others differ
    only in their preprocessed boundary values) -- for precompiling its kernels."""
    from ...rv32.traces import build_traces
    kind, first, count = part
    txs = blk.transactions[first:first + count]
    if kind == LONG:
        seg = next(iter(run_segments(txs[0].program, txs[0].input, blk.max_cycles,
                                     prover.config.segment_cycles)))
        return build_traces(txs[0].program, None, blk.max_cycles, segment=seg,
                            **prover.config.trace_options()).airs
    exs = [run_transaction(first + k, tx, blk.max_cycles, claims=False)
           for k, tx in enumerate(txs)]
    return rblock.build_block_traces([t.program for t in txs], exs, blk.max_cycles,
                                     **prover.config.trace_options()).airs


def part_progress(progress, done: int, total: int, seconds: float, name: str) -> None:
    """Tell a progress display (prover/cli/display.py) that ``done`` parts are proved."""
    hook = getattr(progress, "parts", None)
    if hook is not None:
        hook(done, total, seconds, name)


def prove_epochs(prover, blk, runs, plan, t0: float, phases: dict) -> BlockEpochsProof:
    """Prove every part of ``plan`` in turn on ``prover`` (a :class:`prover.api.Prover`)
    -> a :class:`BlockEpochsProof` (``stats``: the parts' counters and phases summed;
    ``counters["parts"]``)."""
    S = prover.config.segment_cycles
    totals = SegmentTotals(phases=dict(phases))
    parts, seconds, downgrades, segments = [], [], [], 0
    part_progress(prover.progress, 0, len(plan), 0.0, "")
    for j, (kind, first, count) in enumerate(plan):
        t1 = time.perf_counter()
        txs = blk.transactions[first:first + count]
        if kind == GROUP:
            ph: dict = {}
            with prover._phase("execute", ph):
                exs = [run_transaction(first + k, tx, blk.max_cycles, claims=False)
                       for k, tx in enumerate(txs)]
            with prover._phase("traces", ph):
                bt = rblock.build_block_traces([t.program for t in txs], exs, blk.max_cycles,
                                               **prover.config.trace_options())
            del exs
            log.info("block part %d: transactions %d..%d (%d cycles)", j, first,
                     first + count - 1, bt.cycles)
            proof, st = prover._prove(bt.airs, bt.traces, bt.table_public_values, bt.cycles,
                                      ph, t1, prover._check_txblock, proof_id=j)
            del bt
            downgrades.append(segment_downgrades(st))
        else:
            tx = txs[0]
            log.info("block part %d: transaction %d in segments (%d cycles)", j, first,
                     runs[first].cycles)
            seg = prove_segments(prover, tx.program, tx.input, blk.max_cycles, S)
            proof, st = seg.to_bytes(), seg.stats
            segments += len(seg.segments)
            downgrades.append(sum(st.counters.get("segments", {}).get("downgrades", [])))
            st.counters.pop("segments", None)
        totals.add(st)
        parts.append(Part(kind, first, count, proof))
        seconds.append(time.perf_counter() - t1)
        part_progress(prover.progress, j + 1, len(plan), seconds[-1], parts[-1].name)
    totals.phases["total"] = time.perf_counter() - t0
    totals.counters["parts"] = {"groups": sum(p.kind == GROUP for p in parts),
                                "long": sum(p.kind == LONG for p in parts),
                                "segments": segments, "downgrades": downgrades}
    out = BlockEpochsProof(len(blk.transactions), S, tuple(parts), part_seconds=tuple(seconds))
    stats = ProofStats(counters=totals.counters, backend=prover.backend,
                       cycles=sum(r.cycles for r in runs), phases=totals.phases,
                       proof_bytes=len(out.to_bytes()), peak_rss_bytes=peak_rss_bytes())
    from .proof import state_out_of
    from dataclasses import replace
    return replace(out, stats=stats, state_out=state_out_of(blk, runs))


__all__ = ["TxRun", "size_transaction", "size_block", "block_plan", "one_epoch",
           "prove_epochs", "part_airs", "surely_one_epoch"]
