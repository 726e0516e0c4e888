"""The prover's stages on a device backend, with resident handles and recovery.

:class:`DeviceStages` has the same methods as :class:`prover.stages.HostStages` (the round
driver cannot tell them apart) and runs each stage's work on the device:

* every buffer a stage produces (trace upload, main/aux/parts LDE and coefficients, tree
  nodes, quotient values and their decomposition, FRI layers) is held by a
  :class:`~prover.residency.ResidentHandle`; committed matrices are returned as
  :class:`DevCommitted`, whose ``lde``/``coeffs`` properties materialise on the host only
  when a host stage asks for them;
* each stage runs through :meth:`prover.recovery.Recovery.run` at its recovery site
  (``r1.main``, ``r1.aux``, ``r2``, ``r2.tree``, ``r3``, ``r4.deep``, ``r4.fri``,
  ``r4.open``): a decline (``DeviceOOM``) drains, retries once, then downgrades the table
  to the host path, materialising only the missing side of each input handle;
* after a downgrade the table's later stages run on the host; each stage reads its
  inputs through their handles, so mixed states (aux on the device, main on the host)
  are legal;
* the device R2 window (constraint evaluation + decomposition) takes a process-wide lock
  unless ``PROVER_GPU_SERIALIZE_R2=0``; every window is recorded (start, end, table).

Compute engines: on ``emu`` the "device" work is the host kernels run on the emulated
device memory (a separate numpy memory space with its own byte budget and explicit
transfers); on ``sim``/``cuda`` the numba.cuda kernels (see :mod:`prover.engines`).
The output bytes are identical in every case: the engines are bit-identical to the host.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np

from steadfast.errors import SteadfastError
from steadfast.kernels import multiproof as mp
from steadfast.kernels.backend import DeviceArray, DeviceMemory
from steadfast.kernels.merkle import level_offsets
from steadfast.kernels.ntt_host import bit_reverse_permutation
from steadfast.verifier.protocol import TableShape

from .engines import CudaEngine, EmuEngine, checksum_words
from .faults import FaultPlan
from .recovery import Recovery, RecoveryCounters
from .residency import DevCommitted, DevTree, ResidentHandle, TransferStats
from .stages import Committed, HostStages
from .timeline import Timeline
from .xcheck import lde_matches_leaves, tree_consistent

P = 2013265921

#: the process-wide R2 lock (SPEC §6: R2 serialisation is process-wide, not per prover)
R2_LOCK = threading.Lock()

#: numba's CUDA simulator swaps module globals while a kernel runs and stores a launch's
#: configuration on the kernel object: two launches from different worker threads corrupt
#: each other.  On ``sim`` every device stage attempt holds this lock (on ``cuda`` each
#: worker's launches go to its own stream -- DeviceMemory.stream_scope -- and need no
#: lock; on ``emu`` there are no launches).
SIM_SUBMIT_LOCK = threading.RLock()


#: What each device dispatch requires of a table (kernel limits).  A device stage whose
#: check fails declines (and the table recovers on the host); :func:`device_gate` is the
#: conjunction of all of them, so a table the gate admits is accepted by every dispatch.
MAX_DEVICE_LOG_LDE = 27            # twiddle tables / the field's two-adicity
DISPATCH_CHECKS = {
    "r1.main": lambda s: 1 <= s.log_n and s.log_lde <= MAX_DEVICE_LOG_LDE and s.main_width >= 1,
    "r1.aux": lambda s: s.aux_cols == 0 or s.aux_width >= 4,
    "r2": lambda s: s.log_n <= s.log_quotient <= s.log_lde,
    "r2.tree": lambda s: 1 <= s.num_parts <= (1 << s.log_blowup),
    "r3": lambda s: s.log_n >= 1,
    "r4.deep": lambda s: s.log_lde <= MAX_DEVICE_LOG_LDE,
    "r4.fri": lambda s: s.log_lde <= MAX_DEVICE_LOG_LDE,       # the join's fold kernel
    "r4.open": lambda s: s.log_lde <= 62,
}


def dispatch_ok(site: str, shape) -> bool:
    return bool(DISPATCH_CHECKS[site](shape))


def device_gate(shape, budget: int | None, estimate: int) -> bool:
    """Device-only mode (no host copies) for this table: every dispatch accepts it and its
    estimated device bytes fit the budget."""
    return all(dispatch_ok(site, shape) for site in DISPATCH_CHECKS) and \
        (budget is None or estimate <= budget)


@dataclass
class TableState:
    """Per-table device state (touched only by the worker running that table)."""
    name: str
    downgraded: bool = False
    handles: list = field(default_factory=list)
    tags: dict = field(default_factory=dict)          # handle id -> checksum at production
    host_inputs: dict = field(default_factory=dict)   # stage -> the host array it was uploaded from
    injected_inputs: set = field(default_factory=set)
    outputs: dict = field(default_factory=dict)       # stage -> handle (for post-mortems)
    transfers: TransferStats = field(default_factory=TransferStats)


@dataclass
class R2Window:
    table: str
    start: float
    end: float | None = None


class R2Windows:
    """Records every device R2 window; tells whether one overlapped another."""

    def __init__(self):
        self._lock = threading.Lock()
        self.windows: list[R2Window] = []

    def open(self, table: str) -> R2Window:
        w = R2Window(table, time.perf_counter())
        with self._lock:
            self.windows.append(w)
        return w

    def close(self, w: R2Window) -> None:
        w.end = time.perf_counter()

    def overlapped(self, w: R2Window) -> bool:
        end = w.end if w.end is not None else time.perf_counter()
        with self._lock:
            for o in self.windows:
                if o is w:
                    continue
                o_end = o.end if o.end is not None else time.perf_counter()
                if o.start < end and o_end > w.start:
                    return True
        return False

    def any_overlap(self) -> bool:
        return any(self.overlapped(w) for w in self.windows)


class DeviceStages(HostStages):
    """Every stage on the device (see module docstring)."""

    def __init__(self, mem: DeviceMemory, engine, *, faults: FaultPlan | None = None,
                 counters: RecoveryCounters | None = None, timeline: Timeline | None = None,
                 serialize_r2: bool = True, force_downgrade: bool = False,
                 xcheck: bool = False, proof_id: int = 0, device_only: bool = True):
        super().__init__()
        self.mem = mem
        self.engine = engine
        self.name = mem.kind
        self.faults = faults or FaultPlan()
        self.counters = counters or RecoveryCounters()
        self.timeline = timeline or Timeline(enabled=False)
        self.serialize_r2 = serialize_r2
        self.force_downgrade = force_downgrade
        self.xcheck = xcheck
        engine.tag_writes = bool(xcheck)     # emu: tags computed in the writes' copy
        self.device_only = device_only
        self.proof_id = proof_id
        self.recovery = Recovery(mem, self.faults, self.counters, self.timeline,
                                 force_downgrade=force_downgrade, proof=proof_id)
        self.r2_windows = R2Windows()
        self.inject = True                 # off while a post-mortem reruns the device chain
        self._tables: dict[str, TableState] = {}
        self._tlock = threading.Lock()
        self._local = threading.local()     # the table this worker thread is proving
        self.xcheck_s = 0.0                 # integrity tagging/checking time (XCHECK on)
        self.shapes: dict = {}               # table -> TableShape (for the dispatch checks)
        self.gate: dict = {}                 # table -> device-only admitted

    def bind(self, table: str) -> None:
        """Tell the stages which table the calling worker thread is proving (used by
        stages whose arguments do not name it: OOD, FRI layers, openings)."""
        self._local.table = table

    def bound_table(self) -> str | None:
        """The table the calling worker thread is proving (None outside a worker)."""
        return getattr(self._local, "table", None)

    def _table_of(self, obj) -> str:
        return getattr(obj, "table", None) or getattr(self._local, "table", "?")

    @staticmethod
    def _declined(why: str):
        def dev():
            from steadfast.kernels.backend import DeviceOOM
            raise DeviceOOM(0, 0, None, why)
        return dev

    # ------------------------------------------------------------------ plumbing
    def table(self, name: str) -> TableState:
        with self._tlock:
            if name not in self._tables:
                self._tables[name] = TableState(name)
            return self._tables[name]

    def _handle(self, table: str, stage: str, dev, keep_host: np.ndarray | None = None,
                seal: bool = True):
        """Wrap a fresh device buffer in a handle (device-only unless a host copy is kept)."""
        st = self.table(table)
        h = ResidentHandle(table, stage, self.mem, device=dev, host=keep_host, stats=st.transfers)
        st.handles.append(h)
        if seal:
            self._seal(h)
        return h

    def _seal(self, h: ResidentHandle) -> None:
        """With XCHECK on, record an integrity tag of what the stage produced, so that a
        post-mortem can tell a buffer corrupted later (a resident input) from a wrong result."""
        if self.xcheck:
            t0 = time.perf_counter()
            self.table(h.table).tags[id(h)] = self.engine.production_tag(h.device())
            self._xcheck_time(time.perf_counter() - t0)

    def integrity(self, table: str) -> list:
        """Handles whose device copy was changed after its stage produced it.

        Only the smaller buffers carry an integrity tag (a checksum taken at production:
        coefficients, the quotient and its parts, FRI layers; the aux trace is released
        after its commit); the largest
        are checked here, on a failure only, against what they must agree with:

        * the uploaded trace against the prover's host input;
        * a Merkle tree against itself (its inner nodes rebuilt from its leaves);
        * an LDE against its (self-consistent) tree's leaves, rehashed from the LDE.  The
          tree was built from the LDE as it was produced, so an LDE that no longer hashes
          to its leaves changed while resident.  A *wrong* LDE committed as produced (a
          transient fault in the stage) still matches its tree, and is not reported."""
        t0 = time.perf_counter()
        st = self.table(table)
        bad = []
        lde_of = {}                         # prefix -> the latest LDE (made before its tree)
        with self.submission_lock():        # checksum kernels are launches too (sim)
            for h in st.handles:
                if h.stage.endswith("_lde"):
                    lde_of[h.stage[:-len("_lde")]] = h
                if not h.on_device:
                    continue
                tag = st.tags.get(id(h))
                if tag is not None:
                    if self._checksum_anyway(h) != tag:
                        bad.append(h)
                elif h.stage in st.host_inputs:
                    ref = np.asarray(st.host_inputs[h.stage])
                    if not np.array_equal(np.asarray(self.engine.download_view(h.device())), ref.T):
                        bad.append(h)
                elif h.stage.endswith("_tree"):
                    nodes = np.asarray(self.engine.download_view(h.device()))
                    if not tree_consistent(nodes):
                        bad.append(h)
                    else:
                        lde = lde_of.get(h.stage[:-len("_tree")])
                        if lde is not None and lde.on_device and not lde_matches_leaves(
                                np.asarray(self.engine.download_view(lde.device())), nodes):
                            bad.append(lde)
        self._xcheck_time(time.perf_counter() - t0)
        return bad

    def _checksum_anyway(self, h: ResidentHandle) -> tuple:
        """A post-mortem's integrity tag of a resident buffer: reduced on the device, or
        (when the device has no room for the reduction's partials) on a downloaded copy
        -- the same pair; a post-mortem must not fail for a transient device condition."""
        from steadfast.kernels.backend import DeviceOOM, as_device_oom
        try:
            return self.engine.checksum(h.device())
        except Exception as raw:
            if not isinstance(raw, DeviceOOM) and as_device_oom(raw) is None:
                raise
            return checksum_words(np.asarray(self.engine.download_view(h.device())))

    def _xcheck_time(self, dt: float) -> None:
        """XCHECK's own work outside cross_check/check_proof (integrity tags), for the stats."""
        with self._tlock:
            self.xcheck_s += dt

    def _put(self, table: str, stage: str, host: np.ndarray, seal: bool = True):
        """Upload a host array into a fresh device buffer (the budget is checked first)."""
        dev = self.mem.to_device(np.ascontiguousarray(host), tag=f"{table}/{stage}")
        self.table(table).transfers.h2d_bytes += host.nbytes
        device_only = self.device_only and self.gate.get(table, True)
        return self._handle(table, stage, dev, None if device_only else host, seal=seal)

    def submission_lock(self):
        """The lock kernel submission needs on this backend (see SIM_SUBMIT_LOCK)."""
        return SIM_SUBMIT_LOCK if self.mem.kind == "sim" else _NULL_LOCK

    def _run(self, site: str, table: str, device_fn, host_fn, inputs=()):
        shape = self.shapes.get(table)

        def locked():
            if shape is not None and not dispatch_ok(site, shape):
                from steadfast.kernels.backend import DeviceOOM
                raise DeviceOOM(0, 0, None, f"the {site} device kernels do not accept this table")
            with self.submission_lock():
                return device_fn()
        with self.timeline.span(site, table, cat="stage"):
            return self._run_site(site, table, locked, host_fn, inputs)

    def _run_site(self, site: str, table: str, device_fn, host_fn, inputs=()):
        st = self.table(table)
        if st.downgraded and not self.force_downgrade:
            # (under FORCE_DOWNGRADE every site keeps taking the recovery path instead)
            # the table continues on the host; reading a device-only input is a
            # host materialisation at this site
            for h in inputs:
                if not h.on_host:
                    h.host()
                    self.recovery._bump(site, "host_materialisations")
            return host_fn()

        def host_after_downgrade():
            st.downgraded = True
            return host_fn()
        return self.recovery.run(site, table, device_fn, host_after_downgrade, inputs)

    def _inject_output(self, site: str, table: str, h: ResidentHandle, axis: int) -> None:
        """``corrupt@site``: wrong values in this stage's device output (first run only);
        then seal the output as produced."""
        if self.inject and self.faults.fires("corrupt", site, table, 0, self.proof_id):
            self._corrupt(h, site, table, axis)
            self.timeline.instant("inject:corrupt", table, site=site, buffer=h.stage)
        self._seal(h)

    def _inject_input(self, site: str, table: str, h: ResidentHandle | None, axis: int) -> None:
        """``corrupt-input@site``: corrupt a resident input in place (persistent)."""
        if h is None or not h.on_device:
            return
        st = self.table(table)
        if site in st.injected_inputs or not self.inject:
            return
        if self.faults.fires("corrupt-input", site, table, 0, self.proof_id):
            st.injected_inputs.add(site)
            self._corrupt(h, site, table, axis)
            self.timeline.instant("inject:corrupt-input", table, site=site, buffer=h.stage)

    def _corrupt(self, h: ResidentHandle, site: str, table: str, axis: int) -> None:
        data = self.engine.download_view(h.device())
        moved = np.moveaxis(data, axis, 0).copy()
        rows = self.faults.corruption_rows(moved.shape[0], table, site)
        moved[rows] = ((moved[rows].astype(np.uint64) + 1) % P).astype(np.uint32)
        self.engine.upload_into(h.device(), np.ascontiguousarray(np.moveaxis(moved, 0, axis)))

    # ------------------------------------------------------------------ R1
    def _inject_commit(self, site: str, table: str, lde_h: ResidentHandle,
                       nodes_h: ResidentHandle, root: np.ndarray) -> np.ndarray:
        """``corrupt@site`` at a commit site: wrong values in the LDE the stage produced,
        committed consistently (what a faulty LDE kernel gives: the Merkle kernel hashes
        what it wrote), so the tree still matches its LDE.  Returns the (new) root."""
        if self.inject and self.faults.fires("corrupt", site, table, 0, self.proof_id):
            self._corrupt(lde_h, site, table, axis=1)
            root = self.engine.recommit(lde_h.device(), nodes_h.device())
            self.timeline.instant("inject:corrupt", table, site=site, buffer=lde_h.stage)
        return root

    def _dev_commit_columns(self, table: str, stage: str, evals_T_h: ResidentHandle,
                            shape: TableShape, site: str) -> DevCommitted:
        coeffs_d, lde_d, nodes_d, root = self.engine.lde_commit(self.mem, evals_T_h.device(), shape,
                                                                 tag=f"{table}/{stage}")
        # LDEs and trees carry no tag: a post-mortem checks each LDE against its tree's
        # leaves and each tree against itself (see integrity)
        lde_h = self._handle(table, f"{stage}_lde", lde_d, seal=False)
        coeffs_h = self._handle(table, f"{stage}_coeffs", coeffs_d)
        nodes_h = self._handle(table, f"{stage}_tree", nodes_d, seal=False)
        root = self._inject_commit(site, table, lde_h, nodes_h, root)
        log_N = shape.log_lde

        def rows_of(idx, on_device, lde_h=lde_h, log_N=log_N):
            nat = _bitrev_idx(idx, log_N)
            if on_device and lde_h.on_device:
                return self.engine.gather_columns(lde_h.device(), nat)
            return np.ascontiguousarray(lde_h.host()[:, nat].T)
        return DevCommitted(table, lde_h, coeffs_h,
                            DevTree(nodes_h, log_N, rows_of, root, rows_h=lde_h))

    def main_commit(self, main: np.ndarray, shape: TableShape):
        t = shape.name

        def dev():
            # no tag: a post-mortem compares the resident trace with the prover's input
            trace_h = self._put(t, "trace", np.ascontiguousarray(main.T), seal=False)
            self.table(t).host_inputs["trace"] = main
            self._inject_input("r1.main", t, trace_h, axis=1)
            com = self._dev_commit_columns(t, "main", trace_h, shape, "r1.main")
            self.table(t).outputs["main"] = com
            self.table(t).outputs["trace"] = trace_h
            return com
        return self._run("r1.main", t, dev, lambda: HostStages.main_commit(self, main, shape))

    def prep_lde(self, air, shape: TableShape):
        # The preprocessed columns are part of the statement; their LDE is computed once
        # on the host and uploaded with the main trace's stage (site r1.main).
        return HostStages.prep_lde(self, air, shape)

    def aux_build(self, air, shape, main, public_values, challenges):
        t = shape.name
        trace_h = self.table(t).outputs.get("trace")

        def dev():
            self._inject_input("r1.aux", t, trace_h, axis=1)
            on_dev = trace_h is not None and trace_h.on_device
            src = self.engine.download_view(trace_h.device()).T if on_dev and \
                isinstance(self.engine, EmuEngine) and not isinstance(self.engine, CudaEngine) \
                else main
            aux, terminal = self.engine.aux_build(self, air, shape, np.ascontiguousarray(src),
                                                  public_values, challenges,
                                                  trace_dev=trace_h.device() if on_dev else None)
            if isinstance(aux, DeviceArray):     # built on the device: keep it there
                aux = _AuxDev(self._handle(t, "aux_trace", aux, seal=False))   # see aux_commit
            return aux, terminal
        inputs = [trace_h] if trace_h is not None else []
        return self._run("r1.aux", t, dev,
                         lambda: HostStages.aux_build(self, air, shape, main, public_values, challenges),
                         inputs)

    def aux_commit(self, aux: np.ndarray, shape: TableShape):
        t = shape.name

        def dev():
            aux_h = aux.h if isinstance(aux, _AuxDev) else \
                self._put(t, "aux_trace", np.ascontiguousarray(aux.T), seal=False)
            com = self._dev_commit_columns(t, "aux", aux_h, shape, "r1.aux")
            self.table(t).outputs["aux"] = com
            # nothing reads the aux trace after its commit (R2..R4 read its LDE and
            # coefficients, an XCHECK rerun rebuilds it): give its memory back now
            aux_h.release()
            return com

        def host():
            rows = np.ascontiguousarray(aux.h.host().T) if isinstance(aux, _AuxDev) else aux
            return HostStages.aux_commit(self, rows, shape)
        return self._run("r1.aux", t, dev, host, [aux.h] if isinstance(aux, _AuxDev) else [])

    # ------------------------------------------------------------------ R2
    def quotient(self, air, shape, main, prep_lde, aux, public_values, challenges, alpha, terminal,
                 chunk: int = 1 << 14):
        t = shape.name
        inputs = [h for c in (main, aux) if isinstance(c, DevCommitted) for h in (c.lde_h,)]

        def dev():
            if not all(isinstance(c, DevCommitted) for c in (main, aux) if c is not None):
                from steadfast.kernels.backend import DeviceOOM
                raise DeviceOOM(0, 0, None, "an input of r2 is host-only")
            for c in (main, aux):
                if c is not None:
                    self._inject_input("r2", t, c.lde_h, axis=1)
            lock_wait0 = time.perf_counter()
            if self.serialize_r2:
                R2_LOCK.acquire()
            try:
                got = time.perf_counter()
                if self.serialize_r2:
                    self.timeline.complete("wait:r2_lock", lock_wait0, got, t, cat="lock")
                win = self.r2_windows.open(t)
                try:
                    q_d, blocks_d = self.engine.quotient_decompose(
                        self, air, shape, main, prep_lde, aux, public_values, challenges, alpha,
                        terminal)
                finally:
                    self.r2_windows.close(win)
            finally:
                if self.serialize_r2:
                    R2_LOCK.release()
            q_h = self._handle(t, "quotient", q_d, seal=False)
            blocks_h = self._handle(t, "parts_coeffs", blocks_d, seal=False)
            if self.inject and self.faults.fires("race", "r2", t, 0, self.proof_id) and \
                    self.r2_windows.overlapped(win):
                self._corrupt(q_h, "r2", t, axis=1)
                self._corrupt(blocks_h, "r2", t, axis=1)
                self.timeline.instant("inject:race", t, site="r2")
            if self.inject and self.faults.fires("corrupt", "r2", t, 0, self.proof_id):
                self._corrupt(blocks_h, "r2", t, axis=1)
            self._inject_output("r2", t, q_h, axis=1)
            self._seal(blocks_h)
            st = self.table(t)
            st.outputs["quotient"] = q_h
            st.outputs["parts_coeffs"] = blocks_h
            return _Quotient(q_h, blocks_h)

        def host():
            return HostStages.quotient(self, air, shape, main, prep_lde, aux, public_values,
                                       challenges, alpha, terminal, chunk)
        return self._run("r2", t, dev, host, inputs)

    def parts_commit(self, q, shape: TableShape):
        t = shape.name
        inputs = [q.values, q.blocks] if isinstance(q, _Quotient) else []

        def dev():
            if not isinstance(q, _Quotient):
                from steadfast.kernels.backend import DeviceOOM
                raise DeviceOOM(0, 0, None, "the quotient is host-only")
            self._inject_input("r2.tree", t, q.blocks, axis=1)
            n, N = shape.n, 1 << shape.log_lde
            lde_d, nodes_d, root = self.engine.parts_lde_commit(self.mem, q.blocks.device(), shape,
                                                                tag=f"{t}/parts")
            lde_h = self._handle(t, "parts_lde", lde_d, seal=False)
            nodes_h = self._handle(t, "parts_tree", nodes_d, seal=False)
            root = self._inject_commit("r2.tree", t, lde_h, nodes_h, root)

            def rows_of(idx, on_device, lde_h=lde_h, log_N=shape.log_lde):
                nat = _bitrev_idx(idx, log_N)
                if on_device and lde_h.on_device:
                    return self.engine.gather_columns(lde_h.device(), nat)
                return np.ascontiguousarray(lde_h.host()[:, nat].T)
            del n, N
            com = DevCommitted(t, lde_h, q.blocks,
                               DevTree(nodes_h, shape.log_lde, rows_of, root, rows_h=lde_h))
            self.table(t).outputs["parts"] = com
            return com

        def host():
            values = q.values.host() if isinstance(q, _Quotient) else q
            return HostStages.parts_commit(self, values, shape)
        return self._run("r2.tree", t, dev, host, inputs)

    # ------------------------------------------------------------------ R3
    def ood(self, committed, point):
        t = self._table_of(committed)
        if not isinstance(committed, DevCommitted):
            return self._run("r3", t, self._declined("the opened matrix is host-only"),
                             lambda: HostStages.ood(self, committed, point))

        def dev():
            self._inject_input("r3", t, committed.coeffs_h, axis=1)
            vals = self.engine.ood(committed.coeffs_h.device(), point)
            if self.inject and self.faults.fires("corrupt", "r3", t, 0, self.proof_id):
                vals = vals.copy()
                vals[0, 0] = (int(vals[0, 0]) + 1) % P
                self.timeline.instant("inject:corrupt", t, site="r3", buffer="ood")
            return vals
        return self._run("r3", t, dev, lambda: HostStages.ood(self, committed, point),
                         [committed.coeffs_h])

    # ------------------------------------------------------------------ R4
    def deep_quotient(self, shape, groups, z, lam):
        t = shape.name
        inputs = [c.lde_h for c, _, _ in groups if isinstance(c, DevCommitted)]

        def dev():
            if len(inputs) != len(groups):
                from steadfast.kernels.backend import DeviceOOM
                raise DeviceOOM(0, 0, None, "an opened matrix is host-only")
            self._inject_input("r4.deep", t, inputs[-1], axis=1)     # the parts LDE
            vals_d = self.engine.deep_quotient(self, shape, groups, z, lam)
            h = self._handle(t, "dq", vals_d, seal=False)
            self._inject_output("r4.deep", t, h, axis=0)
            return _Layer(h, shape.log_lde)
        return self._run("r4.deep", t, dev,
                         lambda: HostStages.deep_quotient(self, shape, groups, z, lam), inputs)

    # ------------------------------------------------------------------ the join (v3)
    # One FRI for all tables (docs/protocol.md §5), on the main thread after every
    # table's chain.  Its buffers (combined inputs F_h, FRI layers and their trees) belong
    # to the pseudo-table JOIN; a downgrade of the join moves the rest of the FRI to the
    # host.  Table trees and DQs stay resident (or spilled to the host) until then.
    def fri_input(self, dqs, mu):
        t = JOIN
        inputs = [d.h for d in dqs if isinstance(d, _Layer)]
        n = dqs[0].h.shape[0] if isinstance(dqs[0], _Layer) else np.shape(dqs[0])[0]
        log_h = int(n).bit_length() - 1

        def dev():
            devs = []
            for j, d in enumerate(dqs):
                if isinstance(d, _Layer):
                    devs.append(d.h.device())          # uploads a spilled DQ again
                else:                                  # a downgraded table's DQ
                    devs.append(self._put(t, f"dq_upload_{log_h}_{j}", np.asarray(d),
                                          seal=False).device())
            out = self.engine.fri_input(self, devs, mu, tag=f"{t}/F_{log_h}")
            h = self._handle(t, f"F_{log_h}", out, seal=False)
            self._inject_output("r4.fri", t, h, axis=0)
            for d in dqs:                      # nothing reads a DQ after its combination
                if isinstance(d, _Layer):
                    d.h.release()
            for hh in self.table(t).handles:
                if hh.stage.startswith(f"dq_upload_{log_h}_"):
                    hh.release()
            return _Layer(h, log_h)

        def host():
            return HostStages.fri_input(self, [_host_of(d) for d in dqs], mu)
        return self._run("r4.fri", t, dev, host, inputs)

    def fri_commit_layer(self, values, log_arity: int):
        t = JOIN
        if not isinstance(values, _Layer):
            return self._run("r4.fri", t, self._declined("the layer is host-only"),
                             lambda: HostStages.fri_commit_layer(self, values, log_arity))
        width = 4 << log_arity

        def dev():
            self._inject_input("r4.fri", t, values.h, axis=0)
            nodes_d, root = self.engine.commit_rows(self.mem, values.h.device(), width,
                                                    tag=f"{t}/fri_{values.log_h}")
            nodes_h = self._handle(t, f"fri_{values.log_h}_tree", nodes_d, seal=False)
            n_leaves = values.h.shape[0] >> log_arity

            def rows_of(idx, on_device, vh=values.h, width=width):
                if on_device and vh.on_device:
                    return self.engine.gather_rows(vh.device(), idx, width)
                return np.ascontiguousarray(vh.host().reshape(-1, width)[idx])
            return DevTree(nodes_h, n_leaves.bit_length() - 1, rows_of, root, rows_h=values.h)

        def host():
            return HostStages.fri_commit_layer(self, values.h.host(), log_arity)
        return self._run("r4.fri", t, dev, host, [values.h])

    def fri_fold(self, values, beta, log_arity: int, log_height: int, rollin=None):
        t = JOIN
        if not isinstance(values, _Layer):
            return self._run("r4.fri", t, self._declined("the layer is host-only"),
                             lambda: HostStages.fri_fold(self, values, beta, log_arity, log_height,
                                                         _host_of(rollin)))
        inputs = [values.h] + ([rollin.h] if isinstance(rollin, _Layer) else [])
        nxt = log_height - log_arity

        def dev():
            if rollin is None or isinstance(rollin, _Layer):
                roll_d = None if rollin is None else rollin.h.device()
            else:
                roll_d = self._put(t, f"roll_upload_{nxt}", np.asarray(rollin), seal=False).device()
            out_d = self.engine.fold_layer(self, values.h.device(), beta, log_arity, log_height,
                                           roll_d, tag=f"{t}/fri_{nxt}")
            h = self._handle(t, f"fri_{nxt}", out_d, seal=False)
            self._inject_output("r4.fri", t, h, axis=0)
            if isinstance(rollin, _Layer):
                rollin.h.release()             # rolled in: F_h is not read again
            return _Layer(h, nxt)

        def host():
            return HostStages.fri_fold(self, values.h.host(), beta, log_arity, log_height,
                                       _host_of(rollin))
        return self._run("r4.fri", t, dev, host, inputs)

    def fri_final(self, values, log_height: int, length: int):
        """The final polynomial (on the host: 2^h_final values).  Its degree check failing
        here means a wrong device result upstream (the statement was checked before
        proving): :class:`DeviceResultError`, never a wrong proof."""
        if isinstance(values, _Layer):
            arr = values.h.host() if not values.h.on_device else \
                self.engine.download_view(values.h.device())
            values = np.array(arr)
        try:
            return HostStages.fri_final(self, values, log_height, length)
        except RuntimeError as exc:
            raise DeviceResultError(f"the join's {exc}; on backend {self.name} this is a "
                                    "device fault (the statement was checked before proving)",
                                    "final polynomial") from exc

    def cap(self, tree, log_cap: int) -> np.ndarray:
        """The tree's cap: a host copy of level h - c (no device allocation; a spilled or
        downgraded tree reads its host copy)."""
        if not isinstance(tree, DevTree):
            return HostStages.cap(self, tree, log_cap)
        c = mp.cap_height(tree.log_n, log_cap)
        off = int(level_offsets(tree.log_n)[tree.log_n - c])
        if tree.nodes.on_device:
            with self.submission_lock():
                return self.engine.slice_rows(tree.nodes.device(), off, off + (1 << c))
        return np.array(tree.nodes.host()[off:off + (1 << c)], dtype=np.uint32)

    def open_batch(self, tree, indices, log_cap: int):
        idx = np.asarray(indices, dtype=np.int64)
        if not isinstance(tree, DevTree):
            # a host tree (a table downgraded before its commit, or the FRI after the
            # join's downgrade): host memory only, nothing to decline -- and no recovery
            # event charged to whichever table the calling thread is bound to (the join),
            # except under FORCE_DOWNGRADE, where every site takes the recovery path
            if self.force_downgrade:
                return self._run("r4.open", self.bound_table() or JOIN,
                                 self._declined("the tree is host-only"),
                                 lambda: HostStages.open_batch(self, tree, idx, log_cap))
            return HostStages.open_batch(self, tree, idx, log_cap)
        if idx.ndim != 1 or idx.size == 0 or (idx.size > 1 and not (np.diff(idx) > 0).all()):
            raise ValueError("open_batch: indices must be a non-empty sorted distinct 1-d array")
        if idx[0] < 0 or idx[-1] >= (1 << tree.log_n):
            raise ValueError(f"open_batch: index out of range [0, 2^{tree.log_n})")
        t = tree.table
        levels, pos = mp.multiproof_plan(idx, tree.log_n, log_cap)
        node_rows = level_offsets(tree.log_n)[levels] + pos

        def dev():
            self._inject_input("r4.open", t, tree.nodes, axis=0)
            rows = tree._rows_of(idx, True)
            nodes = self.engine.gather_rows(tree.nodes.device(), node_rows) if tree.nodes.on_device \
                else np.asarray(tree.nodes.host())[node_rows]
            if self.inject and self.faults.fires("corrupt", "r4.open", t, 0, self.proof_id) \
                    and rows.size:
                rows = np.array(rows)
                rows[0, 0] = (int(rows[0, 0]) + 1) % P
                self.timeline.instant("inject:corrupt", t, site="r4.open", buffer="openings")
            return np.ascontiguousarray(rows, np.uint32), np.ascontiguousarray(nodes, np.uint32)

        def host():
            # host copies only (the recovery materialised the missing sides): a device
            # gather here would be a device allocation outside any recovery site
            rows = tree._rows_of(idx, False)
            nodes = np.asarray(tree.nodes.host())[node_rows]
            return np.ascontiguousarray(rows, np.uint32), np.ascontiguousarray(nodes, np.uint32)
        return self._run("r4.open", t, dev, host, tree.handles())

    # ------------------------------------------------------------------ lifecycle
    def release_table(self, table: str) -> None:
        """Give back every device buffer of a finished table."""
        st = self.table(table)
        for h in st.handles:
            h.drop_device()

    def spill_table(self, table: str) -> int:
        """Move a table's resident buffers to the host (to admit another table); returns bytes."""
        st = self.table(table)
        moved = 0
        for h in st.handles:
            if h.on_device:
                if not h.on_host:
                    h.host()
                moved += h.nbytes
                h.drop_device()
        return moved

    def device_bytes(self, table: str) -> int:
        return sum(h.nbytes for h in self.table(table).handles if h.on_device)


@dataclass(frozen=True)
class _Quotient:
    """R2's resident outputs: Q on the quotient domain and its decomposition into parts."""
    values: ResidentHandle      # uint32[4, M]
    blocks: ResidentHandle      # uint32[4 * num_parts, n]


@dataclass(frozen=True)
class _AuxDev:
    """The LogUp aux columns (uint32[4a, n]) built on the device."""
    h: ResidentHandle


class _NullLock:
    """A lock that never blocks (backends whose runtime needs no submission lock)."""

    def acquire(self):
        return True

    def release(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_NULL_LOCK = _NullLock()


@dataclass(frozen=True)
class _Layer:
    """A DEEP quotient, combined FRI input or FRI layer (uint32[2^log_h, 4], bit-reversed
    on g<w_{2^log_h}>) held by a resident handle."""
    h: ResidentHandle
    log_h: int


def _host_of(v):
    """A layer argument on the host (None stays None)."""
    if v is None:
        return None
    return v.h.host() if isinstance(v, _Layer) else np.asarray(v)


class DeviceResultError(SteadfastError, RuntimeError):
    """A device result failed one of the prover's own checks before the proof was
    finished (``check``: e.g. the final polynomial's degree): the proof is not emitted.
    With XCHECK on the pipeline turns it into an :class:`prover.xcheck.XcheckFailure`
    with a post-mortem."""

    def __init__(self, message: str, check: str):
        super().__init__(message)
        self.check = check


#: the pseudo-table that owns the join's buffers (F_h, FRI layers and trees) and names
#: the join in recovery counters, fault rules and timelines
JOIN = "<join>"


def _bitrev_idx(idx: np.ndarray, bits: int) -> np.ndarray:
    idx = np.asarray(idx, dtype=np.int64)
    out = np.zeros_like(idx)
    for b in range(bits):
        out |= ((idx >> b) & 1) << (bits - 1 - b)
    return out


__all__ = ["DeviceStages", "DevCommitted", "DevTree", "R2_LOCK", "R2Windows", "JOIN",
           "DeviceResultError",
           "Committed", "bit_reverse_permutation"]
