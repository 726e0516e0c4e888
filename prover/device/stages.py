"""The prover's stages on a device backend, with resident handles and recovery.

:class:`DeviceStages` has the same methods as :class:`prover.core.stages.HostStages` (the round
driver cannot tell them apart) and runs each stage's work on the device:

* every buffer a stage produces (trace upload, main/aux/parts LDE and coefficients, tree
  nodes, quotient values and their decomposition, FRI layers) is held by a
  :class:`~prover.device.residency.ResidentHandle`; committed matrices are returned as
  :class:`DevCommitted`, whose ``lde``/``coeffs`` properties materialise on the host only
  when a host stage asks for them;
* each stage runs through :meth:`prover.device.recovery.Recovery.run` at its recovery site
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
transfers); on ``sim``/``cuda`` the numba.cuda kernels (see :mod:`prover.device.engines`).
The output bytes are identical in every case: the engines are bit-identical to the host.

Each stage reads as its steps: its device inputs (the handles' device sides), the
engine's work in a step method of its own (``_dev_commit_columns``, ``_build_aux``,
``_quotient_window``, ``_commit_parts``, ``_ood_values``, ``_deep_values``; the join's in
:mod:`prover.device.join`), then its outputs held by new handles and sealed.  No step
calls a fault hook: under a fault plan (``PROVER_FAULTS``) the pipeline makes a
:class:`prover.device.faulting.FaultingStages` instead, which wraps those same steps.

This module holds the per-table stages (R1 to the DEEP quotient) and the plumbing every
stage runs on; the join's stages are :class:`prover.device.join.DeviceJoinStages` (mixed
in), which tables the device accepts is :mod:`prover.device.gate`, the locks and R2
windows :mod:`prover.device.locks`, the post-mortem integrity checks :mod:`prover.device.integrity`,
fault injection :mod:`prover.device.faulting`.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from ...kernels.backend import DeviceArray, DeviceMemory, DeviceOOM
from ...kernels.ntt_host import bit_reverse_indices, bit_reverse_permutation
from ...verifier.protocol import TableShape

from .gate import DISPATCH_CHECKS, MAX_DEVICE_LOG_LDE, declined_sites, device_gate, dispatch_ok
from .join import JOIN, DeviceJoinStages, DeviceResultError, Layer
from .join import host_of as _host_of  # noqa: F401  (prover/cluster/__init__.py imports it from here)
from .locks import NULL_LOCK, R2_LOCK, SIM_SUBMIT_LOCK, R2Window, R2Windows
from .engines import CudaEngine, EmuEngine
from .integrity import changed_handles, checksum_anyway
from .recovery import Recovery, RecoveryCounters
from .residency import DevCommitted, DevTree, ResidentHandle, TableState
from ..core.stages import Committed, HostStages
from ..common.timeline import Timeline


class DeviceStages(DeviceJoinStages, HostStages):
    """Every stage on the device (see module docstring)."""

    def __init__(self, mem: DeviceMemory, engine, *,
                 counters: RecoveryCounters | None = None, timeline: Timeline | None = None,
                 serialize_r2: bool = True, force_downgrade: bool = False,
                 xcheck: bool = False, proof_id: int = 0, device_only: bool = True):
        super().__init__()
        self.mem = mem
        self.engine = engine
        self.name = mem.kind
        self.counters = counters or RecoveryCounters()
        self.timeline = timeline or Timeline(enabled=False)
        self.serialize_r2 = serialize_r2
        self.force_downgrade = force_downgrade
        self.xcheck = xcheck
        engine.tag_writes = bool(xcheck)     # emu: tags computed in the writes' copy
        self.device_only = device_only
        self.proof_id = proof_id
        self.recovery = Recovery(mem, counters=self.counters, timeline=self.timeline,
                                 force_downgrade=force_downgrade, proof=proof_id)
        self.r2_windows = R2Windows()
        self._tables: dict[str, TableState] = {}
        self._tlock = threading.Lock()
        self._local = threading.local()     # the table this worker thread is proving
        self.xcheck_s = 0.0                 # integrity tagging/checking time (XCHECK on)
        self.shapes: dict = {}               # table -> TableShape (for the dispatch checks)
        self.gate: dict = {}                 # table -> device-only admitted
        self._site_declines: dict = {}       # table -> (shape, the sites it is declined at)

    # fault injection (prover.device.faulting.FaultingStages) is off while a post-mortem
    # reruns a device chain -- on the thread running that post-mortem only: the other
    # tables' workers keep their faults, and two overlapping post-mortems cannot turn it
    # back on under each other
    @property
    def inject(self) -> bool:
        return not getattr(self._local, "no_inject", 0)

    @contextmanager
    def no_injection(self):
        """No fault fires on the calling thread inside (an XCHECK post-mortem's rerun)."""
        self._local.no_inject = getattr(self._local, "no_inject", 0) + 1
        try:
            yield
        finally:
            self._local.no_inject -= 1

    def bind(self, table: str) -> None:
        """Tell the stages which table the calling worker thread is proving (used by
        stages whose arguments do not name it: OOD, FRI layers, openings); its device
        state starts here."""
        self._local.table = table
        self.table(table)

    def bound_table(self) -> str | None:
        """The table the calling worker thread is proving (None outside a worker)."""
        return getattr(self._local, "table", None)

    def _table_of(self, obj) -> str:
        return getattr(obj, "table", None) or getattr(self._local, "table", "?")

    @staticmethod
    def _declined(why: str):
        def dev():
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
        """Handles whose device copy was changed after its stage produced it (a
        post-mortem's check: :func:`prover.device.integrity.changed_handles`)."""
        t0 = time.perf_counter()
        with self.submission_lock():        # checksum kernels are launches too (sim)
            bad = changed_handles(self.table(table), self.engine)
        self._xcheck_time(time.perf_counter() - t0)
        return bad

    def _checksum_anyway(self, h: ResidentHandle) -> tuple:
        """A post-mortem's integrity tag of a resident buffer (:func:`prover.device.integrity.
        checksum_anyway`: on a downloaded copy when the device has no room)."""
        return checksum_anyway(self.engine, h)

    def _xcheck_time(self, dt: float) -> None:
        """XCHECK's own work outside cross_check/check_proof (integrity tags), for the stats."""
        with self._tlock:
            self.xcheck_s += dt


    def _put(self, table: str, stage: str, host: np.ndarray, seal: bool = True):
        """Upload a host array into a fresh device buffer (the budget is checked first)."""
        dev = self.mem.to_device(np.ascontiguousarray(host), tag=f"{table}/{stage}")
        self.table(table).transfers.add(h2d_bytes=host.nbytes)
        device_only = self.device_only and self.gate.get(table, True)
        return self._handle(table, stage, dev, None if device_only else host, seal=seal)

    def submission_lock(self):
        """The lock kernel submission needs on this backend (see SIM_SUBMIT_LOCK)."""
        return SIM_SUBMIT_LOCK if self.mem.kind == "sim" else NULL_LOCK

    def _declines(self, table: str) -> frozenset:
        """The sites whose device kernels do not accept the table's shape (found once per
        table and shape: :func:`prover.device.gate.declined_sites`)."""
        shape = self.shapes.get(table)
        got = self._site_declines.get(table)
        if got is None or got[0] is not shape:
            got = self._site_declines[table] = (shape, frozenset() if shape is None
                                           else declined_sites(shape))
        return got[1]

    def _run(self, site: str, table: str, device_fn, host_fn, inputs=()):
        declined = site in self._declines(table)

        def locked():
            if declined:
                raise DeviceOOM(0, 0, None, f"the {site} device kernels do not accept this table")
            with self.submission_lock(), self._attempt(table):
                return device_fn()
        with self.timeline.span(site, table, cat="stage"):
            return self._run_site(site, table, locked, host_fn, inputs)

    def _attempt(self, table: str):
        """One device attempt of a stage: a failed one leaves the table's device bytes
        as it found them (:meth:`prover.device.residency.TableState.attempt`)."""
        return self.table(table).attempt()

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

    # ------------------------------------------------------------------ R1
    def _dev_commit_columns(self, table: str, stage: str, evals_T_h: ResidentHandle,
                        shape: TableShape) -> tuple:
        """Step: the LDE and Merkle commit of a column matrix (uint32[c, n]) on the device
        -> (lde, coeffs, tree) handles and the root.  LDEs and trees carry no tag: a
        post-mortem checks each LDE against its tree's leaves and each tree against itself
        (see integrity)."""
        coeffs_d, lde_d, nodes_d, root = self.engine.lde_commit(self.mem, evals_T_h.device(), shape,
                                                                 tag=f"{table}/{stage}")
        lde_h = self._handle(table, f"{stage}_lde", lde_d, seal=False)
        coeffs_h = self._handle(table, f"{stage}_coeffs", coeffs_d)
        nodes_h = self._handle(table, f"{stage}_tree", nodes_d, seal=False)
        return lde_h, coeffs_h, nodes_h, root

    def _lde_tree(self, nodes_h: ResidentHandle, lde_h: ResidentHandle, shape: TableShape,
                  root: np.ndarray) -> DevTree:
        """The committed tree of an LDE (natural columns (c, N); leaf j is the row at
        position bitrev(j)): its opened rows are gathered from the LDE."""
        log_N = shape.log_lde

        def rows_of(idx, on_device):
            nat = bit_reverse_indices(idx, log_N)
            if on_device and lde_h.on_device:
                return self.engine.gather_columns(lde_h.device(), nat)
            return np.ascontiguousarray(lde_h.host()[:, nat].T)
        return DevTree(nodes_h, log_N, rows_of, root, rows_h=lde_h)

    def _upload_trace(self, table: str, main: np.ndarray) -> ResidentHandle:
        """Step: the main trace on the device (columns: uint32[w, n]).  No tag: a
        post-mortem compares the resident trace with the prover's input."""
        trace_h = self._put(table, "trace", np.ascontiguousarray(main.T), seal=False)
        self.table(table).host_inputs["trace"] = main
        return trace_h

    def main_commit(self, main: np.ndarray, shape: TableShape):
        t = shape.name

        def dev():
            trace_h = self._upload_trace(t, main)
            lde_h, coeffs_h, nodes_h, root = self._dev_commit_columns(t, "main", trace_h, shape)
            com = DevCommitted(t, lde_h, coeffs_h, self._lde_tree(nodes_h, lde_h, shape, root))
            self.table(t).outputs.update(main=com, trace=trace_h)
            return com
        return self._run("r1.main", t, dev, lambda: HostStages.main_commit(self, main, shape))

    def prep_lde(self, air, shape: TableShape):
        # The preprocessed columns are part of the statement; their LDE is computed once
        # on the host and uploaded with the main trace's stage (site r1.main).
        return HostStages.prep_lde(self, air, shape)

    def _build_aux(self, table: str, air, shape, main, public_values, challenges,
                   trace_h: ResidentHandle | None):
        """Step: the LogUp aux columns, from the resident trace where it is resident ->
        (aux: host rows or :class:`_AuxDev`, terminal)."""
        on_dev = trace_h is not None and trace_h.on_device
        src = self.engine.download_view(trace_h.device()).T if on_dev and \
            isinstance(self.engine, EmuEngine) and not isinstance(self.engine, CudaEngine) \
            else main
        aux, terminal = self.engine.aux_build(self, air, shape, np.ascontiguousarray(src),
                                              public_values, challenges,
                                              trace_dev=trace_h.device() if on_dev else None)
        if isinstance(aux, DeviceArray):     # built on the device: keep it there
            aux = _AuxDev(self._handle(table, "aux_trace", aux, seal=False))   # see aux_commit
        return aux, terminal

    def aux_build(self, air, shape, main, public_values, challenges):
        t = shape.name
        trace_h = self.table(t).outputs.get("trace")

        def dev():
            return self._build_aux(t, air, shape, main, public_values, challenges, trace_h)
        inputs = [trace_h] if trace_h is not None else []
        return self._run("r1.aux", t, dev,
                         lambda: HostStages.aux_build(self, air, shape, main, public_values, challenges),
                         inputs)

    def aux_commit(self, aux: np.ndarray, shape: TableShape):
        t = shape.name

        def dev():
            aux_h = aux.h if isinstance(aux, _AuxDev) else \
                self._put(t, "aux_trace", np.ascontiguousarray(aux.T), seal=False)
            lde_h, coeffs_h, nodes_h, root = self._dev_commit_columns(t, "aux", aux_h, shape)
            com = DevCommitted(t, lde_h, coeffs_h, self._lde_tree(nodes_h, lde_h, shape, root))
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
    def _quotient_window(self, table: str, air, shape, main, prep_lde, aux, public_values,
                         challenges, alpha, terminal) -> tuple:
        """Step: constraint evaluation and decomposition in the device R2 window (under
        the R2 lock unless serialisation is off) -> (quotient, parts' coefficients)
        handles and the window."""
        lock_wait0 = time.perf_counter()
        if self.serialize_r2:
            R2_LOCK.acquire()
        try:
            got = time.perf_counter()
            if self.serialize_r2:
                self.timeline.complete("wait:r2_lock", lock_wait0, got, table, cat="lock")
            win = self.r2_windows.open(table)
            try:
                q_d, blocks_d = self.engine.quotient_decompose(
                    self, air, shape, main, prep_lde, aux, public_values, challenges, alpha,
                    terminal)
            finally:
                self.r2_windows.close(win)
        finally:
            if self.serialize_r2:
                R2_LOCK.release()
        return (self._handle(table, "quotient", q_d, seal=False),
                self._handle(table, "parts_coeffs", blocks_d, seal=False), win)

    def quotient(self, air, shape, main, prep_lde, aux, public_values, challenges, alpha, terminal,
                 chunk: int = 1 << 14):
        t = shape.name
        inputs = [h for c in (main, aux) if isinstance(c, DevCommitted) for h in (c.lde_h,)]

        def dev():
            if not all(isinstance(c, DevCommitted) for c in (main, aux) if c is not None):
                raise DeviceOOM(0, 0, None, "an input of r2 is host-only")
            q_h, blocks_h, _ = self._quotient_window(t, air, shape, main, prep_lde, aux,
                                                     public_values, challenges, alpha, terminal)
            self._seal(q_h)
            self._seal(blocks_h)
            self.table(t).outputs.update(quotient=q_h, parts_coeffs=blocks_h)
            return _Quotient(q_h, blocks_h)

        def host():
            return HostStages.quotient(self, air, shape, main, prep_lde, aux, public_values,
                                       challenges, alpha, terminal, chunk)
        return self._run("r2", t, dev, host, inputs)

    def _commit_parts(self, table: str, blocks_h: ResidentHandle, shape: TableShape) -> tuple:
        """Step: the parts' LDE and Merkle commit on the device -> (lde, tree) handles and
        the root."""
        lde_d, nodes_d, root = self.engine.parts_lde_commit(self.mem, blocks_h.device(), shape,
                                                            tag=f"{table}/parts")
        return (self._handle(table, "parts_lde", lde_d, seal=False),
                self._handle(table, "parts_tree", nodes_d, seal=False), root)

    def parts_commit(self, q, shape: TableShape):
        t = shape.name
        inputs = [q.values, q.blocks] if isinstance(q, _Quotient) else []

        def dev():
            if not isinstance(q, _Quotient):
                raise DeviceOOM(0, 0, None, "the quotient is host-only")
            lde_h, nodes_h, root = self._commit_parts(t, q.blocks, shape)
            com = DevCommitted(t, lde_h, q.blocks, self._lde_tree(nodes_h, lde_h, shape, root))
            self.table(t).outputs["parts"] = com
            return com

        def host():
            values = q.values.host() if isinstance(q, _Quotient) else q
            return HostStages.parts_commit(self, values, shape)
        return self._run("r2.tree", t, dev, host, inputs)

    # ------------------------------------------------------------------ R3
    def _ood_values(self, table: str, coeffs_h: ResidentHandle, point) -> np.ndarray:
        """Step: a committed matrix's values at the OOD point, from its resident
        coefficients (host uint32[., 4])."""
        return self.engine.ood(coeffs_h.device(), point)

    def ood(self, committed, point):
        t = self._table_of(committed)
        if not isinstance(committed, DevCommitted):
            return self._run("r3", t, self._declined("the opened matrix is host-only"),
                             lambda: HostStages.ood(self, committed, point))
        return self._run("r3", t, lambda: self._ood_values(t, committed.coeffs_h, point),
                         lambda: HostStages.ood(self, committed, point), [committed.coeffs_h])

    # ------------------------------------------------------------------ R4
    def _deep_values(self, table: str, shape, groups, z, lam) -> ResidentHandle:
        """Step: the DEEP quotient DQ (uint32[N, 4]) on the device from the resident LDEs."""
        vals_d = self.engine.deep_quotient(self, shape, groups, z, lam)
        return self._handle(table, "dq", vals_d, seal=False)

    def deep_quotient(self, shape, groups, z, lam):
        t = shape.name
        inputs = [c.lde_h for c, _, _ in groups if isinstance(c, DevCommitted)]

        def dev():
            if len(inputs) != len(groups):
                raise DeviceOOM(0, 0, None, "an opened matrix is host-only")
            h = self._deep_values(t, shape, groups, z, lam)
            self._seal(h)
            return Layer(h, shape.log_lde)
        return self._run("r4.deep", t, dev,
                         lambda: HostStages.deep_quotient(self, shape, groups, z, lam), inputs)

    # ------------------------------------------------------------------ lifecycle
    def release_table(self, table: str) -> None:
        """Give back every device buffer of a finished table."""
        self.table(table).release_device()

    def spill_table(self, table: str) -> int:
        """Move a table's resident buffers to the host (to admit another table); returns bytes."""
        return self.table(table).spill()

    def device_bytes(self, table: str) -> int:
        return self.table(table).device_bytes()



@dataclass(frozen=True)
class _Quotient:
    """R2's resident outputs: Q on the quotient domain and its decomposition into parts."""
    values: ResidentHandle      # uint32[4, M]
    blocks: ResidentHandle      # uint32[4 * num_parts, n]


@dataclass(frozen=True)
class _AuxDev:
    """The LogUp aux columns (uint32[4a, n]) built on the device."""
    h: ResidentHandle



__all__ = ["DeviceStages", "DevCommitted", "DevTree", "R2_LOCK", "R2Windows", "JOIN",
           "DeviceResultError", "Committed", "bit_reverse_permutation",
           # re-exported from the modules they moved to (prover.device.gate,
           # prover.device.locks, prover.device.join)
           "DISPATCH_CHECKS", "MAX_DEVICE_LOG_LDE", "device_gate", "dispatch_ok",
           "SIM_SUBMIT_LOCK", "R2Window"]
