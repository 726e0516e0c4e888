"""Cluster mode's worker side (:mod:`prover.cluster`): one Ray actor per worker, a warm
:class:`prover.api.Prover` for whole blocks and programs and, for sharded proofs (a
block's AIRs rebuilt from its ROM, a program's from its
:class:`prover.program_prover.ProgramAirs`), each table's state
between its pieces -- its R1 main commit, its chain to the DEEP quotient (the DQ sent
back, the trees kept), its openings at the join's query positions.  Every piece is
deterministic: a worker without a table's state (restarted, or not the table's worker)
recomputes it from the trace in the object store and checks the caps against the ones
already absorbed.
"""
from __future__ import annotations

import copyreg
import dataclasses
import os
import signal
import time

import numpy as np

from .api import Prover, ProverConfig
from .cluster_join import _table_step, _TreeRef
from .errors import ClusterError, ProofSelfCheckFailure


def _reduce_self_check_failure(exc: ProofSelfCheckFailure):
    return ProofSelfCheckFailure, (str(exc), exc.postmortem, exc.report)


# a worker's ProofSelfCheckFailure must cross processes as itself (its __init__ takes three
# arguments, which the default exception pickling does not pass back)
copyreg.pickle(ProofSelfCheckFailure, _reduce_self_check_failure)


def _maybe_die(fault: str | None, fault_dir: str | None, key: str) -> None:
    """Test hook: ``fault`` = "kill@KEY" kills this worker's process (SIGKILL, mid-proof)
    the first time it reaches piece KEY (once per fault_dir, across restarts);
    "stall@KEY" writes the marker file ``stall_KEY`` there and sleeps (at most 120 s) the
    first time, so that a test can take the worker's node away mid-piece.  Several terms
    separated by commas."""
    if not fault or not fault_dir:
        return
    terms = fault.split(",")
    for kind in ("kill", "stall"):
        if f"{kind}@{key}" not in terms:
            continue
        name = key.replace(":", "_") if kind == "kill" else "stall_" + key.replace(":", "_")
        try:
            fd = os.open(os.path.join(fault_dir, name), os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            continue
        os.close(fd)
        if kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(120.0)


def _writable(a):
    """Arrays from the object store are read-only views of shared memory; the host
    kernels are compiled for writable arrays: a private copy (one table's trace).  What
    is not an array (a program's :class:`prover.program_prover.ProgramAirs`) as it is."""
    if not isinstance(a, np.ndarray):
        return a
    return a if a.flags.writeable else a.copy()


def _airs_of(source, shapes, params) -> list:
    """The AIRs of a sharded proof's tables, rebuilt from what the coordinator sent: a
    block's :class:`prover.txblock_prover.TxBlockAirs` or a program's
    :class:`prover.program_prover.ProgramAirs`."""
    return source.airs()


class _Worker:
    """One Ray actor: a warm Prover for whole blocks, and per-table state for sharded
    proofs (``state[(job, table)]`` = the table's main commitment, preprocessed LDE and
    its stages: host, or one :class:`prover.device_stages.DeviceStages` per table on a
    device backend, holding the table's resident buffers between R1 and its chain).
    ``env``: environment variables set in this worker's process before its Prover is
    made (the PROVER_* switches of docs/diagnostics.md, e.g. PROVER_FAULTS)."""

    def __init__(self, config: ProverConfig, fault: str | None = None,
                 fault_dir: str | None = None, env: dict | None = None):
        os.environ.update(env or {})
        self.prover = Prover(config)
        self.fault, self.fault_dir = fault, fault_dir
        self.state: dict = {}

    def ping(self) -> int:
        return os.getpid()

    def where(self) -> tuple:
        """(process id, Ray node id) of this worker."""
        import ray
        return os.getpid(), ray.get_runtime_context().get_node_id()

    def arm(self, fault: str | None, fault_dir: str | None) -> None:
        """Test hook: this worker's fault terms (see :func:`_maybe_die`)."""
        self.fault, self.fault_dir = fault, fault_dir

    def _whole(self, key: str, timeline: bool, prove):
        """One whole proof ``prove()`` on this worker's Prover -> (proof bytes, ProofStats,
        timeline events or None)."""
        _maybe_die(self.fault, self.fault_dir, key)
        tl = self._timeline(timeline)
        self.prover.timeline = tl
        try:
            proof = prove()
        finally:
            self.prover.timeline = None
        return proof.to_bytes(), proof.stats, (tl.to_json()["traceEvents"] if tl else None)

    def prove(self, block: dict, key: str, timeline: bool = False):
        """A whole block -> (TxBlockProof bytes, ProofStats, timeline events or None)."""
        return self._whole(key, timeline, lambda: self.prover.prove_block(block))

    def prove_program(self, program, data: bytes, max_cycles: int, key: str,
                      timeline: bool = False):
        """A whole program run -> (ProgramProof bytes, ProofStats, timeline events or
        None)."""
        return self._whole(key, timeline, lambda: self.prover.prove_program(
            program, data, max_cycles=max_cycles))

    # -- sharded: R1 main commit, then the table's chain after the fork ---------------
    def _stages(self, shape, params, tl):
        """The stages of one table of a sharded proof: host stages, or on a device backend
        a DeviceStages of its own (its recovery counters and transfers are the table's)
        over this process's device memory and budget (the PROVER_* switches apply)."""
        from .stages import HostStages
        if self.prover.backend == "host":
            return HostStages()
        from .device_stages import device_gate
        from .pipeline import device_memory, estimate_bytes, make_stages
        from .recovery import RecoveryCounters
        pcfg = self.prover._device_config()
        pcfg.timeline = tl
        stages = make_stages(pcfg, device_memory(pcfg.backend, pcfg.budget),
                             RecoveryCounters(), proof_id=0)
        stages.shapes[shape.name] = shape
        stages.gate[shape.name] = device_gate(shape, pcfg.budget,
                                              estimate_bytes(shape, params.num_queries))
        return stages

    def _commit(self, i: int, rom, trace, params, shapes, tl=None):
        """R1 of table i on new stages -> (stages, Committed, preprocessed LDE, span
        records, main cap)."""
        from contextlib import nullcontext
        from .spans import Spans
        air = _airs_of(rom, shapes, params)[i]
        stages, spans = self._stages(shapes[i], params, tl), Spans()
        device = getattr(stages, "mem", None)
        with (device.stream_scope() if device is not None else nullcontext()):
            if device is not None:
                stages.bind(shapes[i].name)
            with spans.span("r1_main", air.name):
                com = stages.main_commit(np.asarray(trace), shapes[i])
                prep = stages.prep_lde(air, shapes[i])
            cap = np.asarray(stages.cap(com.tree, params.log_cap), np.uint32)
        return stages, com, prep, spans.stats.records, cap

    @staticmethod
    def _timeline(on: bool):
        if not on:
            return None
        from .timeline import Timeline
        return Timeline()

    @staticmethod
    def _piece_timeline(stages, tl) -> None:
        """Device stages log this piece's events into ``tl`` (none once it is None)."""
        if hasattr(stages, "timeline"):
            from .timeline import Timeline
            stages.timeline = stages.recovery.timeline = tl or Timeline(enabled=False)

    def main_commit(self, job: str, i: int, rom, trace, params, shapes, timeline: bool = False):
        """R1 of table i -> (main cap, span records, timeline events or None)."""
        _maybe_die(self.fault, self.fault_dir, f"main_commit:{i}")
        rom, trace = _writable(rom), _writable(trace)
        tl = self._timeline(timeline)
        stages, com, prep, records, cap = self._commit(i, rom, trace, params, shapes, tl)
        self._piece_timeline(stages, None)                     # this piece's events end here
        self.state[(job, i)] = ("r1", com, prep, stages)
        return cap, records, tl.to_json()["traceEvents"] if tl else None

    def _chain(self, job: str, i: int, rom, trace, public_values, params, shapes, main_cap,
               ch, tl, held_chain: bool = True):
        """Table i's chain after the fork up to its DEEP quotient, from the R1 state this
        worker holds, else recomputed from the trace (a restarted worker, or not the
        table's worker) -> (stages, R4Deep, span records, recomputed?).  A table whose
        chain this worker already ran is returned as held (its DQ already sent: None)
        if ``held_chain``, else recomputed."""
        from contextlib import nullcontext
        from .rounds import R1Main, Statement
        from .spans import Spans
        held = self.state.pop((job, i), None)
        if held is not None and held[0] == "deep":
            if held_chain:
                self._piece_timeline(held[1], tl)
                return held[1], held[2], [], False
            if hasattr(held[1], "mem"):              # the chain again (its DQ is gone)
                held[1].release_table(shapes[i].name)
            held = None
        records: list = []
        recomputed = held is None
        if recomputed:      # this worker restarted, or the table's worker is gone: redo R1
            stages, com, prep, records, cap = self._commit(i, rom, trace, params, shapes, tl)
            if not np.array_equal(cap, np.asarray(main_cap, np.uint32)):
                if hasattr(stages, "mem"):
                    stages.release_table(shapes[i].name)
                raise ClusterError(f"table {i}: the recomputed main cap differs")  # pragma: no cover
        else:
            _, com, prep, stages = held
        airs = tuple(_airs_of(rom, shapes, params))
        n = len(airs)
        st = Statement(airs, tuple(trace if j == i else None for j in range(n)),
                       tuple(tuple(int(v) for v in pv) for pv in public_values), params,
                       tuple(shapes))
        r1 = R1Main(None, tuple(com if j == i else None for j in range(n)),
                    tuple(prep if j == i else None for j in range(n)))
        spans = Spans()
        device = getattr(stages, "mem", None)
        self._piece_timeline(stages, tl)
        try:
            with (device.stream_scope() if device is not None else nullcontext()):
                if device is not None:
                    stages.bind(shapes[i].name)
                with spans.span("table", airs[i].name):
                    deep = _table_step(i, st, r1, ch, stages, spans)
        except BaseException:
            if device is not None:
                stages.release_table(shapes[i].name)
            raise
        return stages, deep, records + spans.stats.records, recomputed

    def prove_table(self, job: str, i: int, rom, trace, public_values, params, shapes,
                    main_cap, ch, timeline: bool = False):
        """Table i's chain on its fork, up to its DEEP quotient -> (the table's R4Deep with
        its DQ as a host array and its trees replaced by :class:`_TreeRef` proxies that
        carry their caps, span records, recomputed?, timeline events or None).  The
        trees (resident on a device backend) stay here for :meth:`open_table`."""
        _maybe_die(self.fault, self.fault_dir, f"prove_table:{i}")
        rom, trace = _writable(rom), _writable(trace)
        tl = self._timeline(timeline)
        stages, deep, records, recomputed = self._chain(job, i, rom, trace, public_values,
                                                        params, shapes, main_cap, ch, tl,
                                                        held_chain=False)
        dq = deep.dq
        if not isinstance(dq, np.ndarray):     # a device DQ: to the host, then released
            from .device_stages import _host_of
            host = np.array(_host_of(dq), dtype=np.uint32)
            dq.h.release()
            dq = host
        deep = dataclasses.replace(deep, dq=None)
        self.state[(job, i)] = ("deep", stages, deep)
        self._piece_timeline(stages, None)
        refs = {name: (None if tree is None else
                       _TreeRef(i, name, params.log_cap,
                                np.asarray(stages.cap(tree, params.log_cap), np.uint32)))
                for name, tree in deep.trees.items()}
        out = dataclasses.replace(deep, dq=np.ascontiguousarray(dq, np.uint32), trees=refs)
        return out, records, recomputed, tl.to_json()["traceEvents"] if tl else None

    def open_table(self, job: str, i: int, indices, rom, trace, public_values, params,
                   shapes, caps, ch, timeline: bool = False):
        """Open table i's trees at ``indices`` (the join's query positions at its height)
        -> ({"main"/"aux"/"parts": (rows, multiproof nodes) or None}, span records,
        recomputed?, device record or None, timeline events or None).  Without the
        table's trees here (this worker restarted, or the table's worker is gone) the
        whole chain is recomputed first from the trace (deterministic: the caps are
        checked against ``caps``, the ones the proof carries).  The table's state is
        released afterwards."""
        from contextlib import nullcontext
        from .spans import Spans
        _maybe_die(self.fault, self.fault_dir, f"open_table:{i}")
        rom, trace = _writable(rom), _writable(trace)
        tl = self._timeline(timeline)
        stages, deep, records, recomputed = self._chain(
            job, i, rom, trace, public_values, params, shapes, caps["main"], ch, tl)
        device = getattr(stages, "mem", None)
        name = shapes[i].name
        spans = Spans()
        try:
            if recomputed:
                if not isinstance(deep.dq, np.ndarray):
                    deep.dq.h.release()
                for m, tree in deep.trees.items():
                    cap = None if tree is None else np.asarray(stages.cap(tree, params.log_cap))
                    want = caps.get(m)
                    if (cap is None) != (want is None) or (
                            cap is not None and not np.array_equal(cap, want)):
                        raise ClusterError(f"table {i}: the recomputed {m} cap differs")  # pragma: no cover
            idx = np.asarray(indices, dtype=np.int64)
            opened = {}
            with (device.stream_scope() if device is not None else nullcontext()):
                if device is not None:
                    stages.bind(name)
                with spans.span("table_open", name):
                    for m, tree in deep.trees.items():
                        opened[m] = (None if tree is None
                                     else stages.open_batch(tree, idx, params.log_cap))
            dev = None
            if device is not None:
                ts = stages.table(name)
                dev = {"backend": self.prover.backend, "downgraded": bool(ts.downgraded),
                       "recovery": stages.counters.as_dict(),
                       "h2d_bytes": int(ts.transfers.h2d_bytes),
                       "d2h_bytes": int(ts.transfers.d2h_bytes)}
        finally:
            if device is not None:
                stages.release_table(name)
        return (opened, records + spans.stats.records, recomputed, dev,
                tl.to_json()["traceEvents"] if tl else None)

    def drop(self, job: str) -> None:
        for k in [k for k in self.state if k[0] == job]:
            held = self.state.pop(k)
            stages = held[3] if held[0] == "r1" else held[1]
            for name in list(getattr(stages, "shapes", ())):   # device stages: one table
                stages.release_table(name)


__all__ = ["_Worker"]
