"""Cluster mode: prove on a Ray cluster (``pip install 'steadfast[cluster]'``).

    from steadfast.prover.cluster import ClusterProver
    from steadfast.prover.api import ProverConfig
    with ClusterProver(address=None, config=ProverConfig(), workers=2) as cp:
        for index, proof in cp.prove_many(blocks):        # completion order
            proof.stats.counters["cluster"]                # retries, workers, bytes moved
        proof = cp.submit(block).result(timeout=600)       # one block, concurrent.futures-like
        proof = cp.prove_sharded(block)                    # one block, its tables on workers

``address=None`` starts a local Ray instance (or joins the one this process already
started); otherwise it is a Ray address ("auto", "HOST:PORT", "ray://...") of a cluster
made with ``ray start --head`` / ``ray start --address`` (Ray's documentation).

Two ways to spread the work, same bytes as :meth:`prover.api.Prover.prove_block` on one
machine:

* **many blocks** -- one Ray actor per worker keeps one warm :class:`prover.api.Prover`
  (compiled kernels, its own VRAM budget and admission) for its lifetime and proves whole
  blocks; it asks for ``num_gpus=1`` when the cluster has GPUs, else ``num_cpus=1``.
* **one block, tables sharded** -- the coordinator executes the block and puts each
  table's trace in Ray's object store; each table goes through five pieces on the worker
  keeping its state (:mod:`prover.cluster.sharded`, proof format 6): ``main_commit`` (R1:
  its main leaf digests), ``aux`` (the LogUp sums committed: the aux leaf digests),
  ``quotient`` (R2 on its transcript fork: the parts' leaf digests), ``prove_table`` (R3
  and the DEEP quotient: its :class:`prover.core.rounds.R4Deep`, the DQ through the object
  store, its trees kept on the worker and replaced by proxies carrying their caps) and
  ``open_table`` (its rows at the query positions); between them the coordinator builds
  the three mixed-height trees (main, aux, parts) over the leaf digests in table order,
  absorbs the main cap and draws the LogUp challenges (with their proof of work), and
  hands the mixed aux and parts caps to the later pieces; it runs the join
  (:mod:`prover.cluster.join`: :func:`prover.core.rounds.r4_fri`, one FRI over all tables, on
  host stages; then every table's ``open_table`` launched at once, and
  :func:`prover.core.rounds.r4_open` with the mixed trees' multiproofs); then it runs the
  prover's self-check.  Each worker runs its pieces on the configured backend: host
  stages, or on a device backend one :class:`prover.device.stages.DeviceStages` per table
  (its buffers resident from R1 to its openings; recovery and downgrades as in the
  pipeline, counted per table).

Faults: a worker that dies (its process killed, its node gone) is restarted by Ray
(``max_restarts``, unlimited by default) and the coordinator re-runs its pieces on the
least busy live worker, at most ``max_retries`` times per piece (:class:`ClusterError`
beyond); a worker that does not hold a table's state (restarted, or another worker)
rebuilds it from the trace still in the object store up to the piece's start, replaying
the table's fork with the mixed caps it is sent, and checks each recomputed matrix's own
cap against the one the coordinator kept (the one whose leaf digests went into its mixed
tree) -- one asked to open trees it does not hold recomputes the table's whole chain so.
Pieces are deterministic, so the bytes do not depend on where or how often a piece ran;
every re-run, death and device downgrade is counted in ``stats.counters["cluster"]``
(and on the timeline).  A worker's own error (e.g. :class:`prover.api.UnprovableBlock`,
:class:`prover.api.ProofSelfCheckFailure`) is re-raised as the same exception type, not
retried; every wait has a timeout.

Modules: this one (:class:`ClusterProver`: many blocks, and the entry to sharded
proofs), :mod:`prover.cluster.pool` (the workers and their pieces: launch, wait, re-run),
:mod:`prover.cluster.worker` (the Ray actor), :mod:`prover.cluster.sharded` (one block's
tables sharded), :mod:`prover.cluster.join` (the coordinator's join over tree proxies),
:mod:`prover.cli.cluster` (``prove --cluster``).
"""
from __future__ import annotations

import pickle
import time
import uuid

from ..blocks.proof import TxBlockProof, as_txblock
from ..programs.segment_prover import recovery_downgrades
from .pool import DEFAULT_MAX_RETRIES, DEFAULT_START_TIMEOUT, WorkerPool, _Piece
from ..common.errors import ClusterError


class ClusterFuture:
    """The pending proof of one block or program (:meth:`ClusterProver.submit`,
    :meth:`ClusterProver.submit_program`)."""

    def __init__(self, cp: "ClusterProver", piece: _Piece, t0: float, result=None):
        self._cp, self._piece, self._t0 = cp, piece, t0
        self._make = result or cp._block_result
        self._result = None

    def done(self) -> bool:
        if self._result is not None:
            return True
        ready, _ = self._cp._ray.wait([self._piece.ref], timeout=0)
        return bool(ready)

    def result(self, timeout: float | None = None):
        """The TxBlockProof or ProgramProof (stats with ``counters["cluster"]``); re-raises
        the worker's error; :class:`TimeoutError` after ``timeout`` seconds."""
        if self._result is None:
            for piece, value in self._cp._gather([self._piece], timeout):
                self._result = self._make(piece, value, self._t0)
        return self._result


class ClusterProver(WorkerPool):
    """Proves blocks on a Ray cluster: ``workers`` actors, each with a warm Prover.

    ``address``: None starts (or joins) a local Ray instance with ``workers`` CPUs; else a
    Ray address.  ``config``: the :class:`prover.api.ProverConfig` every worker uses (its
    backend runs the worker's pieces: whole blocks through the device pipeline, sharded
    tables through per-table device stages).  ``worker_env``: environment variables set
    in every worker's process before its Prover is made (the PROVER_* switches of
    docs/diagnostics.md, e.g. ``{"PROVER_FAULTS": "oom@r2:1"}``; the coordinator's own
    environment is not changed).
    ``max_retries``: re-runs of one piece after its worker died.  ``max_restarts``: Ray
    restarts of one worker over its lifetime (-1: no limit -- a long-lived node survives
    occasional deaths; each piece stays bounded by ``max_retries`` and each wait for a
    restart by ``start_timeout``; a worker out of restarts is a ClusterError at once).
    A dead worker's pieces re-run on the least busy live worker (its node may be gone);
    it takes new pieces again once Ray has restarted it.
    ``timeline``: a
    :class:`prover.common.timeline.Timeline` that gets one complete event per piece (launch to
    result, as the coordinator saw it), an instant ``cluster:rerun`` per re-run, and the
    workers' own events (retries, downgrades, device stages) as process "worker W".
    ``fault``: test hook
    ("kill@block:INDEX", "kill@main_commit:TABLE", "kill@prove_table:TABLE",
    "kill@open_table:TABLE": the worker
    kills its own process the first time it reaches that piece; "stall@...": it sleeps
    there, see :meth:`arm`)."""

    def __enter__(self) -> "ClusterProver":
        return self

    # -- many blocks --------------------------------------------------------------
    def _block_piece(self, block, index) -> tuple[_Piece, object]:
        # a malformed block fails here, typed; it travels self-contained (its ELFs and
        # inputs inline)
        blk = as_txblock(block)
        piece = _Piece(self._least_busy(), "prove", (blk.to_json(), f"block:{index}"), index)
        piece.block = blk
        return piece, blk

    def _block_result(self, piece: _Piece, value, t0: float):
        data, stats, _ = value
        from dataclasses import replace
        from ..blocks.epochs import MAGIC as EPOCHS, BlockEpochsProof
        from ..blocks.proof import state_out_of
        stats.counters["cluster"] = self._counters("blocks", piece, stats, len(data), t0)
        if data[:4] == EPOCHS:          # a block in epochs, its parts proved on one worker
            bp = BlockEpochsProof.from_bytes(data)
            state = None if piece.block is None else state_out_of(piece.block, bp.claims)
            return replace(bp, stats=stats, state_out=state)
        tp = TxBlockProof.from_bytes(data)
        state = None if piece.block is None else state_out_of(piece.block, tp.claims)
        return TxBlockProof(tp.n_tx, tp.proof, stats, tp.dev, state)

    def _counters(self, mode: str, piece: _Piece, stats, size: int, t0: float) -> dict:
        return {"mode": mode, "workers": self.workers, "worker": piece.worker,
                "retries": piece.attempts, "gpus": self.gpus, "backend": stats.backend,
                "device_downgrades": recovery_downgrades(
                    stats.counters.get("device", {}).get("recovery")),
                "worker_deaths_total": self.worker_deaths,
                "bytes_through_object_store": size + len(pickle.dumps(piece.args)),
                "seconds": round(time.perf_counter() - t0, 4)}

    def submit(self, block) -> ClusterFuture:
        """Start proving ``block`` (Block, dict, JSON text or path) on the least busy
        worker; -> a :class:`ClusterFuture`."""
        t0 = time.perf_counter()
        piece, _ = self._block_piece(block, f"submit:{uuid.uuid4().hex[:8]}")
        self._launch(piece)
        return ClusterFuture(self, piece, t0)

    def prove_many(self, blocks, timeout: float | None = None, per_worker: int = 2):
        """Prove ``blocks`` across the workers; yield (index, TxBlockProof) in completion
        order.  At most ``per_worker`` blocks are queued on a worker at a time (the next
        one waits in the coordinator, so a fast worker takes more).  ``timeout``: for the
        whole batch (:class:`TimeoutError`)."""
        yield from self._many(list(blocks), self._block_piece, self._block_result, timeout,
                              per_worker)

    def _many(self, items: list, make_piece, result, timeout, per_worker: int):
        """Launch ``make_piece(item, index)`` pieces, at most ``per_worker`` per worker at a
        time, and yield (index, ``result(piece, value, t0)``) as they finish."""
        todo = list(enumerate(items))[::-1]
        starts: dict = {}

        def take(n):
            out = []
            while todo and len(out) < n:
                idx, item = todo.pop()
                piece, _ = make_piece(item, idx)
                starts[idx] = time.perf_counter()
                out.append(piece)
                self._inflight[piece.worker] += 1    # reserve while choosing the next
            for p in out:
                self._inflight[p.worker] -= 1
            return out

        def feed():
            free = len(self._live()) * per_worker - sum(self._inflight)
            return take(max(0, free))

        first = take(self.workers * per_worker)
        for piece, value in self._gather(first, timeout, feed):
            yield piece.tag, result(piece, value, starts[piece.tag])

    # -- many programs ----------------------------------------------------------------
    def _program_piece(self, job, index) -> tuple[_Piece, object]:
        """A program job -- ``elf``, ``(elf, input)`` or ``(elf, input, max_cycles)``; elf a path,
        the ELF's bytes or an rv32 Program -- checked here (a malformed ELF or argument
        fails at once, typed) and sent to a worker as a Program."""
        from ..programs.proof import as_input, as_program
        from ..programs.prover import CONFIG
        job = list(job) if isinstance(job, (tuple, list)) else [job]
        if not 1 <= len(job) <= 3:
            raise TypeError("a program job is elf, (elf, input) or (elf, input, max_cycles)")
        elf, data, limit = job + [b"", None][len(job) - 1:]
        _, limit = self.local._segmenting(CONFIG, limit)
        args = (as_program(elf), as_input(data), limit)
        return _Piece(self._least_busy(), "prove_program", args + (f"program:{index}",),
                      index), args

    def _program_result(self, piece: _Piece, value, t0: float):
        from ..programs.proof import ProgramProof
        from ..programs.segment_proof import MAGIC as SEGMENTED, SegmentedProof
        data, stats, _ = value
        stats.counters["cluster"] = self._counters("programs", piece, stats, len(data), t0)
        if data[:4] == SEGMENTED:       # a long run, its segments proved on one worker
            sp = SegmentedProof.from_bytes(data)
            return SegmentedProof(sp.segment_cycles, sp.max_cycles, sp.segments, stats)
        pp = ProgramProof.from_bytes(data)
        return ProgramProof(pp.proof, stats, pp.dev)

    def submit_program(self, elf, input: bytes = b"", max_cycles: int | None = None) -> ClusterFuture:
        """Start proving ``elf`` on ``input`` (as :meth:`prover.api.Prover.prove_program`)
        on the least busy worker; -> a :class:`ClusterFuture` whose result is a
        ProgramProof."""
        t0 = time.perf_counter()
        job = (elf, input) if max_cycles is None else (elf, input, max_cycles)
        piece, _ = self._program_piece(job, f"submit:{uuid.uuid4().hex[:8]}")
        self._launch(piece)
        return ClusterFuture(self, piece, t0, self._program_result)

    def prove_programs(self, jobs, timeout: float | None = None, per_worker: int = 2):
        """Prove program ``jobs`` -- each ``(elf, input)`` or ``(elf, input, max_cycles)`` --
        across the workers; yield (index, ProgramProof) in completion order (as
        :meth:`prove_many`)."""
        yield from self._many(list(jobs), self._program_piece, self._program_result, timeout,
                              per_worker)

    # -- one long program, its segments on the workers --------------------------------
    def prove_program_segmented(self, elf, input: bytes = b"", max_cycles: int | None = None,
                                segment_cycles: int | None = None,
                                timeout: float | None = None, progress=None):
        """Prove one program run in segments across the workers (one execution here,
        each segment proved on a worker from its checkpoint; a killed worker or a
        segment failing its self-check costs that segment a re-run) -> a SegmentedProof,
        the same bytes as ``Prover.prove_program`` on one machine; a run within one
        segment is one ProgramProof proved on one worker
        (:func:`prover.cluster.segments.prove_program_segmented`)."""
        from .segments import prove_program_segmented
        return prove_program_segmented(self, elf, input, max_cycles, segment_cycles, timeout,
                                       progress)

    # -- one block, in epochs when it is long ---------------------------------------------
    def prove_block(self, block, timeout: float | None = None, progress=None):
        """Prove one block: within one epoch as one piece on one worker (a TxBlockProof);
        longer, its parts across the workers -- group parts as sub-blocks, long
        transactions' segments from checkpoints -- -> a BlockEpochsProof, the bytes
        ``Prover.prove_block`` makes on one machine
        (:func:`prover.cluster.epochs.prove_block`)."""
        from .epochs import prove_block
        return prove_block(self, block, timeout, progress)

    # -- one block, tables sharded ------------------------------------------------------
    def prove_sharded(self, block, timeout: float | None = None) -> TxBlockProof:
        """Prove one block with its tables spread over the workers (each on the configured
        backend: host stages, or per-table device stages); the same bytes as
        ``Prover.prove_block`` on one machine; the proof is self-checked here
        (:func:`prover.cluster.sharded.prove_sharded`)."""
        from .sharded import prove_sharded
        return prove_sharded(self, block, timeout)

    def prove_program_sharded(self, elf, input: bytes = b"", max_cycles: int | None = None,
                              timeout: float | None = None):
        """Prove one program run with its tables spread over the workers -> a
        ProgramProof, the same bytes as ``Prover.prove_program`` on one machine
        (:func:`prover.cluster.sharded.prove_program_sharded`)."""
        from .sharded import prove_program_sharded
        return prove_program_sharded(self, elf, input, max_cycles, timeout)


__all__ = ["ClusterProver", "ClusterFuture", "ClusterError", "DEFAULT_MAX_RETRIES",
           "DEFAULT_START_TIMEOUT"]
