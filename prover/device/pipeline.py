"""The device pipeline: tables run concurrently, admitted against the VRAM budget.

    R1 main   every table on a worker (admitted heaviest first); once all are done the
              mixed main tree over their leaf digests (table order, never completion
              order), its cap absorbed
    barrier   LogUp challenges, one transcript fork per table
    passes    (proof format 6) every table's r1_aux on a worker; the mixed aux tree;
              every table's r2 (its fork absorbs the aux cap, alpha, the quotient, the
              parts commit); the mixed parts tree; every table's r3 -> [XCHECK] -> DEEP
              quotient.  Each pass admits its tables again; a table's trees and DQ stay
              resident (or are spilled to the host under pressure) until the join's
              openings
    join      (one FRI since proof format 3) on the calling thread, admitted as the
              pseudo-table ``<join>``: table digests, mu, one FRI over every table's DQ
              (on the device: combine, commit layers, fold with roll-in; site
              ``r4.fri``), final polynomial, proof of work, queries, every table's rows
              (site ``r4.open``) and the three mixed trees' multiproofs (the commitments
              section, format 6); then [XCHECK of every section and the FRI] and every
              table is released

The mixed trees are built on the calling thread, bound to ``<join>`` (spans
``commit_main``, ``commit_aux``, ``commit_parts``: ``PipelineStats.join.stage_s``).

Admission: each table's device bytes are estimated from its shape
(:func:`estimate_bytes`).  A table starts only when its estimate fits in what the budget
has left, or alone when nothing else runs (an oversize table runs by itself and relies on
recovery).  Tables that finished R1 keep their buffers resident across the barrier; when
a waiting table cannot be admitted and nothing runs, resident tables are spilled to the
host (their handles download, then drop the device side) until it fits.

A failure in one table's worker cancels the others (they stop at their next stage), the
epoch is ended (all device memory reclaimed) and the error is raised -- in bounded time.
"""
from __future__ import annotations

import copy
import dataclasses
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from ...kernels.backend import DeviceMemory, budget_from_env, parse_bytes
from ...verifier.proof_format import Proof, encode
from ...verifier.protocol import TableShape, absorb_statement
from ...verifier.transcript import Transcript

from .stages import JOIN, DeviceResultError, DeviceStages, device_gate
from .engines import CudaEngine, EmuEngine
from .faulting import FaultingStages
from .faults import FaultPlan, faults_from_env
from .precheck import Prechecker
from .recovery import RecoveryCounters
from ..core.rounds import (Mixed, _cap, _clear_scratch, fri_layer_heights, mixed_commit,
                           r1_aux, r1_challenges, r1_main_commit, r2_quotient, r3_ood,
                           r4_deep, r4_fri, r4_open, take_quotients)
from ..common.spans import NullSpans, Spans
from ..common.timeline import Timeline

log = logging.getLogger("steadfast.pipeline")

_EPOCH_LOCK = threading.Lock()
_MEMORIES: dict = {}


class ProofCancelled(RuntimeError):
    """Another table's worker failed; this one stopped at its next stage."""


def env_flag(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if raw not in ("0", "1"):
        raise ValueError(f"{name} must be 0 or 1, got {raw!r}")
    return raw == "1"


@dataclass(frozen=True)
class Commits:
    """What XCHECK's recomputation of a table compares with: every table's own main cap
    and the mixed aux and parts caps the forks absorbed."""
    main_caps: list
    aux_cap: np.ndarray
    parts_cap: np.ndarray


@dataclass
class PipelineConfig:
    """How a device proof runs (all fields default from the environment, SPEC §7)."""
    backend: str = "emu"
    budget: int | None = None
    workers: int = 0                     # 0: one per table, at most os.cpu_count()
    serialize_r2: bool = True
    xcheck: bool = False
    force_downgrade: bool = False
    faults: FaultPlan = field(default_factory=FaultPlan)
    timeline: Timeline | None = None
    postmortem_dir: str | os.PathLike[str] | None = None   # None: env, else the XDG state dir
    device_only: bool = True
    precheck: bool = False               # self-check: verify each section as it finishes
    # a corruption XCHECK (or the join's own check) catches: recompute on the host and go
    # on (prover.device.lost); False: stop with the post-mortem, as before issue #26.  The
    # prover turns it on (from_env) unless PROVER_ABORT_ON_CORRUPTION=1
    recover_corruption: bool = False
    # which of the process's device memories (pools, ledgers) the proof runs in: None the
    # one per (backend, budget); a proof service's admission slot names its own
    # (prover.service: each admitted proof in its share, its own epochs and drains)
    memory_key: object = None
    # the proof's number in the fault plan's draws (PROVER_FAULTS): a segmented run's
    # segment index, so that each segment draws its own faults; 0 for a whole proof
    proof_id: int = 0

    @classmethod
    def from_env(cls, backend: str, **overrides) -> "PipelineConfig":
        cfg = cls(backend=backend,
                  budget=budget_from_env(None),
                  serialize_r2=env_flag("PROVER_GPU_SERIALIZE_R2", True),
                  xcheck=env_flag("PROVER_GPU_XCHECK", False),
                  force_downgrade=env_flag("PROVER_GPU_FORCE_DOWNGRADE", False),
                  faults=faults_from_env(),
                  recover_corruption=not env_flag("PROVER_ABORT_ON_CORRUPTION", False))
        for k, v in overrides.items():
            if v is not None:
                setattr(cfg, k, parse_bytes(v) if k == "budget" else v)
        return cfg

    def run(self, st, *, spans: Spans | None = None,
            logs: list | None = None) -> tuple[bytes, "PipelineStats"]:
        """Prove a prepared statement with this configuration (:func:`run_pipeline`): the
        door :func:`prover.core.prove.prove` calls for ``device=``."""
        return run_pipeline(st, self, spans=spans, logs=logs)


@dataclass
class TableStats:
    name: str
    est_bytes: int = 0
    peak_device_bytes: int = 0
    h2d_bytes: int = 0
    d2h_bytes: int = 0
    admission_wait_s: float = 0.0
    downgraded: bool = False
    stage_s: dict = field(default_factory=dict)          # stage -> wall seconds (host clock)
    device_stage_ms: dict = field(default_factory=dict)  # stage -> ms between CUDA events (cuda)


@dataclass
class PipelineStats:
    backend: str
    budget: int | None
    tables: dict = field(default_factory=dict)
    join: TableStats = field(default_factory=lambda: TableStats(JOIN))   # the one FRI
    counters: RecoveryCounters = field(default_factory=RecoveryCounters)
    r2_windows: list = field(default_factory=list)       # (table, start, end) seconds
    peak_device_bytes: int = 0
    spilled_bytes: int = 0
    stale_frees_dropped: int = 0
    xcheck_s: float = 0.0
    xcheck_tags_s: float = 0.0          # the integrity-tag part of xcheck_s
    xcheck_tagged_write_bytes: int = 0  # emu: bytes tagged inside their writes' copy
    precheck_keys: set = field(default_factory=set)   # verifier table_check_key of passed checks
    precheck_s: float = 0.0             # CPU seconds of the overlapped per-table checks
    precheck_failed: list = field(default_factory=list)   # tables whose early check failed
    device_lost: int = 0                # the device was lost in this proof (prover.device.lost)
    corruptions_recovered: int = 0      # caught corruptions recomputed on the host
    host_completion: dict | None = None  # why and how long the proof finished on the host

    def as_dict(self) -> dict:
        return {"backend": self.backend, "budget": self.budget,
                "peak_device_bytes": self.peak_device_bytes, "spilled_bytes": self.spilled_bytes,
                "stale_frees_dropped": self.stale_frees_dropped, "xcheck_s": self.xcheck_s,
                "xcheck_tags_s": self.xcheck_tags_s,
                "xcheck_tagged_write_bytes": self.xcheck_tagged_write_bytes,
                "precheck_tables": len(self.precheck_keys), "precheck_s": self.precheck_s,
                "precheck_failed": list(self.precheck_failed),
                "recovery": self.counters.as_dict(),
                "device_lost": self.device_lost,
                "corruptions_recovered": self.corruptions_recovered,
                "recovered_by_site": self.counters.events_dict(),
                "device_lost_at": self.counters.lost_at,
                "host_completion": self.host_completion,
                "r2_windows": [list(w) for w in self.r2_windows],
                "tables": {k: vars(v) for k, v in self.tables.items()},
                "join": vars(self.join)}


#: cupy's pool hands out blocks in multiples of 512 bytes (and never less): a buffer
#: holds its rounded size, which dominates for small tables
_POOL_UNIT = 512
#: per kernel call, the slack engines.SCRATCH_ESTIMATES book on top of a call's bound
_CALL_SLACK = 4096


def _blk(nbytes: int) -> int:
    return max(_POOL_UNIT, -(-int(nbytes) // _POOL_UNIT) * _POOL_UNIT)


def estimate_bytes(shape: TableShape, num_queries: int | None = None) -> int:
    """Device bytes a table can hold at its peak -- an upper bound of what the budget
    ledger books for it and of what cupy's pool holds live for it, each buffer rounded to
    the pool's 512-byte unit:

    * resident buffers (they live until the table is released): the uploaded trace;
      main, aux and parts coefficients, LDEs and Merkle trees; the aux trace; the
      quotient and its parts;
    * plus the largest of what comes and goes (a table's calls run one at a time): before
      R4 one call's transient (a commit's row-major copy, the padded parts, the R2
      coefficients and preprocessed LDE, each with its scratch booking,
      engines.SCRATCH_ESTIMATES); at DEEP its quotient DQ (resident until the join
      combines it) and the DEEP scratch; at the join the gathers of its openings (the
      FRI itself is booked by :func:`estimate_join_bytes`);
    * plus the process-wide device tables the table may grow (NTT twiddles in both
      directions, a few coset/scale tables, the quotient selectors): shared, so a block's
      sum counts them more than once.

    tests/test_cuda_paths.py measures a block's ledger peak and live pool peak on the
    pool-accurate stand-in against the sum of its tables' estimates."""
    W = 4                                            # bytes per uint32 word
    n, N, M = shape.n, 1 << shape.log_lde, 1 << shape.log_quotient
    w, a, c, pw = shape.main_width, shape.aux_width, shape.parts_width, shape.prep_width

    def tree(leaves):
        return _blk(W * (2 * leaves - 1) * 8)

    base = _blk(W * w * n)                                           # the trace
    base += _blk(W * w * n) + _blk(W * w * N) + tree(N)              # main
    if shape.aux_cols:
        base += 2 * _blk(W * a * n) + _blk(W * a * N) + tree(N)      # aux trace + aux
    base += _blk(W * 4 * M) + _blk(W * c * n)                        # quotient, parts
    base += _blk(W * c * N) + tree(N)                                # parts LDE + tree
    groups = 4                                                       # main, aux, parts, prep
    before_fri = max(                       # R1..R3: one call's transient on top of base
        _blk(W * N * max(w, a)) + W * (max(w, a) * n + 8 * N),              # lde_commit
        2 * _blk(W * c * N) + W * 8 * N,                                     # parts commit
        _blk(W * 4 * M) + W * (pw * N + 8 * M),                              # quotient
        W * n * (a + w),                                                     # aux build
        W * max(w, a, c) * (n + n // 16 + 4),                                # OOD
    )
    deep = _blk(W * 4 * N) + W * N * (8 * groups + 8)               # DQ + DEEP scratch
    # openings gather rows and paths for every query (``num_queries``; unknown: 1000,
    # the parameters' cap)
    q = min(N, 1000 if num_queries is None else int(num_queries))
    opening = _blk(W * 4 * N) + (W * max(w, a, c) + 8 + 32 * (shape.log_lde + 1) + 16) * q
    peak = base + _CALL_SLACK + max(before_fri, deep, opening)
    shared = 2 * _blk(W * 2 * max(N, 8))                                 # twiddles
    shared += 4 * _blk(W * N)                                            # coset tables
    shared += _blk(W * 3 * M) + 2 * _blk(W * 2 * M)                      # selectors
    return peak + shared


def estimate_join_bytes(shapes, params) -> int:
    """Device bytes the join (one FRI for all tables) holds at its peak, on top of the
    tables' resident buffers (booked by :func:`estimate_bytes`): every combined input F_h
    (at most one per table height; each F_h below the top is released once rolled in,
    bounded here by all of them), every FRI layer f_i with its tree (kept for the
    openings), the roll-in upload of a downgraded table's DQ, and the openings' gathers
    (rows, multiproof nodes, indices) for ``params.num_queries`` queries."""
    W = 4
    heights = fri_layer_heights([s.log_lde for s in shapes], params.log_blowup,
                                params.log_final_poly_len, params.log_fri_arity)
    inputs = sum(_blk(W * 4 * (1 << h)) for h in {s.log_lde for s in shapes})
    layers = 0
    for h, h_next in zip(heights, heights[1:]):
        leaves = 1 << h_next
        layers += _blk(W * 4 * (1 << h_next)) + _blk(W * (2 * leaves - 1) * 8)
        layers += _CALL_SLACK                                  # fold / commit slack
    q = int(params.num_queries)
    a = 1 << params.log_fri_arity
    gathers = q * (8 + W * 4 * a + 32 * (heights[0] + 1)) + _CALL_SLACK
    return inputs + _blk(W * 4 * (1 << heights[0])) + layers + gathers


def device_memory(kind: str, budget: int | None, slot: object = None) -> DeviceMemory:
    """One DeviceMemory per (backend, budget) per process -- per (backend, budget, slot)
    for a proof service's admission slots (``PipelineConfig.memory_key``): its pool
    outlives proofs, and each proof runs in its own epoch of it."""
    with _EPOCH_LOCK:
        key = (kind, budget) if slot is None else (kind, budget, slot)
        if key not in _MEMORIES:
            _MEMORIES[key] = DeviceMemory(kind, budget)
        return _MEMORIES[key]


class Admission:
    """Admit tables against the budget: atomic check-and-reserve, an oversize table alone."""

    def __init__(self, budget: int | None, spill=None):
        self.budget = budget
        self.reserved = 0
        self.running = 0
        self.held: dict[str, int] = {}          # idle tables' resident bytes (spillable)
        self._spill = spill
        self.cond = threading.Condition()
        self.cancelled = False

    def acquire(self, table: str, est: int) -> float:
        """Wait until ``table`` fits (spilling idle tables if need be) and book ``est``.
        If it raises (cancelled, or a spill failed) nothing of it is booked and the
        table's own idle bytes are still held: ``reserved``/``held``/``running`` stay as
        they were."""
        t0 = time.perf_counter()
        with self.cond:
            while True:
                if self.cancelled:
                    raise ProofCancelled(f"{table}: proof cancelled while waiting for admission")
                held = self.held.pop(table, 0)
                self.reserved -= held
                fits = self.budget is None or self.reserved + est <= self.budget
                if fits or self.running == 0:
                    if not fits and self.held:
                        self._spill_idle_keeping(table, held)
                        continue
                    self.reserved += est
                    self.running += 1
                    return time.perf_counter() - t0
                self._hold(table, held)
                if self.running == 0 and self.held:
                    self._spill_idle()
                    continue
                self.cond.wait(timeout=0.5)

    def _hold(self, table: str, nbytes: int) -> None:
        self.reserved += nbytes
        if nbytes:
            self.held[table] = nbytes

    def _spill_idle_keeping(self, table: str, held: int) -> None:
        """Spill one idle table while ``table``'s own idle bytes (``held``) are out of the
        books; on a failure they go back before the error leaves."""
        try:
            self._spill_idle()
        except BaseException:
            self._hold(table, held)
            raise

    def _spill_idle(self) -> None:
        # called with the condition held: move the largest idle table to the host; if the
        # spill fails the table stays held (what is still resident is still booked)
        name = max(self.held, key=self.held.get)
        nbytes = self.held.pop(name)
        self.reserved -= nbytes
        if self._spill:
            try:
                self._spill(name)
            except BaseException:
                self._hold(name, nbytes)
                raise

    def release(self, table: str, est: int, keep_resident: int = 0) -> None:
        with self.cond:
            self.reserved -= est
            self.running -= 1
            if keep_resident:
                self.held[table] = keep_resident
                self.reserved += keep_resident
            self.cond.notify_all()

    def cancel(self) -> None:
        with self.cond:
            self.cancelled = True
            self.cond.notify_all()


class StageClock(Spans):
    """The spans the rounds see inside the pipeline: forwards to the caller's spans and
    adds each stage's wall time to its table's ``TableStats.stage_s``; on ``cuda`` it also
    records a CUDA event pair on the worker's stream around the stage and, when the table
    finishes (:meth:`resolve`), stores the device time between them in
    ``device_stage_ms`` -- no synchronisation inside the pipeline."""

    def __init__(self, inner: Spans, stats: "PipelineStats", stages: DeviceStages):
        self._inner = inner
        self._stats = stats
        self._stages = stages
        self._events = stages.engine.stage_events
        self._pending: dict = {}
        self._lock = threading.Lock()

    @property
    def stats(self):
        return self._inner.stats

    def count(self, key: str, value) -> None:
        self._inner.count(key, value)

    @contextmanager
    def span(self, name: str, table: str | None = None):
        if name == "table":                 # the whole chain, not a stage
            with self._inner.span(name, table):
                yield
            return
        key = self._stages.bound_table() or table
        ev = self._events()
        t0 = time.perf_counter()
        if ev is not None:
            ev[0].record(ev[2])
        try:
            with self._inner.span(name, table):
                yield
        finally:
            if ev is not None:
                ev[1].record(ev[2])
            dt = time.perf_counter() - t0
            with self._lock:
                ts = self._stats.tables.get(key) or (self._stats.join if key == JOIN else None)
                if ts is not None:
                    ts.stage_s[name] = ts.stage_s.get(name, 0.0) + dt
                    if ev is not None:
                        self._pending.setdefault(key, []).append((name, ev[0], ev[1]))

    def resolve(self, table: str) -> None:
        """Turn the table's recorded event pairs into device milliseconds."""
        with self._lock:
            pending = self._pending.pop(table, [])
        ts = self._stats.tables.get(table) or (self._stats.join if table == JOIN else None)
        for name, start, end in pending:
            end.synchronize()
            ms = float(start.elapsed_time(end))
            if ts is not None and ms >= 0:          # the simulator answers -1 (no timing)
                ts.device_stage_ms[name] = ts.device_stage_ms.get(name, 0.0) + ms


def make_stages(cfg: PipelineConfig, mem: DeviceMemory, counters, proof_id: int) -> DeviceStages:
    """The proof's stages: :class:`DeviceStages`, or -- chosen here, once, when the
    configuration has a fault plan -- :class:`prover.device.faulting.FaultingStages`,
    the same stages with the plan's faults injected at their steps' edges."""
    engine = EmuEngine() if cfg.backend == "emu" else CudaEngine(cfg.backend)
    engine.mem = mem
    kw = dict(counters=counters, timeline=cfg.timeline, serialize_r2=cfg.serialize_r2,
              force_downgrade=cfg.force_downgrade, xcheck=cfg.xcheck, proof_id=proof_id,
              device_only=cfg.device_only)
    if cfg.faults is not None and cfg.faults.active:
        return FaultingStages(mem, engine, faults=cfg.faults, **kw)
    return DeviceStages(mem, engine, **kw)


def run_pipeline(st, cfg: PipelineConfig, spans: Spans | None = None, logs: list | None = None,
                 proof_id: int | None = None) -> tuple[bytes, PipelineStats]:
    """Prove a prepared :class:`prover.core.rounds.Statement` on a device backend; a lost
    device (or a corruption no table recomputation mends) finishes it on the host
    (:func:`prover.device.lost.run_with_recovery`)."""
    from .lost import run_with_recovery
    proof_id = cfg.proof_id if proof_id is None else proof_id
    stats = PipelineStats(cfg.backend, cfg.budget)
    proof = run_with_recovery(lambda: _device_proof(st, cfg, stats, spans, logs, proof_id),
                              st, cfg, stats, spans, logs)
    return proof, stats


def _device_proof(st, cfg: PipelineConfig, stats: PipelineStats, spans, logs,
                  proof_id: int) -> bytes:
    from .lost import xcheck_table
    from .xcheck import check_proof, join_failure
    timeline = cfg.timeline or Timeline(enabled=False)
    cfg.timeline = timeline
    mem = device_memory(cfg.backend, cfg.budget, cfg.memory_key)
    stages = make_stages(cfg, mem, stats.counters, proof_id)
    spans = StageClock(spans or NullSpans(), stats, stages)
    shapes = st.shapes
    names = [s.name for s in shapes]
    if len(set(names)) != len(names):
        # per-table device state is keyed by name: make repeated names unique (the
        # names are labels only -- they are not part of the transcript or the proof)
        shapes = tuple(dataclasses.replace(s, name=f"{s.name}#{i}") for i, s in enumerate(shapes))
        st = dataclasses.replace(st, shapes=shapes)
    k = len(shapes)
    est = [estimate_bytes(s, st.params.num_queries) for s in shapes]
    for s, e in zip(shapes, est):
        stats.tables[s.name] = TableStats(s.name, est_bytes=e)
        stages.shapes[s.name] = s
        stages.gate[s.name] = device_gate(s, cfg.budget, e)
    order = sorted(range(k), key=lambda i: -est[i])            # heaviest first
    workers = cfg.workers or max(1, min(k, os.cpu_count() or 1))

    def spill(name):
        stats.spilled_bytes += stages.spill_table(name)
        timeline.instant("spill", name, cat="admission")

    adm = Admission(cfg.budget, spill)
    failure: list[BaseException] = []
    stats_lock = threading.Lock()          # statistics several workers add to

    def fail(exc):
        with stats_lock:
            if not failure:
                failure.append(exc)
        adm.cancel()

    def guarded(i, fn, keep_resident=False):
        name = shapes[i].name
        if failure:
            raise ProofCancelled(f"{name}: cancelled after another table failed")
        try:
            # admission may spill idle tables, which can fail (a host MemoryError while
            # downloading, a device error): that is this worker's failure (issue #28.3)
            wait = adm.acquire(name, est[i])
        except BaseException as exc:
            fail(exc)
            raise
        stats.tables[name].admission_wait_s += wait
        if wait > 1e-3:
            timeline.complete("wait:admission", time.perf_counter() - wait, time.perf_counter(),
                              name, cat="admission")
        ok = False
        try:
            # the table's phase on its own stream (cuda/sim; synchronised when it ends)
            with mem.stream_scope(), timeline.span(fn.__name__, name):
                out = fn(i)
            ok = True
            return out
        except BaseException as exc:
            fail(exc)
            raise
        finally:
            stats.tables[name].peak_device_bytes = max(stats.tables[name].peak_device_bytes,
                                                       stages.device_bytes(name))
            adm.release(name, est[i], stages.device_bytes(name) if (keep_resident and ok) else 0)

    mem.begin_epoch()
    try:
        tr = Transcript()
        absorb_statement(tr, st.params, st.airs, shapes, st.public_values)
        mains = [None] * k
        preps = [None] * k

        def r1_main_table(i):
            stages.bind(shapes[i].name)
            with spans.span("r1_main", st.airs[i].name):
                mains[i] = stages.main_commit(st.traces[i], shapes[i])
                preps[i] = stages.prep_lde(st.airs[i], shapes[i])

        _run_all(workers, order, lambda i: guarded(i, r1_main_table, keep_resident=True), failure)
        # each table's own main cap: XCHECK's recomputation compares against it
        main_caps = [stages.cap(com.tree, st.params.log_cap) for com in mains]
        stages.bind(JOIN)
        r1 = r1_main_commit(st, tr, mains, preps, stages, spans)     # the mixed main tree
        ch = r1_challenges(st, r1, spans, stages.permute)
        # XCHECK replays each finished section on a pristine copy of its table's fork; so
        # does the self-check's early part (precheck), on a CPU thread while the other
        # tables still run on the device
        pristine = ([copy.deepcopy(f) for f in ch.forks] if cfg.xcheck or cfg.precheck
                    else None)
        deeps = [None] * k
        checker = Prechecker(st, ch, pristine, stats) if cfg.precheck else None

        auxes, r2s = [None] * k, [None] * k

        def aux_pass(i):
            stages.bind(shapes[i].name)
            with spans.span("table", st.airs[i].name):
                auxes[i] = r1_aux(i, st, ch, stages, spans)

        def quotient_pass(i):
            stages.bind(shapes[i].name)
            with spans.span("table", st.airs[i].name):
                r2s[i] = r2_quotient(i, st, r1, ch, auxes[i], aux_cap, stages, spans)

        def deep_pass(i):
            name = shapes[i].name
            stages.bind(name)
            with spans.span("table", st.airs[i].name):
                aux, r2 = auxes[i], r2s[i]
                r3 = r3_ood(i, st, r1, ch, aux, r2, parts_cap, stages, spans)
                r1_i = r1
                if cfg.xcheck:      # a caught corruption: the table recomputed on the host
                    r1_i, aux, r2, r3 = xcheck_table(
                        stages, st, i, r1, ch, aux, r2, r3, cfg, pristine,
                        Commits(main_caps, aux_cap, parts_cap), stats, stats_lock, spans)
                    # the mixed trees open the recomputed (equal) matrices from now on
                    mains[i], aux_coms[i], parts_coms[i] = r1_i.main[i], aux.aux, r2.parts
                if failure:
                    raise ProofCancelled(f"{name}: cancelled after another table failed")
                deeps[i] = r4_deep(i, st, r1_i, ch, aux, r2, r3, stages, spans)
                if checker is not None:         # the per-table check, overlapped
                    checker.submit(i, deeps[i], aux_cap, parts_cap)
            stats.tables[name].downgraded = stages.table(name).downgraded
            spans.resolve(name)

        # every pass keeps its tables' trees and buffers resident for the next (spillable
        # while idle); between the passes the mixed aux and parts trees are built from
        # every table's leaf digests (proof format 6: the forks absorb their caps)
        try:
            _run_all(workers, order, lambda i: guarded(i, aux_pass, keep_resident=True), failure)
            stages.bind(JOIN)
            aux_coms = [a.aux for a in auxes]
            aux_tree = mixed_commit(st, aux_coms, stages, spans, "aux")
            aux_cap = _cap(aux_tree, st.params)
            _run_all(workers, order, lambda i: guarded(i, quotient_pass, keep_resident=True),
                     failure)
            stages.bind(JOIN)
            _clear_scratch(stages)      # the host fallbacks' LDE buffers (core/scratch.py)
            parts_coms = [r.parts for r in r2s]
            parts_tree = mixed_commit(st, parts_coms, stages, spans, "parts")
            parts_cap = _cap(parts_tree, st.params)
            _run_all(workers, order, lambda i: guarded(i, deep_pass, keep_resident=True), failure)
        except BaseException:
            if checker is not None:
                checker.finish()
            raise
        mixed = Mixed(r1.tree, aux_tree, parts_tree)
        stats.join.est_bytes = estimate_join_bytes(shapes, st.params)
        wait = adm.acquire(JOIN, stats.join.est_bytes)       # may spill idle tables
        stats.join.admission_wait_s += wait
        stages.bind(JOIN)
        try:
            try:
                with mem.stream_scope(), timeline.span("join", JOIN):
                    deeps, dqs = take_quotients(deeps)
                    fri = r4_fri(st, r1.transcript, deeps, dqs, stages, spans)
                    proof_obj = r4_open(st, ch, deeps, fri, stages, spans, mixed)
            except DeviceResultError as exc:
                if cfg.xcheck:      # the post-mortem, while everything is still resident
                    with mem.scope():       # its device allocations are this proof's
                        join_failure(stages, st, exc, cfg)
                raise
            stats.join.downgraded = stages.table(JOIN).downgraded
            for name in names_unique(shapes):
                stats.tables[name].peak_device_bytes = max(stats.tables[name].peak_device_bytes,
                                                           stages.device_bytes(name))
            stats.join.peak_device_bytes = stages.device_bytes(JOIN)
            if cfg.xcheck:          # checked while the trees and layers are still resident
                t0 = time.perf_counter()
                with mem.scope():           # its device allocations are this proof's
                    check_proof(stages, st, ch, pristine, proof_obj, cfg)
                stats.xcheck_s += time.perf_counter() - t0
            if checker is not None:
                checker.finish(proof_obj)
                checker = None
        finally:
            if checker is not None:
                checker.finish()
            adm.release(JOIN, stats.join.est_bytes)
            for name in names_unique(shapes) + [JOIN]:
                stages.release_table(name)
            spans.resolve(JOIN)
        proof = encode(proof_obj)
        spans.count("proof_bytes", len(proof))
        if logs is not None:
            logs.append(r1.transcript.log)
            logs.extend(f.log for f in ch.forks)
    finally:
        mem.end_epoch()
        stats.peak_device_bytes = mem.ledger.peak
        stats.stale_frees_dropped = mem.stale_frees_dropped
        stats.xcheck_s += stages.xcheck_s           # integrity tags (XCHECK on)
        stats.xcheck_tags_s = stages.xcheck_s
        stats.xcheck_tagged_write_bytes = stages.engine.tagged_write_bytes
        stats.r2_windows = [(w.table, w.start, w.end) for w in stages.r2_windows.windows]
        for name, ts in stats.tables.items():
            tr_ = stages.table(name).transfers
            ts.h2d_bytes, ts.d2h_bytes = tr_.h2d_bytes, tr_.d2h_bytes
    return proof


def names_unique(shapes) -> list:
    return [s.name for s in shapes]


def _run_all(workers: int, order, fn, failure: list) -> None:
    """Run fn(i) for i in order on a pool; after all stop, re-raise the first recorded
    failure -- or, if none was recorded, the first exception any worker raised: no
    worker's exception is ever dropped (issue #28.3)."""
    raised = []
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="table") as pool:
        futures = [pool.submit(fn, i) for i in order]
        for f in futures:
            try:
                f.result()
            except BaseException as exc:
                raised.append(exc)
    if failure:
        raise failure[0]
    if raised:
        raise raised[0]


__all__ = ["PipelineConfig", "PipelineStats", "run_pipeline", "estimate_bytes",
           "estimate_join_bytes", "Admission",
           "ProofCancelled", "device_memory", "env_flag", "StageClock"]
