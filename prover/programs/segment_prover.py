"""Proving a long run as linked segments (docs/rv32.md "Long programs: segments"), on one
machine (:func:`prove_segments`) or on a cluster's workers (:mod:`prover.cluster.segments`).

Two phases.  **Cutting**: the program is executed once, on this process, and cut into
segments; each is kept only as its *checkpoint* (:func:`rv32.segments.checkpoint`: its
in-boundary -- pc, registers, cursors -- and the words it touches with their values at its
start and end), never its trace.  **Proving**: each segment is re-run from its checkpoint
(:func:`rv32.segments.replay`, which refuses a re-run that does not end where the cut did),
its tables built and proved, and dropped before the next: the tables of one segment are in
memory at a time, whatever the program's length.

:class:`SegmentFeed` runs the cutting ahead of the proving, so that the number of segments
is known early (the live display's total) while the checkpoints held stay within
``ahead_bytes``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ...rv32.errors import ExecutionError
from ...rv32.segments import checkpoint, replay, run_segments
from ...rv32.traces import build_traces

from ..common.errors import UnprovableProgram

import logging
log = logging.getLogger("steadfast.prover")

#: checkpoints held ahead of the proving (bytes of their arrays)
DEFAULT_AHEAD_BYTES = 256 << 20


class SegmentFeed:
    """The cut segments' checkpoints, in order, cut ahead of their use while the
    checkpoints held stay under ``ahead_bytes``.  ``total``: the number of segments once
    the execution has ended (None before), ``cut``: segments cut so far, ``cycles``: their
    cycles.  An execution failure is an :class:`UnprovableProgram` (kind, pc, cycle), raised
    when the consumer reaches it."""

    def __init__(self, program, data: bytes, max_cycles: int, segment_cycles: int,
                 ahead_bytes: int = DEFAULT_AHEAD_BYTES):
        self._gen = run_segments(program, data, max_cycles, segment_cycles)
        self._queue: list = []
        self._held = 0
        self.ahead_bytes = ahead_bytes
        self.total: int | None = None
        self.cut = 0
        self.cycles = 0
        self._error: UnprovableProgram | None = None

    def _pull(self) -> bool:
        if self.total is not None or self._error is not None:
            return False
        try:
            seg = next(self._gen)
        except StopIteration:             # pragma: no cover - the final segment ends it
            self.total = self.cut
            return False
        except ExecutionError as exc:
            self._error = UnprovableProgram(f"execution failed: {exc}", exc.kind, exc.pc,
                                            exc.cycle)
            return False
        ck = checkpoint(seg)
        del seg
        self._queue.append(ck)
        self._held += _nbytes(ck)
        self.cut += 1
        self.cycles += ck.cycles
        if ck.final:
            self.total = self.cut
        return True

    def fill(self) -> None:
        """Cut ahead while the checkpoints held are under the bound."""
        while self._held < self.ahead_bytes and self._pull():
            pass

    def next(self):
        """The next checkpoint, or None after the last (an execution failure raises)."""
        if not self._queue:
            self._pull()
        if not self._queue:
            if self._error is not None:
                raise self._error
            return None
        ck = self._queue.pop(0)
        self._held -= _nbytes(ck)
        return ck

    def __iter__(self):
        while True:
            ck = self.next()
            if ck is None:
                return
            yield ck
            self.fill()


def _nbytes(ck) -> int:
    return int(ck.wa.nbytes + ck.v_in.nbytes + ck.v_out.nbytes) + len(ck.output) + 512


def segment_record(ck, proof: bytes):
    """The file's record of a proved segment."""
    from .segment_proof import SegmentRecord
    return SegmentRecord(ck.cycles, ck.final, int(ck.exit_code or 0),
                         0 if ck.final else int(ck.pc_out), tuple(int(x) for x in ck.regs_out),
                         np.asarray(ck.wa).astype(np.uint32),
                         np.asarray(ck.v_out).astype(np.uint32), ck.output, proof)


def prove_one(prover, program, data: bytes, max_cycles: int, segment_cycles: int, ck,
              t0: float | None = None):
    """Prove the segment of checkpoint ``ck`` on ``prover`` (a ProgramProver) -> (its
    protocol proof's bytes, ProofStats); the same bytes wherever it runs."""
    t0 = time.perf_counter() if t0 is None else t0
    phases: dict = {}
    with prover._phase("replay", phases):
        seg = replay(program, data, max_cycles, segment_cycles, ck)
    with prover._phase("traces", phases):
        tr = build_traces(program, None, max_cycles, segment=seg,
                          **prover.config.trace_options())
    seg.execution = None
    log.info("segment %d: cycles %d..%d", ck.index, ck.start_cycle, ck.start_cycle + ck.cycles)
    proof, st = prover._prove(tr.airs, tr.traces, tr.table_public_values, ck.cycles, phases,
                              t0, prover._check_program_tables, proof_id=ck.index)
    return proof, st


@dataclass
class SegmentTotals:
    """The counters and phases of a segmented proof, summed over its segments."""
    counters: dict = field(default_factory=dict)
    phases: dict = field(default_factory=dict)

    def add(self, st) -> None:
        for k, v in (st.counters or {}).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                self.counters[k] = self.counters.get(k, 0) + v
            elif isinstance(v, dict):
                _add_nested(self.counters.setdefault(k, {}), v)
        for k, v in (st.phases or {}).items():
            if k != "total":
                self.phases[k] = self.phases.get(k, 0.0) + v


def _add_nested(into: dict, d: dict) -> None:
    for k, v in d.items():
        if isinstance(v, dict):
            _add_nested(into.setdefault(k, {}), v)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            into[k] = into.get(k, 0) + v
        else:
            into.setdefault(k, v)


def recovery_downgrades(recovery: dict | None) -> int:
    """Tables downgraded to the host, summed over the sites of a proof's device recovery
    (``counters["device"]["recovery"]``; the cluster's counters too)."""
    return sum(int(c.get("downgrades", 0)) for c in (recovery or {}).values())


def segment_downgrades(st) -> int:
    """Tables of one segment's proof downgraded to the host (its device recovery)."""
    return recovery_downgrades((st.counters or {}).get("device", {}).get("recovery"))


def segment_progress(progress, done: int, feed: SegmentFeed, seconds: float) -> None:
    """Tell a progress display (prover/cli/display.py) that ``done`` segments are proved."""
    hook = getattr(progress, "segments", None)
    if hook is not None:
        hook(done, feed.total, feed.cut, seconds)


def prove_segments(prover, program, data: bytes, max_cycles: int, segment_cycles: int):
    """Cut, then prove each segment in turn on ``prover`` -> a SegmentedProof."""
    from .segment_proof import SegmentedProof
    from ..common.stats import ProofStats, peak_rss_bytes
    t0 = time.perf_counter()
    feed = SegmentFeed(program, data, max_cycles, segment_cycles)
    with prover._phase("execute", totals_phases := {}):
        feed.fill()
    totals = SegmentTotals(phases=totals_phases)
    records, seg_seconds, downgrades = [], [], []
    segment_progress(prover.progress, 0, feed, 0.0)
    for ck in feed:
        t1 = time.perf_counter()
        proof, st = prove_one(prover, program, data, max_cycles, segment_cycles, ck, t0)
        totals.add(st)
        downgrades.append(segment_downgrades(st))
        records.append(segment_record(ck, proof))
        seg_seconds.append(time.perf_counter() - t1)
        segment_progress(prover.progress, len(records), feed, seg_seconds[-1])
    totals.phases["total"] = time.perf_counter() - t0
    totals.counters["segments"] = {"proved": len(records), "retried": 0,
                                   "downgrades": downgrades}
    stats = ProofStats(counters=totals.counters, backend=prover.backend,
                       cycles=sum(r.cycles for r in records), phases=totals.phases,
                       proof_bytes=0, peak_rss_bytes=peak_rss_bytes())
    return SegmentedProof(segment_cycles, max_cycles, tuple(records), stats,
                          segment_seconds=tuple(seg_seconds))


__all__ = ["SegmentFeed", "prove_segments", "prove_one", "segment_record", "SegmentTotals",
           "DEFAULT_AHEAD_BYTES"]
