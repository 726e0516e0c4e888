"""Cluster mode's worker side (:mod:`prover.cluster`): one Ray actor per worker, a warm
:class:`prover.api.Prover` for whole blocks and programs and, for sharded proofs (a
block's AIRs rebuilt from its ROM, a program's from its
:class:`prover.programs.prover.ProgramAirs`), each table's state between its pieces
(proof format 6): ``main_commit`` (R1: the main leaf digests sent for the mixed main
tree), ``aux`` (the LogUp running sums committed: the aux leaf digests), ``quotient``
(R2 on the table's fork after the mixed aux cap: the parts' leaf digests),
``prove_table`` (R3 after the mixed parts cap, the DEEP quotient: the DQ sent back, the
trees kept), ``open_table`` (the table's rows at the join's query positions).  Every
piece is deterministic: a worker without a table's state (restarted, or not the table's
worker) recomputes it from the trace in the object store, replaying the fork with the
mixed caps it is sent, and checks each recomputed matrix's own cap against the one the
coordinator built its mixed tree with.
"""
from __future__ import annotations

import copy
import copyreg
import dataclasses
import os
import signal
import time
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from ..api import Prover, ProverConfig
from .join import _TreeRef
from ..common.errors import ClusterError, ProofSelfCheckFailure
from ..core.rounds import _clear_scratch


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


def _maybe_fail_check(fault: str | None, fault_dir: str | None, key: str) -> None:
    """Test hook: ``fault`` term "selfcheck@KEY" makes piece KEY fail as a self-check
    failure (:class:`ProofSelfCheckFailure`) the first time any worker reaches it (once
    per fault_dir)."""
    if not fault or not fault_dir or f"selfcheck@{key}" not in fault.split(","):
        return
    try:
        fd = os.open(os.path.join(fault_dir, "selfcheck_" + key.replace(":", "_")),
                     os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        return
    os.close(fd)
    raise ProofSelfCheckFailure(f"{key}: injected self-check failure (test hook)", None, None)


def _writable(a):
    """Arrays from the object store are read-only views of shared memory; the host
    kernels are compiled for writable arrays: a private copy (one table's trace).  What
    is not an array (a program's :class:`prover.programs.prover.ProgramAirs`) as it is."""
    if not isinstance(a, np.ndarray):
        return a
    return a if a.flags.writeable else a.copy()


def _airs_of(source, shapes, params) -> list:
    """The AIRs of a sharded proof's tables, rebuilt from what the coordinator sent: a
    block's :class:`prover.blocks.prover.TxBlockAirs` or a program's
    :class:`prover.programs.prover.ProgramAirs`."""
    return source.airs()


class _Worker:
    """One Ray actor: a warm Prover for whole blocks, and per-table state for sharded
    proofs (``state[(job, table)]`` = the table's main commitment, preprocessed LDE and
    its stages: host, or one :class:`prover.device.stages.DeviceStages` per table on a
    device backend, holding the table's resident buffers between R1 and its chain).
    ``env``: environment variables set in this worker's process before its Prover is
    made (the PROVER_* switches of docs/diagnostics.md, e.g. PROVER_FAULTS).  The process
    only proves, so numpy's huge-page advice is off in it for good
    (:func:`prover.core.pages.process_small_pages`; a table's pieces run outside a
    whole proof's call)."""

    def __init__(self, config: ProverConfig, fault: str | None = None,
                 fault_dir: str | None = None, env: dict | None = None):
        os.environ.update(env or {})
        from ..core.pages import process_small_pages
        process_small_pages()
        self.prover = Prover(config)
        self.fault, self.fault_dir = fault, fault_dir
        self.state: dict = {}
        # the host LDEs this worker holds between rounds, within one budget
        # (ProverConfig.host_hold / PROVER_HOST_HOLD): its sharded tables' stages draw on
        # it between their pieces and give their bytes back when the table's state is
        # dropped (_Table.release); its whole proofs draw on the same budget and give
        # theirs back at the proof's end (Prover.hold_pool) -- so what a worker holds stays
        # within host_hold whatever mix of jobs it runs
        from ..core.scratch import HoldBudget
        self.hold = HoldBudget(config.host_hold_bytes())
        self.prover.hold_pool = self.hold

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

    def prove_segment(self, program, data: bytes, max_cycles: int, segment_cycles: int,
                      ck, key: str, timeline: bool = False):
        """One segment of a long run from its checkpoint (:mod:`prover.cluster.segments`)
        -> (its protocol proof's bytes, ProofStats, timeline events or None)."""
        from ..programs.segment_prover import prove_one
        _maybe_die(self.fault, self.fault_dir, key)
        _maybe_fail_check(self.fault, self.fault_dir, key)
        tl = self._timeline(timeline)
        self.prover.timeline = tl
        try:
            proof, st = prove_one(self.prover, program, data, max_cycles, segment_cycles, ck)
        finally:
            self.prover.timeline = None
        return proof, st, (tl.to_json()["traceEvents"] if tl else None)

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
        from ..core.stages import HostStages
        if self.prover.backend == "host":
            return HostStages(hold_pool=self.hold)
        from ..device.stages import device_gate
        from ..device.pipeline import device_memory, estimate_bytes, make_stages
        from ..device.recovery import RecoveryCounters
        pcfg = self.prover._device_config()
        pcfg.timeline = tl
        stages = make_stages(pcfg, device_memory(pcfg.backend, pcfg.budget),
                             RecoveryCounters(), proof_id=0)
        stages.shapes[shape.name] = shape
        stages.gate[shape.name] = device_gate(shape, pcfg.budget,
                                              estimate_bytes(shape, params.num_queries))
        return stages

    # -- sharded: one table's state through its pieces ---------------------------------
    def _commit(self, i: int, airs, trace, params, shapes, tl=None):
        """R1 of table i on new stages -> (its :class:`_Table` at level 1, span records)."""
        from ..common.spans import Spans
        stages, spans = self._stages(shapes[i], params, tl), Spans()
        t = _Table(shapes[i].name, stages, None, None)
        try:
            with _scope(stages, t.name):
                with spans.span("r1_main", airs[i].name):
                    t.com = stages.main_commit(np.asarray(trace), shapes[i])
                    t.prep = stages.prep_lde(airs[i], shapes[i])
        except BaseException:
            t.release()
            raise
        return t, spans.stats.records

    @staticmethod
    def _timeline(on: bool):
        if not on:
            return None
        from ..common.timeline import Timeline
        return Timeline()

    @staticmethod
    def _piece_timeline(stages, tl) -> None:
        """Device stages log this piece's events into ``tl`` (none once it is None)."""
        if hasattr(stages, "timeline"):
            from ..common.timeline import Timeline
            stages.timeline = stages.recovery.timeline = tl or Timeline(enabled=False)

    def main_commit(self, job: str, i: int, rom, trace, params, shapes, timeline: bool = False):
        """R1 of table i -> (its main leaf digests uint32[N, 8] for the mixed main tree,
        its own main cap, span records, timeline events or None)."""
        _maybe_die(self.fault, self.fault_dir, f"main_commit:{i}")
        rom, trace = _writable(rom), _writable(trace)
        tl = self._timeline(timeline)
        stale = self.state.pop((job, i), None)          # an earlier run's, superseded
        if stale is not None:
            stale.release()
        t, records = self._commit(i, _airs_of(rom, shapes, params), trace, params, shapes, tl)
        try:
            with _scope(t.stages, t.name):
                leaves, cap = t.leaves_and_cap(t.com, params.log_cap)
        except BaseException:
            t.release()
            raise
        self._piece_timeline(t.stages, None)            # this piece's events end here
        self.state[(job, i)] = t
        return leaves, cap, records, tl.to_json()["traceEvents"] if tl else None

    def _advance(self, job: str, i: int, target: int, rom, trace, public_values, params,
                 shapes, ch, known: dict, tl, opening: bool = False):
        """Table i's state at level ``target`` (:class:`_Table`: 1 main commit, 2 aux,
        3 quotient, 4 DEEP quotient) -> (the table, span records, recomputed?).  Starts
        from the state this worker holds if it is not past what this piece starts from
        (``target - 1``; an ``opening`` takes a held level 4), else from the
        trace (a restarted worker, or not the table's worker: the state is rebuilt,
        deterministically).  Every level the coordinator has already seen is checked
        against ``known`` (the table's own main / aux / parts caps); the mixed aux and
        parts caps there replay the fork.  On an error the table's state is released."""
        from ..core.rounds import R1Main, Statement, r1_aux, r2_quotient, r3_ood, r4_deep
        from ..common.spans import Spans
        start = _DEEP if opening else target - 1
        t = self.state.pop((job, i), None)
        if t is not None and t.level > start:           # past this piece's start: redo
            t.release()
            t = None
        airs = tuple(_airs_of(rom, shapes, params))
        records: list = []
        recomputed = t is None or t.level < start
        lc = params.log_cap
        if t is None:       # this worker restarted, or the table's worker is gone: redo R1
            t, records = self._commit(i, airs, trace, params, shapes, tl)
            try:
                with _scope(t.stages, t.name):
                    t.check("main", t.stages.cap(t.com.tree, lc), known, i)
            except BaseException:
                t.release()
                raise
        n = len(airs)
        st = Statement(airs, tuple(trace if j == i else None for j in range(n)),
                       tuple(tuple(int(v) for v in pv) for pv in public_values), params,
                       tuple(shapes))
        spans = Spans()
        self._piece_timeline(t.stages, tl)
        try:
            with _scope(t.stages, t.name), spans.span("table", airs[i].name):
                r1 = R1Main(None, tuple(t.com if j == i else None for j in range(n)),
                            tuple(t.prep if j == i else None for j in range(n)))
                stages = t.stages
                while t.level < target:
                    seen = t.level < start           # the coordinator has this level's result
                    if t.level == 1:
                        t.aux = r1_aux(i, st, ch, stages, spans)
                        if seen:
                            t.check("aux", None if t.aux.aux is None
                                    else stages.cap(t.aux.aux.tree, lc), known, i)
                    elif t.level == 2:
                        t.ch = copy.deepcopy(ch)     # this worker's copy of the table's fork
                        t.r2 = r2_quotient(i, st, r1, t.ch, t.aux, known["aux_cap"], stages,
                                           spans)
                        if seen:
                            t.check("parts", stages.cap(t.r2.parts.tree, lc), known, i)
                    else:
                        r3 = r3_ood(i, st, r1, t.ch, t.aux, t.r2, known["parts_cap"], stages,
                                    spans)
                        t.deep = r4_deep(i, st, r1, t.ch, t.aux, t.r2, r3, stages, spans)
                        t.com = t.prep = t.r2 = None    # the trees stay in t.deep
                        t.aux = dataclasses.replace(t.aux, aux=None)
                        if seen:                     # its DQ was sent already
                            _release_dq(t.deep.dq)
                            t.deep = dataclasses.replace(t.deep, dq=None)
                    t.level += 1
        except BaseException:
            t.release()
            raise
        return t, records + spans.stats.records, recomputed

    def _step_piece(self, key: str, job: str, i: int, target: int, rom, trace, public_values,
                    params, shapes, ch, known, timeline: bool, result):
        """A piece that takes table i to level ``target`` and returns ``result(t)`` (what
        the coordinator needs of it) -> (*result, span records, recomputed?, timeline
        events or None); the table's state is kept here for its next piece."""
        _maybe_die(self.fault, self.fault_dir, f"{key}:{i}")
        rom, trace = _writable(rom), _writable(trace)
        tl = self._timeline(timeline)
        t, records, recomputed = self._advance(job, i, target, rom, trace, public_values,
                                               params, shapes, ch, known, tl)
        try:
            with _scope(t.stages, t.name):
                out = result(t)
        except BaseException:
            t.release()
            raise
        self._piece_timeline(t.stages, None)
        self.state[(job, i)] = t
        return (*out, records, recomputed, tl.to_json()["traceEvents"] if tl else None)

    def aux(self, job: str, i: int, rom, trace, public_values, params, shapes, ch, known,
            timeline: bool = False):
        """Table i's LogUp running sums committed (R1 aux; ``ch``: the LogUp challenges
        and the table's fork) -> (its aux leaf digests for the mixed aux tree and its own
        aux cap, both None without interactions; span records, recomputed?, timeline
        events or None)."""
        def result(t):
            if t.aux.aux is None:
                return None, None
            return t.leaves_and_cap(t.aux.aux, params.log_cap)
        return self._step_piece("aux", job, i, _AUX, rom, trace, public_values, params,
                                shapes, ch, known, timeline, result)

    def quotient(self, job: str, i: int, rom, trace, public_values, params, shapes, ch,
                 known, timeline: bool = False):
        """Table i's R2 on its fork (which absorbs the mixed aux cap ``known["aux_cap"]``,
        the terminal, alpha): the quotient parts committed -> (their leaf digests for the
        mixed parts tree, its own parts cap, span records, recomputed?, timeline events or
        None)."""
        return self._step_piece("quotient", job, i, _QUOTIENT, rom, trace, public_values,
                                params, shapes, ch, known, timeline,
                                lambda t: t.leaves_and_cap(t.r2.parts, params.log_cap))

    def prove_table(self, job: str, i: int, rom, trace, public_values, params, shapes, ch,
                    known, timeline: bool = False):
        """Table i's R3 (its fork absorbs the mixed parts cap ``known["parts_cap"]``) and
        DEEP quotient -> (the table's R4Deep with its DQ as a host array and its trees
        replaced by :class:`_TreeRef` proxies that carry their own caps, span records,
        recomputed?, timeline events or None).  The trees (resident on a device backend)
        stay here for :meth:`open_table`."""
        def result(t):
            dq, t.deep = _host_dq(t.deep.dq), dataclasses.replace(t.deep, dq=None)
            refs = {name: (None if tree is None else
                           _TreeRef(i, name, params.log_cap,
                                    np.asarray(t.stages.cap(tree, params.log_cap), np.uint32)))
                    for name, tree in t.deep.trees.items()}
            return (dataclasses.replace(t.deep, dq=np.ascontiguousarray(dq, np.uint32),
                                        trees=refs),)
        return self._step_piece("prove_table", job, i, _DEEP, rom, trace, public_values,
                                params, shapes, ch, known, timeline, result)

    def open_table(self, job: str, i: int, indices, rom, trace, public_values, params,
                   shapes, ch, known, timeline: bool = False):
        """Table i's committed rows at ``indices`` (the join's query positions at its
        height) -> ({"main"/"aux"/"parts": rows or None}, span records, recomputed?,
        device record or None, timeline events or None); format 6 sends no table tree's
        nodes (the mixed trees' are the coordinator's).  Without the table's trees here
        (this worker restarted, or the table's worker is gone) its whole chain is
        recomputed first from the trace (deterministic: every own cap is checked against
        ``known``, the ones the coordinator's mixed trees were built with).  The table's
        state is released afterwards."""
        from ..common.spans import Spans
        _maybe_die(self.fault, self.fault_dir, f"open_table:{i}")
        rom, trace = _writable(rom), _writable(trace)
        tl = self._timeline(timeline)
        t, records, recomputed = self._advance(job, i, _DEEP, rom, trace, public_values,
                                               params, shapes, ch, known, tl, opening=True)
        stages, name, spans = t.stages, t.name, Spans()
        device = getattr(stages, "mem", None)
        try:
            idx = np.asarray(indices, dtype=np.int64)
            opened = {}
            with _scope(stages, name), spans.span("table_open", name):
                for m, tree in t.deep.trees.items():
                    opened[m] = (None if tree is None
                                 else np.ascontiguousarray(
                                     stages.open_batch(tree, idx, params.log_cap)[0], np.uint32))
            dev = None
            if device is not None:
                ts = stages.table(name)
                dev = {"backend": self.prover.backend, "downgraded": bool(ts.downgraded),
                       "recovery": stages.counters.as_dict(),
                       "h2d_bytes": int(ts.transfers.h2d_bytes),
                       "d2h_bytes": int(ts.transfers.d2h_bytes)}
        finally:
            t.release()
        return (opened, records + spans.stats.records, recomputed, dev,
                tl.to_json()["traceEvents"] if tl else None)

    def drop(self, job: str) -> None:
        for k in [k for k in self.state if k[0] == job]:
            self.state.pop(k).release()


# a sharded table's levels (what its pieces have done on this worker)
_MAIN, _AUX, _QUOTIENT, _DEEP = 1, 2, 3, 4


@contextmanager
def _scope(stages, name: str):
    """Device stages: this piece's stream scope, bound to the table; host stages: nothing.
    After the piece, the stages' free LDE buffers go (prover/core/scratch.py: a worker's
    table keeps its stages between pieces, and no other table borrows from its pools)."""
    try:
        device = getattr(stages, "mem", None)
        if device is None:
            yield
            return
        with device.stream_scope():
            stages.bind(name)
            yield
    finally:
        _clear_scratch(stages)


def _host_dq(dq) -> np.ndarray:
    """A DQ as a host array (a device DQ copied to the host, then released)."""
    if isinstance(dq, np.ndarray):
        return dq
    from ..device.stages import _host_of
    host = np.array(_host_of(dq), dtype=np.uint32)
    dq.h.release()
    return host


def _release_dq(dq) -> None:
    if dq is not None and not isinstance(dq, np.ndarray):
        dq.h.release()


@dataclass
class _Table:
    """One table of a sharded job on this worker: its stages (host, or a DeviceStages of
    its own) and what its pieces have made -- ``level`` 1: the main commitment and the
    preprocessed LDE; 2: + its R1Aux; 3: + its R2Quotient and ``ch``, this worker's copy
    of the LogUp challenges and the table's fork, advanced by R2; 4: its R4Deep (without
    the DQ once sent; its trees kept for the openings)."""
    name: str
    stages: object
    com: object
    prep: object
    level: int = _MAIN
    aux: object = None
    r2: object = None
    ch: object = None
    deep: object = None

    def release(self) -> None:
        if self.deep is not None:
            _release_dq(self.deep.dq)
        if hasattr(self.stages, "mem"):
            self.stages.release_table(self.name)
        if hasattr(self.stages, "give_back"):           # host stages: the held LDEs' bytes
            self.stages.give_back()

    def leaves_and_cap(self, com, log_cap: int):
        """A committed matrix's leaf digests (for its round's mixed tree) and its own
        tree's cap (what a recomputation is checked against)."""
        cap = np.asarray(self.stages.cap(com.tree, log_cap), np.uint32)
        leaves = np.ascontiguousarray(self.stages.leaf_digests(com), np.uint32)
        return leaves, cap

    @staticmethod
    def check(kind: str, cap, known: dict, i: int) -> None:
        """A recomputed matrix's own cap against the one the coordinator used."""
        want = known.get(kind)
        if (cap is None) != (want is None) or (
                cap is not None and not np.array_equal(np.asarray(cap, np.uint32),
                                                        np.asarray(want, np.uint32))):
            raise ClusterError(f"table {i}: the recomputed {kind} cap differs")  # pragma: no cover


__all__ = ["_Worker"]
