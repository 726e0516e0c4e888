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
  table's trace in Ray's object store; the workers commit the main traces (R1) and keep
  each table's committed state; the coordinator absorbs the main caps in table order and
  draws the LogUp challenges (with their proof of work); each worker then runs its tables'
  chains on their own transcript forks up to the DEEP quotient (:func:`_table_step`,
  proof format 3) and returns each table's :class:`prover.rounds.R4Deep` -- its DQ
  through the object store, its trees kept on the worker and replaced by
  :class:`_TreeRef` proxies carrying their caps; the coordinator runs the join
  (:func:`_join`: :func:`prover.rounds.r4_join`, one FRI over all tables, on host stages
  wrapped by :class:`_JoinStages`), whose openings of a proxied tree are done by the
  worker holding it (``open_table``, every table's launched as soon as the queries are
  drawn); then it runs the prover's self-check.  Each worker runs its pieces on the
  configured backend: host stages, or on a device backend one
  :class:`prover.device_stages.DeviceStages` per table (its buffers resident from R1 to
  its openings; recovery and downgrades as in the pipeline, counted per table).

Faults: a worker that dies (its process killed, its node gone) is restarted by Ray
(``max_restarts``, unlimited by default) and the coordinator re-runs its pieces on the
least busy live worker, at most ``max_retries`` times per piece (:class:`ClusterError`
beyond); a worker that does not hold a table's committed state (restarted, or another
worker) recomputes it from the trace still in the object store (same main cap, checked),
and one asked to open trees it does not hold recomputes the table's whole chain (every
cap checked against the proof's).
Pieces are deterministic, so the bytes do not depend on where or how often a piece ran;
every re-run, death and device downgrade is counted in ``stats.counters["cluster"]``
(and on the timeline).  A worker's own error (e.g. :class:`prover.api.UnprovableBlock`,
:class:`prover.api.ProofSelfCheckFailure`) is re-raised as the same exception type, not
retried; every wait has a timeout.
"""
from __future__ import annotations

import copyreg
import dataclasses
import os
import pickle
import signal
import tempfile
import time
import uuid
from dataclasses import dataclass

import numpy as np

from .api import (BlockProof, ConfigError, ProofSelfCheckFailure, ProofStats, Prover, ProverConfig,
                  TableStats, UnprovableBlock)

def _reduce_self_check_failure(exc: ProofSelfCheckFailure):
    return ProofSelfCheckFailure, (str(exc), exc.postmortem, exc.report)


# a worker's ProofSelfCheckFailure must cross processes as itself (its __init__ takes three
# arguments, which the default exception pickling does not pass back)
copyreg.pickle(ProofSelfCheckFailure, _reduce_self_check_failure)

DEFAULT_MAX_RETRIES = 3          # re-runs of one piece after its worker died
DEFAULT_START_TIMEOUT = 300.0    # seconds for the workers to come up


class ClusterError(RuntimeError):
    """The cluster could not finish a piece: its worker died more than ``max_retries``
    times, the workers did not start, or a wait timed out."""


def _ray():
    try:
        import ray
    except ImportError:                  # pragma: no cover - exercised where ray is absent
        raise ConfigError("cluster mode needs Ray: pip install 'steadfast[cluster]'") from None
    return ray


# --------------------------------------------------------------------------- worker side

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


def _writable(a) -> np.ndarray:
    """Arrays from the object store are read-only views of shared memory; the host
    kernels are compiled for writable arrays: a private copy (one table's trace)."""
    a = np.asarray(a)
    return a if a.flags.writeable else a.copy()


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

    def prove(self, block: dict, key: str, timeline: bool = False):
        """A whole block -> (BlockProof bytes, ProofStats, timeline events or None)."""
        _maybe_die(self.fault, self.fault_dir, key)
        tl = None
        if timeline:
            from .timeline import Timeline
            tl = Timeline()
        self.prover.timeline = tl
        try:
            proof = self.prover.prove_block(block)
        finally:
            self.prover.timeline = None
        return proof.to_bytes(), proof.stats, (tl.to_json()["traceEvents"] if tl else None)

    # -- sharded: R1 main commit, then the table's chain after the fork ---------------
    def _stages(self, shape, params, tl):
        """The stages of one table of a sharded proof: host stages, or on a device backend
        a DeviceStages of its own (its recovery counters and transfers are the table's)
        over this process's device memory and budget (the PROVER_* switches apply)."""
        from .stages import HostStages
        if self.prover.backend == "host":
            return HostStages()
        from steadfast.prover.device_stages import device_gate
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
        from steadfast.vm.airs import block_airs, slots_from_widths
        from .spans import Spans
        air = block_airs(rom, slots_from_widths([s.main_width for s in shapes]),
                         params.log_blowup)[i]
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
        from steadfast.vm.airs import block_airs, slots_from_widths
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
        airs = tuple(block_airs(rom, slots_from_widths([s.main_width for s in shapes]),
                                params.log_blowup))
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


@dataclass(frozen=True)
class _TreeRef:
    """A table tree held by a worker, as the coordinator's join sees it: which table and
    tree, and its cap (computed in the worker when its chain ended)."""
    table: int
    name: str
    log_cap: int
    cap: np.ndarray


def _table_step(i: int, st, r1, ch, stages, spans):
    """The per-table work of a sharded proof, on a worker, after the fork (proof format
    v3): the table's chain R1 aux .. its DEEP quotient -> its :class:`prover.rounds.R4Deep`
    (the trees stay on the worker; the FRI and the queries are the join's)."""
    from .rounds import prove_table
    return prove_table(i, st, r1, ch, stages, spans)


class _JoinStages:
    """The coordinator's stages for the join (:func:`prover.rounds.r4_join`): host stages
    for the FRI over the tables' DQs, except that ``cap`` / ``open_batch`` on a
    :class:`_TreeRef` answer from the worker that holds the tree: the cap it sent, and
    the openings of ``opener(table, indices)`` (one piece per table opening all its
    trees; :meth:`prefetch` launches every table's at once when the queries are drawn)."""

    def __init__(self, opener):
        from .stages import HostStages
        self._host = HostStages()
        self._opener = opener              # {table: indices} -> {table: {tree: (rows, nodes)}}
        self._opened: dict = {}            # table -> (indices, {tree: (rows, nodes)})

    def __getattr__(self, name):           # fri_input, fri_commit_layer, fri_fold, permute ...
        return getattr(self._host, name)

    def prefetch(self, wanted: dict) -> None:
        for t, (idx, opened) in self._opener(wanted).items():
            self._opened[t] = (idx, opened)

    def cap(self, tree, log_cap: int) -> np.ndarray:
        if isinstance(tree, _TreeRef):
            if log_cap != tree.log_cap:
                raise ValueError(f"table {tree.table} {tree.name}: cap of log {tree.log_cap}, "
                                 f"asked for {log_cap}")
            return tree.cap
        return self._host.cap(tree, log_cap)

    def open_batch(self, tree, indices, log_cap: int):
        if not isinstance(tree, _TreeRef):
            return self._host.open_batch(tree, indices, log_cap)
        if log_cap != tree.log_cap:
            raise ValueError(f"table {tree.table}: opened with log_cap {log_cap}, "
                             f"its caps have {tree.log_cap}")
        idx = np.asarray(indices, dtype=np.int64)
        held = self._opened.get(tree.table)
        if held is None or not np.array_equal(held[0], idx):    # not prefetched: this table now
            self.prefetch({tree.table: idx})
            held = self._opened[tree.table]
        return held[1][tree.name]


def _join(st, ch, tr, deeps, stages, spans) -> bytes:
    """The coordinator's join of a sharded proof: the main transcript ``tr`` (after the
    LogUp challenges), the tables' R4Deep (DQs from the object store, trees as
    :class:`_TreeRef`) -> the encoded proof: one FRI over all tables, the queries, every
    opening (through ``stages``, a :class:`_JoinStages`; the queries are tapped off the
    transcript so that every table's openings start at once)."""
    from steadfast.verifier.proof_format import encode
    from .rounds import R1Main, r4_join
    h_of = [s.log_lde for s in st.shapes]
    sample_bits = tr.sample_bits

    def tap(label, bits, count):          # the join draws its queries: open every table
        q = sample_bits(label, bits, count)
        if label == "queries":
            qq = np.asarray(q, dtype=np.int64)
            stages.prefetch({i: np.unique(qq >> (bits - h)) for i, h in enumerate(h_of)})
        return q

    tr.sample_bits = tap                  # this transcript only (an instance attribute)
    try:
        return encode(r4_join(st, R1Main(tr, (), ()), ch, deeps, stages, spans))
    finally:
        del tr.sample_bits


# --------------------------------------------------------------------------- coordinator

@dataclass
class _Piece:
    worker: int
    method: str
    args: tuple
    tag: object = None
    attempts: int = 0
    ref: object = None
    gen: int = 0
    start: float = 0.0


class ClusterFuture:
    """The pending proof of one block (:meth:`ClusterProver.submit`)."""

    def __init__(self, cp: "ClusterProver", piece: _Piece, t0: float):
        self._cp, self._piece, self._t0 = cp, piece, t0
        self._result = None

    def done(self) -> bool:
        if self._result is not None:
            return True
        ready, _ = self._cp._ray.wait([self._piece.ref], timeout=0)
        return bool(ready)

    def result(self, timeout: float | None = None) -> BlockProof:
        """The BlockProof (stats with ``counters["cluster"]``); re-raises the worker's
        error; :class:`TimeoutError` after ``timeout`` seconds."""
        if self._result is None:
            for piece, value in self._cp._gather([self._piece], timeout):
                self._result = self._cp._block_result(piece, value, self._t0)
        return self._result


class ClusterProver:
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
    :class:`prover.timeline.Timeline` that gets one complete event per piece (launch to
    result, as the coordinator saw it), an instant ``cluster:rerun`` per re-run, and the
    workers' own events (retries, downgrades, device stages) as process "worker W".
    ``fault``: test hook
    ("kill@block:INDEX", "kill@main_commit:TABLE", "kill@prove_table:TABLE",
    "kill@open_table:TABLE": the worker
    kills its own process the first time it reaches that piece; "stall@...": it sleeps
    there, see :meth:`arm`)."""

    def __init__(self, address: str | None = None, config: ProverConfig | None = None,
                 workers: int = 2, *, max_retries: int = DEFAULT_MAX_RETRIES,
                 start_timeout: float = DEFAULT_START_TIMEOUT, fault: str | None = None,
                 timeline=None, max_restarts: int = -1, worker_env: dict | None = None):
        ray = self._ray = _ray()
        self.timeline = timeline          # a prover.timeline.Timeline, or None
        self.config = config or ProverConfig()
        if not isinstance(workers, int) or workers < 1:
            raise ConfigError(f"workers must be a positive integer, got {workers!r}")
        if not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigError(f"max_retries must be >= 0, got {max_retries!r}")
        env = dict(worker_env or {})
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise ConfigError("worker_env maps names to strings")
        if env.get("PROVER_FAULTS"):
            from .faults import FaultSpecError, parse_faults
            try:
                parse_faults(env["PROVER_FAULTS"])
            except FaultSpecError as exc:
                raise ConfigError(str(exc)) from None
        self.worker_env = env
        self.local = Prover(self.config)      # validates the config; executes blocks here
        self.workers, self.max_retries, self.start_timeout = workers, max_retries, start_timeout
        self.retries = 0                 # pieces re-run after their worker died
        self.worker_deaths = 0
        self._owns_ray = False
        if not ray.is_initialized():
            if address is None:
                ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False,
                         object_store_memory=int(os.environ.get("STEADFAST_RAY_OBJECT_STORE",
                                                                256 << 20)))
            else:
                ray.init(address=address, log_to_driver=False)
            self._owns_ray = True
        res = ray.cluster_resources()
        self.gpus = int(res.get("GPU", 0))
        kind = "GPU" if self.gpus else "CPU"
        opts = dict(num_gpus=1, num_cpus=1) if self.gpus else dict(num_cpus=1)
        # never wait forever for a worker to fit (a few seconds for workers just killed
        # elsewhere to hand their resources back)
        wait_until = time.monotonic() + min(start_timeout, 30.0)
        while workers > ray.available_resources().get(kind, 0) and time.monotonic() < wait_until:
            time.sleep(0.25)
        free = ray.available_resources()
        if workers > free.get(kind, 0):
            if self._owns_ray:
                ray.shutdown()
            raise ConfigError(f"{workers} workers need {workers} free {kind}s (one each); the "
                              f"cluster has {res.get(kind, 0):g}, {free.get(kind, 0):g} free")
        self._fault_dir = tempfile.mkdtemp(prefix="steadfast-fault-") if fault else None
        actor = ray.remote(max_restarts=max_restarts, max_task_retries=0, **opts)(_Worker)
        self._actors = [actor.remote(self.config, fault, self._fault_dir, env)
                        for _ in range(workers)]
        self._inflight = [0] * workers
        self._gen = [0] * workers         # deaths seen per worker
        self._down: dict = {}             # worker -> its pending ping (dead, maybe restarting)
        self._named: set = set()          # workers named on the timeline
        try:
            where = ray.get([a.where.remote() for a in self._actors], timeout=start_timeout)
        except Exception as exc:
            self.shutdown()
            raise ClusterError(f"the workers did not start within {start_timeout:g}s: {exc}") from None
        self.pids = [pid for pid, _ in where]
        self.nodes = [node for _, node in where]     # Ray node id per worker

    # -- context manager ------------------------------------------------------------
    def __enter__(self) -> "ClusterProver":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        """Stop the workers (and the local Ray instance if this prover started it)."""
        ray = self._ray
        for a in getattr(self, "_actors", []):
            try:
                ray.kill(a, no_restart=True)
            except Exception:            # pragma: no cover - already gone
                pass
        self._actors = []
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
        self._owns_ray = False

    def arm(self, worker: int, fault: str) -> str:
        """Test hook: set worker ``worker``'s fault terms (see ``fault``; a worker that
        reaches a "stall@KEY" piece writes ``stall_KEY`` into the returned folder and
        sleeps, so that a test can remove its node mid-piece)."""
        if self._fault_dir is None:
            self._fault_dir = tempfile.mkdtemp(prefix="steadfast-fault-")
        self._ray.get(self._actors[worker].arm.remote(fault, self._fault_dir),
                      timeout=self.start_timeout)
        return self._fault_dir

    # -- pieces: launch, wait, re-run ------------------------------------------------
    def _await_worker(self, w: int) -> None:
        """Wait until Ray has restarted worker ``w`` (bounded by ``start_timeout``); a
        worker out of restarts is a :class:`ClusterError` at once."""
        from ray.exceptions import ActorDiedError, RayActorError
        deadline = time.monotonic() + self.start_timeout
        while True:
            try:
                self.pids[w] = self._ray.get(self._actors[w].ping.remote(),
                                             timeout=max(0.1, deadline - time.monotonic()))
                self._down.pop(w, None)
                return
            except ActorDiedError as exc:
                raise ClusterError(f"worker {w} died and cannot be restarted: {exc}") from None
            except (RayActorError, self._ray.exceptions.GetTimeoutError):
                if time.monotonic() > deadline:
                    raise ClusterError(f"worker {w} did not restart within "
                                       f"{self.start_timeout:g}s") from None
                time.sleep(0.2)

    def _refresh_down(self) -> None:
        """Take back the dead workers that Ray has restarted (a ping answered); never
        waits."""
        from ray.exceptions import ActorDiedError, RayActorError
        for w, ref in list(self._down.items()):
            if ref is _GONE:
                continue
            if ref is None:
                self._down[w] = self._actors[w].ping.remote()
                continue
            ready, _ = self._ray.wait([ref], timeout=0)
            if not ready:
                continue
            try:
                self.pids[w] = self._ray.get(ref)
                del self._down[w]
            except ActorDiedError:
                self._down[w] = _GONE            # out of restarts: never again
            except RayActorError:
                self._down[w] = None             # still coming back: ask again

    def _live(self) -> list:
        self._refresh_down()
        return [w for w in range(self.workers) if w not in self._down]

    def _least_busy(self, avoid: int | None = None) -> int:
        """The least busy live worker (not ``avoid`` when another is live); with every
        worker dead, wait for ``avoid`` (or the first) to restart (ClusterError if it
        cannot)."""
        live = self._live()
        others = [w for w in live if w != avoid]
        if others or live:
            return min(others or live, key=lambda w: self._inflight[w])
        w = avoid if avoid is not None else min(self._down)
        if self._down.get(w) is _GONE:
            gone = [v for v in self._down if self._down[v] is not _GONE]
            if not gone:
                raise ClusterError("every worker died and none can be restarted")
            w = gone[0]
        self._await_worker(w)
        return w

    def _launch(self, p: _Piece) -> None:
        p.gen = self._gen[p.worker]
        p.start = time.perf_counter()
        p.ref = getattr(self._actors[p.worker], p.method).remote(
            *p.args, timeline=self.timeline is not None)
        self._inflight[p.worker] += 1

    def _merge_events(self, p: _Piece, events) -> None:
        """A worker's timeline events onto the coordinator's: process "worker W", its
        clock aligned at the piece's launch."""
        tl = self.timeline
        if tl is None or not events:
            return
        pid, base = 2 + p.worker, tl._us(p.start)
        out = []
        if p.worker not in self._named:
            self._named.add(p.worker)
            out.append({"ph": "M", "name": "process_name", "pid": pid,
                        "args": {"name": f"worker {p.worker}"}})
        for ev in events:
            ev = dict(ev, pid=pid)
            if "ts" in ev:
                ev["ts"] = round(ev["ts"] + base, 1)
            ev.setdefault("args", {})["piece"] = f"{p.method}:{p.tag}"
            out.append(ev)
        with tl._lock:
            tl.events.extend(out)

    def _gather(self, pieces, timeout: float | None, feed=None):
        """Yield (piece, value) as pieces finish.  A piece whose worker died (its process
        killed, its node gone) is re-run on the least busy live worker (at most
        ``max_retries`` times; counted); a worker's exception is re-raised as itself.
        ``feed()``: called after each finished piece, may return more pieces to launch."""
        ray = self._ray
        from ray.exceptions import (ObjectLostError, RayActorError, RayTaskError,
                                    WorkerCrashedError)
        deadline = None if timeout is None else time.monotonic() + timeout
        pending = {}
        for p in pieces:
            if p.ref is None:
                self._launch(p)
            pending[p.ref] = p
        while pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=left)
            if not ready:
                raise TimeoutError(f"{len(pending)} cluster pieces unfinished after {timeout:g}s")
            p = pending.pop(ready[0])
            self._inflight[p.worker] -= 1
            try:
                value = ray.get(p.ref)
            except (RayActorError, WorkerCrashedError, ObjectLostError) as exc:
                p.attempts += 1
                self.retries += 1
                if self.timeline is not None:
                    self.timeline.instant("cluster:rerun", cat="recovery", worker=p.worker,
                                          piece=f"{p.method}:{p.tag}", attempt=p.attempts,
                                          error=type(exc).__name__)
                dead = p.worker
                if p.gen == self._gen[dead] and not isinstance(exc, ObjectLostError):
                    self._gen[dead] += 1                 # a new death of this worker
                    self.worker_deaths += 1
                    self._down.setdefault(dead, None)
                if p.attempts > self.max_retries:
                    raise ClusterError(f"{p.method} {p.tag}: the worker died {p.attempts} "
                                       f"times (max_retries {self.max_retries})") from exc
                p.worker = self._least_busy(avoid=dead)  # elsewhere if any worker lives
                self._launch(p)
                pending[p.ref] = p
                continue
            except RayTaskError as exc:
                cause = getattr(exc, "cause", None)
                if isinstance(cause, BaseException):
                    try:
                        cause.cluster_piece = p.tag      # which block / table
                    except AttributeError:               # pragma: no cover
                        pass
                    raise cause from None
                raise                            # pragma: no cover
            if self.timeline is not None:       # coordinator's view: launch to result
                self.timeline.complete(f"cluster:{p.method}", p.start, time.perf_counter(),
                                       cat="cluster", worker=p.worker, piece=str(p.tag),
                                       attempts=p.attempts + 1)
                self._merge_events(p, value[-1])
            yield p, value
            for q in (feed() if feed else ()):
                self._launch(q)
                pending[q.ref] = q

    # -- many blocks --------------------------------------------------------------
    def _block_piece(self, block, index) -> tuple[_Piece, object]:
        from .api import _as_block
        blk = _as_block(block)                   # a malformed block fails here, typed
        return _Piece(self._least_busy(), "prove", (blk.to_json(), f"block:{index}"), index), blk

    def _block_result(self, piece: _Piece, value, t0: float) -> BlockProof:
        data, stats, _ = value
        bp = BlockProof.from_bytes(data)
        stats.counters["cluster"] = {
            "mode": "blocks", "workers": self.workers, "worker": piece.worker,
            "retries": piece.attempts, "gpus": self.gpus, "backend": stats.backend,
            "device_downgrades": _downgrades(stats.counters.get("device", {}).get("recovery")),
            "worker_deaths_total": self.worker_deaths,
            "bytes_through_object_store": len(data) + len(pickle.dumps(piece.args)),
            "seconds": round(time.perf_counter() - t0, 4)}
        return BlockProof(bp.rom, bp.proof, stats)

    def submit(self, block) -> ClusterFuture:
        """Start proving ``block`` (Block, dict, JSON text or path) on the least busy
        worker; -> a :class:`ClusterFuture`."""
        t0 = time.perf_counter()
        piece, _ = self._block_piece(block, f"submit:{uuid.uuid4().hex[:8]}")
        self._launch(piece)
        return ClusterFuture(self, piece, t0)

    def prove_many(self, blocks, timeout: float | None = None, per_worker: int = 2):
        """Prove ``blocks`` across the workers; yield (index, BlockProof) in completion
        order.  At most ``per_worker`` blocks are queued on a worker at a time (the next
        one waits in the coordinator, so a fast worker takes more).  ``timeout``: for the
        whole batch (:class:`TimeoutError`)."""
        todo = list(enumerate(blocks))[::-1]
        starts: dict = {}

        def take(n):
            out = []
            while todo and len(out) < n:
                idx, blk = todo.pop()
                piece, _ = self._block_piece(blk, idx)
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
            yield piece.tag, self._block_result(piece, value, starts[piece.tag])

    # -- one block, tables sharded ------------------------------------------------------
    def prove_sharded(self, block, timeout: float | None = None) -> BlockProof:
        """Prove one block with its tables spread over the workers (each on the configured
        backend: host stages, or per-table device stages); the same bytes as
        ``Prover.prove_block`` on one machine; the proof is self-checked here."""
        from steadfast.verifier.protocol import absorb_statement
        from steadfast.verifier.transcript import Transcript
        from .api import _rss_bytes
        from .prove import prepare
        from .rounds import R1Challenges, R1Main, r1_challenges
        from .spans import Spans
        from .stages import HostStages
        ray = self._ray
        t0 = time.perf_counter()
        cfg = self.config
        phases: dict = {}
        rec, bt = self.local._build(block, phases)
        airs, traces, pvs = list(bt.airs), list(bt.traces), bt.table_public_values
        if cfg.check:
            self.local._check_tables(airs, traces, pvs, phases)
        t1 = time.perf_counter()
        params = cfg.params()
        st = prepare(traces, airs, pvs, params, check=False)
        rom = np.asarray(rec.rom.rows, dtype=np.int64)
        shapes, pv = list(st.shapes), [list(p) for p in st.public_values]
        n = len(airs)
        job = uuid.uuid4().hex
        refs = [ray.put(np.ascontiguousarray(t)) for t in traces]     # the object store
        rom_ref = ray.put(rom)
        moved = sum(int(t.nbytes) for t in traces) + int(rom.nbytes) * self.workers
        records: list = []
        retries0, deaths0 = self.retries, self.worker_deaths
        recomputed = 0
        devs: list = []
        live = self._live() or [self._least_busy()]
        try:
            # R1 on the workers: main commits, state kept per table
            pieces = [_Piece(live[i % len(live)], "main_commit",
                             (job, i, rom_ref, refs[i], params, shapes), i) for i in range(n)]
            caps = [None] * n
            where = [None] * n
            for p, (cap, rec_, _) in self._gather(pieces, timeout):
                caps[p.tag], where[p.tag] = cap, p.worker
                records.extend(rec_)
            # the coordinator: statement, caps in table order, LogUp challenges, forks
            spans = Spans()
            tr = Transcript()
            absorb_statement(tr, st.params, st.airs, st.shapes, st.public_values)
            for cap in caps:
                tr.absorb("main_cap", cap)
            ch = r1_challenges(st, R1Main(tr, (), ()), spans, HostStages().permute)
            chis = [R1Challenges(ch.challenges,
                                 tuple(f if j == i else None for j, f in enumerate(ch.forks)),
                                 ch.logup_nonce) for i in range(n)]
            # every table's chain to its DEEP quotient, on the worker holding its R1 state
            # (else the least busy one); the DQs come back through the object store
            live = set(self._live())
            pieces = [_Piece(where[i] if where[i] in live else self._least_busy(), "prove_table",
                             (job, i, rom_ref, refs[i], pv, params, shapes, caps[i], chis[i]), i)
                      for i in range(n)]
            deeps = [None] * n
            for p, (deep, rec_, redo, _) in self._gather(pieces, timeout):
                deeps[p.tag], where[p.tag] = deep, p.worker
                records.extend(rec_)
                recomputed += int(redo)
                moved += int(deep.dq.nbytes)
            tree_caps = [{m: (None if r is None else r.cap) for m, r in d.trees.items()}
                         for d in deeps]

            def opener(wanted: dict) -> dict:
                """Open the tables of ``wanted`` ({table: indices}) on the workers that
                hold their trees (a dead one's tables recomputed elsewhere)."""
                nonlocal recomputed, moved
                live = set(self._live())
                ps = [_Piece(where[i] if where[i] in live else self._least_busy(), "open_table",
                             (job, i, idx, rom_ref, refs[i], pv, params, shapes, tree_caps[i],
                              chis[i]), i) for i, idx in wanted.items()]
                out = {}
                for p, (opened, rec_, redo, dev, _) in self._gather(ps, timeout):
                    out[p.tag] = (wanted[p.tag], opened)
                    where[p.tag] = p.worker
                    records.extend(rec_)
                    recomputed += int(redo)
                    moved += sum(int(a.nbytes) for o in opened.values() if o is not None
                                 for a in o)
                    if dev is not None:
                        devs.append(dev)
                return out

            # the join on the coordinator: one FRI over every table's DQ, the queries, the
            # openings (by the workers holding the trees)
            with self.local._phase("join", phases):
                proof = _join(st, ch, tr, deeps, _JoinStages(opener), spans)
            records.extend(spans.stats.records)
            del deeps
        finally:
            for a in self._actors:
                a.drop.remote(job)
            del refs
        phases["prove"] = time.perf_counter() - t1
        self_check = {"enabled": bool(cfg.self_check), "checked": 0, "failed": 0, "seconds": 0.0}
        if cfg.self_check:
            with self.local._phase("self_check", phases):
                self.local._self_check(proof, airs, pvs, [])
            self_check.update(checked=1, seconds=round(phases["self_check"], 4))
        phases["total"] = time.perf_counter() - t0
        work = sum(s for name, t, s in records if name in ("r1_main", "table", "table_open"))
        cluster = {"mode": "sharded", "workers": self.workers, "gpus": self.gpus,
                   "backend": self.local.backend,
                   "retries": self.retries - retries0, "recomputed": recomputed,
                   "worker_deaths": self.worker_deaths - deaths0,
                   "device_downgrades": sum(_downgrades(d["recovery"]) for d in devs),
                   "bytes_through_object_store": moved,
                   "worker_seconds": round(work, 4),
                   "seconds": round(phases["prove"], 4)}
        if devs:
            cluster["device"] = {
                "downgraded_tables": sum(int(d["downgraded"]) for d in devs),
                "h2d_bytes": sum(d["h2d_bytes"] for d in devs),
                "d2h_bytes": sum(d["d2h_bytes"] for d in devs),
                "recovery": _sum_recovery([d["recovery"] for d in devs])}
        counters = {"proof_bytes": len(proof), "self_check": self_check, "cluster": cluster}
        stats = ProofStats(records=records, counters=counters, backend=self.local.backend,
                           cycles=rec.cycles, phases=phases, proof_bytes=len(proof),
                           peak_rss_bytes=_rss_bytes())
        for air, t in zip(airs, traces):
            per: dict = {}
            for name, tab, s in records:
                if tab == air.name and name != "table":
                    per[name] = per.get(name, 0.0) + s
            stats.tables.append(TableStats(air.name, int(t.shape[0]), air.main_width,
                                           air.aux_width, air.num_parts, per))
        return BlockProof(rom, proof, stats)


_GONE = object()      # _down marker: a worker out of restarts


def _downgrades(recovery: dict | None) -> int:
    """Tables downgraded to the host, summed over the recovery sites."""
    return sum(int(c.get("downgrades", 0)) for c in (recovery or {}).values())


def _sum_recovery(items: list) -> dict:
    out: dict = {}
    for rec in items:
        for site, c in rec.items():
            o = out.setdefault(site, {})
            for k, v in c.items():
                o[k] = o.get(k, 0) + int(v)
    return out


# --------------------------------------------------------------------------- CLI

def run_cli(args, fail) -> int:
    """``prove --cluster [ADDRESS] BLOCK... [--shard-tables] [--workers N]`` (prover/cli.py
    parses; ``fail(code, message)`` is its exception).  Writes BLOCK.proof beside each
    block (``-o`` with one block), one progress line per block; the exit codes of
    ``prove``: 1 for a block that cannot be proven (naming it), 2 usage, 3 a cluster
    failure, 4 a self-check failure."""
    import sys
    from steadfast.vm.block import BlockError, load_block
    from .cli import EXIT_INTERNAL, EXIT_INVALID, EXIT_OK, EXIT_USAGE, EXIT_XCHECK, _default_output
    paths = list(args.block)
    address = args.cluster or None
    if address is not None and (os.path.exists(address) or address.lower().endswith(".json")):
        paths.insert(0, address)         # "--cluster BLOCK ...": no address, a local Ray
        address = None
    if not paths:
        raise fail(EXIT_USAGE, "no block given (see --help)")
    if args.precompile or getattr(args, "execute_only", False):
        raise fail(EXIT_USAGE, "--precompile and --execute-only do not apply to --cluster")
    if args.shard_tables and len(paths) != 1:
        raise fail(EXIT_USAGE, f"--shard-tables proves one block, got {len(paths)}")
    if args.output and len(paths) != 1:
        raise fail(EXIT_USAGE, "-o/--output needs exactly one block")
    blocks = []
    for path in paths:
        try:
            blocks.append(load_block(path))
        except OSError as exc:
            raise fail(EXIT_USAGE, f"cannot read {path}: {exc.strerror or exc}") from None
        except BlockError as exc:
            raise fail(EXIT_USAGE, f"{path}: {exc}") from None
    outs = [args.output] if args.output else [_default_output(p) for p in paths]
    for out in outs:
        d = os.path.dirname(os.path.abspath(out))
        if not os.path.isdir(d):
            raise fail(EXIT_USAGE, f"cannot write {out}: no directory {d}")
    cfg = ProverConfig(backend=args.backend, vram_budget=args.vram_budget,
                       log_blowup=args.log_blowup, num_queries=args.queries,
                       pow_bits=args.pow_bits, threads=args.threads, check=args.check,
                       postmortem_dir=args.postmortem_dir, self_check=not args.no_self_check)
    workers = args.workers if args.workers is not None else 2
    say = (lambda msg: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    t0 = time.perf_counter()
    try:
        timeline = None
        if args.timeline:
            from .timeline import Timeline
            timeline = Timeline()
        # the PROVER_* switches of this command's environment apply in the workers
        env = {k: v for k, v in os.environ.items() if k.startswith("PROVER_")}
        cp = ClusterProver(address, cfg, workers=workers, timeline=timeline, worker_env=env)
    except ConfigError as exc:
        raise fail(EXIT_USAGE, str(exc)) from None
    except ClusterError as exc:
        raise fail(EXIT_INTERNAL, str(exc)) from None
    say(f"cluster: {workers} workers ({cp.gpus} GPUs), {len(paths)} block(s)"
        + (", tables sharded" if args.shard_tables else ""))
    with cp:
        try:
            if args.shard_tables:
                results = [(0, cp.prove_sharded(blocks[0]))]
            else:
                results = cp.prove_many(blocks)
            for i, proof in results:
                data = proof.to_bytes()
                try:
                    with open(outs[i], "wb") as fh:
                        fh.write(data)
                except OSError as exc:
                    raise fail(EXIT_USAGE, f"cannot write {outs[i]}: {exc.strerror or exc}") from None
                c = proof.stats.counters.get("cluster", {})
                say(f"[{time.perf_counter() - t0:8.2f}s] {paths[i]}: wrote {outs[i]} "
                    f"({len(data):,} bytes; {proof.stats.cycles:,} cycles; "
                    f"{c.get('seconds', 0):.2f}s; retries {c.get('retries', 0)})")
        except UnprovableBlock as exc:
            i = getattr(exc, "cluster_piece", 0) if not args.shard_tables else 0
            name = paths[i] if isinstance(i, int) and 0 <= i < len(paths) else "a block"
            lines = [f"{name}: block cannot be proven: {exc}"] + [f"  {d}" for d in exc.details]
            raise fail(EXIT_INVALID, "\n".join(lines)) from None
        except ProofSelfCheckFailure as exc:
            raise fail(EXIT_XCHECK, f"{exc}; no proof written") from None
        except (ClusterError, TimeoutError) as exc:
            raise fail(EXIT_INTERNAL, f"cluster: {exc}") from None
        finally:
            if timeline is not None:
                try:
                    timeline.write(args.timeline)
                except OSError as exc:
                    print(f"error: cannot write the timeline {args.timeline}: "
                          f"{exc.strerror or exc}", file=sys.stderr)
    return EXIT_OK


__all__ = ["ClusterProver", "ClusterFuture", "ClusterError", "run_cli"]
