"""Compute engines behind :class:`prover.device.stages.DeviceStages`.

An engine does a stage's arithmetic on buffers that live in a :class:`DeviceMemory`:

* :class:`EmuEngine` (backend ``emu``): the host kernels run directly on the emulated
  device memory.  Outputs are allocated in that memory *before* the work starts, so a
  stage that does not fit is refused by the byte budget (``DeviceOOM``) exactly as on a
  GPU, and the recovery path runs at full CPU speed.
* :class:`CudaEngine` (backends ``sim`` and ``cuda``): the numba.cuda kernels
  (NTT/LDE, Merkle, and the stage kernels of :mod:`kernels.stage_device` where present),
  on numba device arrays (the simulator) or cupy arrays (a GPU).  A stage whose device
  kernel is not available on this engine computes on a host copy of the device inputs and
  writes its outputs back to device memory -- never silently: such stages are listed in
  :attr:`CudaEngine.host_assisted` and in the proof stats.

Every engine is bit-identical to :class:`prover.core.stages.HostStages` (tests compare the
proof bytes of all backends).
"""
from __future__ import annotations

import functools
import threading
from contextlib import contextmanager
from types import SimpleNamespace

import numpy as np

from ...kernels.backend import DeviceArray, DeviceMemory, shared_allocations
from ...kernels.ntt_host import bit_reverse_permutation, coset_intt, coset_ntt, intt, lde_columns
from ...kernels import merkle as kmerkle
from ...kernels.hostlib import copy_checksum, checksum_words
from ...verifier.protocol import SHIFT, TableShape

from ..core.stages import HostStages, _bitrev_rows


def _nodes_shape(n_leaves: int) -> tuple:
    return (2 * n_leaves - 1, 8)


_STATS_LOCK = threading.Lock()


class EmuEngine:
    """Host kernels on the emulated device memory (backend ``emu``)."""

    name = "emu"
    host_assisted: tuple = ()

    # -- memory views -------------------------------------------------------------
    def download_view(self, dev: DeviceArray) -> np.ndarray:
        """The device buffer's contents as a numpy array (a view on ``emu``)."""
        if dev.freed or dev.data is None:
            raise RuntimeError(f"read of a freed device buffer ({dev.tag})")
        return dev.data

    def checksum(self, dev: DeviceArray) -> tuple:
        """Integrity tag (sum mod 2^64, xor) of a device buffer's words, in place."""
        return checksum_words(self.download_view(dev))

    def recommit(self, lde_dev: DeviceArray, nodes_dev: DeviceArray) -> np.ndarray:
        """Rebuild a Merkle tree in place over an LDE buffer's (bit-reversed) rows; returns
        the root.  Only the fault injector uses it (``corrupt@`` at a commit site: a wrong
        LDE committed consistently), so one host implementation serves every backend."""
        tree = kmerkle.commit(_bitrev_rows(np.array(self.download_view(lde_dev))))
        self.upload_into(nodes_dev, tree.nodes)
        return np.asarray(tree.root, np.uint32)

    def stage_events(self):
        """CUDA event pair to time a stage (only :class:`CudaEngine` on ``cuda`` has one)."""
        return None

    #: compute each written buffer's integrity tag in the copy (set with XCHECK on)
    tag_writes = False
    #: bytes whose tag was computed that way (their cost is inside the stages' time)
    tagged_write_bytes = 0

    def upload_into(self, dev: DeviceArray, host: np.ndarray) -> None:
        if self.tag_writes and dev.tag_on_write and dev.data.dtype == np.uint32 \
                and np.dtype(host.dtype) == np.uint32 and dev.data.shape == np.shape(host):
            dev.fresh_tag = copy_checksum(dev.data, host)
            with _STATS_LOCK:
                self.tagged_write_bytes += dev.data.nbytes
        else:
            np.copyto(dev.data, host)
            dev.fresh_tag = None

    def production_tag(self, dev: DeviceArray) -> tuple:
        """The integrity tag of a buffer a stage just produced: the one its write computed
        (``emu``: one pass for copy and tag), else a fresh :meth:`checksum`."""
        tag, dev.fresh_tag = dev.fresh_tag, None
        return tag if tag is not None else self.checksum(dev)

    #: the stage outputs XCHECK seals with an integrity tag (prover.device.stages.DeviceStages._seal):
    #: coefficients, quotient, parts' coefficients, FRI layers.  LDEs and trees are not
    #: tagged (DeviceStages.integrity checks them otherwise), so their writes skip the tag.
    TAGGED_OUTPUTS = frozenset({"coeffs", "q", "blocks", "fri0", "fold"})

    def _alloc(self, mem: DeviceMemory, shapes: dict, tag: str) -> dict:
        """Allocate all of a stage's outputs up front (all-or-nothing)."""
        out = {}
        try:
            for k, shp in shapes.items():
                out[k] = mem.empty(shp, np.uint32, tag=f"{tag}/{k}")
                out[k].tag_on_write = k in self.TAGGED_OUTPUTS
        except BaseException:
            for a in out.values():
                mem.free(a)
            raise
        return out

    @staticmethod
    @contextmanager
    def _outputs(mem: DeviceMemory, bufs):
        """A call's outputs (a dict of buffers or one) go back to the pool if the call
        raises (a kernel's error, a temporary that does not fit): they are in no handle
        yet, so nothing else could free them before the epoch ends (issue #28.2)."""
        try:
            yield bufs
        except BaseException:
            for a in (bufs.values() if isinstance(bufs, dict) else (bufs,)):
                if not a.freed:
                    mem.free(a)
            raise

    # -- stages -------------------------------------------------------------------
    def lde_commit(self, mem, evals_T_dev, shape: TableShape, tag: str):
        w, n = evals_T_dev.shape
        N = 1 << shape.log_lde
        bufs = self._alloc(mem, {"coeffs": (w, n), "lde": (w, N), "tree": _nodes_shape(N)}, tag)
        with self._outputs(mem, bufs):
            evals_T = self.download_view(evals_T_dev)
            self.upload_into(bufs["coeffs"], intt(np.ascontiguousarray(evals_T)))
            lde = lde_columns(np.ascontiguousarray(evals_T), shape.log_blowup, SHIFT)
            self.upload_into(bufs["lde"], lde)
            tree = kmerkle.commit(_bitrev_rows(lde))
            self.upload_into(bufs["tree"], tree.nodes)
        return bufs["coeffs"], bufs["lde"], bufs["tree"], np.asarray(tree.root, np.uint32)

    def aux_build(self, stages, air, shape, main, public_values, challenges, trace_dev=None):
        return HostStages.aux_build(stages, air, shape, main, public_values, challenges)

    def _view(self, com):
        if com is None:
            return None
        return SimpleNamespace(lde=self.download_view(com.lde_h.device()))

    def quotient_decompose(self, stages, air, shape, main, prep_lde, aux, public_values,
                           challenges, alpha, terminal):
        M = 1 << shape.log_quotient
        bufs = self._alloc(stages.mem, {"q": (4, M), "blocks": (4 * shape.num_parts, shape.n)},
                           f"{shape.name}/r2")
        with self._outputs(stages.mem, bufs):
            q = HostStages.quotient(stages, air, shape, self._view(main), prep_lde,
                                    self._view(aux), public_values, challenges, alpha, terminal)
            self.upload_into(bufs["q"], q)
            self.upload_into(bufs["blocks"], decompose(q, shape))
        return bufs["q"], bufs["blocks"]

    def parts_lde_commit(self, mem, blocks_dev, shape: TableShape, tag: str):
        c = 4 * shape.num_parts
        N = 1 << shape.log_lde
        bufs = self._alloc(mem, {"lde": (c, N), "tree": _nodes_shape(N)}, tag)
        with self._outputs(mem, bufs):
            lde = parts_lde(self.download_view(blocks_dev), shape)
            self.upload_into(bufs["lde"], lde)
            tree = kmerkle.commit(_bitrev_rows(lde))
            self.upload_into(bufs["tree"], tree.nodes)
        return bufs["lde"], bufs["tree"], np.asarray(tree.root, np.uint32)

    def ood(self, coeffs_dev, point) -> np.ndarray:
        return HostStages.ood(None, SimpleNamespace(coeffs=self.download_view(coeffs_dev)), point)

    def deep_quotient(self, stages, shape, groups, z, lam):
        N = 1 << shape.log_lde
        out = self._alloc(stages.mem, {"fri0": (N, 4)}, f"{shape.name}/deep")["fri0"]
        with self._outputs(stages.mem, out):
            views = [(self._view(c), v, nx) for c, v, nx in groups]
            self.upload_into(out, HostStages.deep_quotient(stages, shape, views, z, lam))
        return out

    def commit_rows(self, mem, values_dev, width: int, tag: str):
        vals = self.download_view(values_dev)
        rows = np.ascontiguousarray(vals.reshape(-1, width))
        out = self._alloc(mem, {"tree": _nodes_shape(rows.shape[0])}, tag)["tree"]
        with self._outputs(mem, out):
            tree = kmerkle.commit(rows)
            self.upload_into(out, tree.nodes)
        return out, np.asarray(tree.root, np.uint32)

    def gather_columns(self, lde_dev, nat_idx) -> np.ndarray:
        return np.ascontiguousarray(self.download_view(lde_dev)[:, nat_idx].T)

    # -- the v3 join (one FRI for all tables) ----------------------------------------
    def fri_input(self, stages, dq_devs, mu, tag: str):
        """F = sum_j mu^j dq_j of device DEEP quotients uint32[N, 4] (one height)."""
        n = dq_devs[0].shape[0]
        out = self._alloc(stages.mem, {"fold": (n, 4)}, tag)["fold"]
        with self._outputs(stages.mem, out):
            self.upload_into(out, HostStages.fri_input(
                stages, [np.ascontiguousarray(self.download_view(d)) for d in dq_devs], mu))
        return out

    def fold_layer(self, stages, values_dev, beta, log_arity: int, log_height: int, roll_dev,
                   tag: str):
        """One layer's fold by 2^log_arity (+ beta^a roll-in) -> a new device buffer."""
        out = self._alloc(stages.mem, {"fold": (values_dev.shape[0] >> log_arity, 4)}, tag)["fold"]
        with self._outputs(stages.mem, out):
            roll = None if roll_dev is None else np.ascontiguousarray(self.download_view(roll_dev))
            self.upload_into(out, HostStages.fri_fold(
                stages, np.ascontiguousarray(self.download_view(values_dev)), beta, log_arity,
                log_height, roll))
        return out

    def gather_rows(self, dev, idx, width: int | None = None) -> np.ndarray:
        """Rows ``idx`` of a device uint32[n, w] (viewed as [-1, width] when given) on the
        host; multiproof nodes, opened FRI leaves."""
        v = self.download_view(dev)
        if width is not None:
            v = v.reshape(-1, width)
        return np.ascontiguousarray(v[np.asarray(idx, dtype=np.int64)])

    def slice_rows(self, dev, lo: int, hi: int) -> np.ndarray:
        """A host copy of rows lo..hi of a device array (a cap: no device allocation)."""
        return np.array(self.download_view(dev)[lo:hi])


def decompose(q_values: np.ndarray, shape: TableShape) -> np.ndarray:
    """Q on g<w_M> (uint32[4, M]) -> the parts' coefficient blocks uint32[4 P, n]
    (part i's EF coefficient c at row 4i + c), exactly as HostStages.parts_commit."""
    n, parts = shape.n, shape.num_parts
    coeffs = coset_intt(np.ascontiguousarray(q_values), SHIFT)
    return np.ascontiguousarray(np.concatenate([coeffs[:, i * n:(i + 1) * n] for i in range(parts)],
                                               axis=0))


def parts_lde(blocks: np.ndarray, shape: TableShape) -> np.ndarray:
    padded = np.zeros((blocks.shape[0], 1 << shape.log_lde), dtype=np.uint32)
    padded[:, :shape.n] = blocks
    return coset_ntt(padded, SHIFT)


class CudaEngine(EmuEngine):
    """numba.cuda kernels on device arrays (``sim``: the simulator, ``cuda``: a GPU).

    On the device: trace/aux/parts LDE (kernels.ntt_device), the committed row matrix
    (kernels.layout_device), Merkle commits of LDEs and FRI layers (kernels.merkle_device),
    opened rows and multiproof nodes gathered on the device.  ``host_assisted`` lists the stages that
    still compute on a host copy of their device inputs on this engine (their outputs go
    back to device memory; the stats report them).
    """

    host_assisted = ()

    def __init__(self, kind: str):
        from numba import cuda
        from ...kernels import (constraint_device, fri_device, layout_device, logup_device,
                                merkle_device, ntt_device, stage_device)
        self.name = kind
        self.kind = kind
        self._cuda = cuda
        self._ntt = ntt_device
        self._merkle = merkle_device
        self._layout = layout_device
        self._stage = stage_device
        self._constraint = constraint_device
        self._logup = logup_device
        self._fri = fri_device
        self._selectors: dict = {}
        self.mem: DeviceMemory | None = None     # set by make_stages (scratch booking)

    def _s(self):
        """The calling worker's stream (DeviceMemory.stream_scope), 0 outside one."""
        return self.mem.stream() if self.mem is not None else 0

    def _dev(self, host: np.ndarray):
        return self._cuda.to_device(np.ascontiguousarray(host), stream=self._s())

    def stage_events(self):
        """(start event, end event, stream) to time one stage on the device (``cuda``
        only; ``None`` elsewhere).  All of a table's kernels and cupy work go to its
        worker's stream, so the pair brackets everything the stage enqueued."""
        if self.kind != "cuda":
            return None
        cuda = self._cuda
        return cuda.event(timing=True), cuda.event(timing=True), (self._s() or cuda.default_stream())

    def aux_build(self, stages, air, shape, main, public_values, challenges, trace_dev=None):
        """LogUp aux on the device from the resident trace (uint32[w, n]); returns the aux
        columns uint32[4a, n] as a fresh device buffer and the terminal (host)."""
        uploaded = trace_dev is None
        if uploaded:
            trace_dev = stages.mem.to_device(np.ascontiguousarray(main.T), tag=f"{shape.name}/trace")
        try:
            out = self._alloc(stages.mem, {"aux": (shape.aux_width, shape.n)},
                              f"{shape.name}/aux")["aux"]
        except BaseException:
            if uploaded:
                stages.mem.free(trace_dev)
            raise
        def into_out(shp):
            # the kernels write the aux columns straight into the booked buffer: no
            # temporary, no device-to-device copy, and no cupy.asarray of a numba array
            # (which would make the host wait on the stream that array was made on)
            if tuple(shp) != tuple(out.shape):
                raise ValueError(f"aux_build: kernels asked for {tuple(shp)}, "
                                 f"booked {tuple(out.shape)}")
            return out.data
        try:
            _, terminal = self._logup.aux_build_device(
                air, shape, trace_dev.data, public_values, challenges, layout="cols", columns=True,
                stream=self._s(), alloc=into_out)
        except BaseException:
            stages.mem.free(out)
            raise
        finally:
            if uploaded:            # a trace uploaded here only for this build
                stages.mem.free(trace_dev)
        return out, np.asarray(terminal, np.uint32)

    def quotient_decompose(self, stages, air, shape, main, prep_lde, aux, public_values,
                           challenges, alpha, terminal):
        M = 1 << shape.log_quotient
        key = (shape.log_n, shape.log_quotient)
        s = self._s()
        if key not in self._selectors:
            # shared between the tables' streams: released only after a device-wide sync
            # (kernels.numba_emm.shared_allocations), never reissued under a reader
            with shared_allocations():
                sels = self._constraint.quotient_selectors_device(*key, stream=s)
            if s:
                s.synchronize()         # complete before another table's stream reads them
            self._selectors[key] = sels
        bufs = self._alloc(stages.mem, {"q": (4, M), "blocks": (4 * shape.num_parts, shape.n),
                                        "coeffs": (4, M)}, f"{shape.name}/r2")
        try:
            prep_d = None if prep_lde is None else self._dev(prep_lde)
            self._constraint.quotient_device(
                air, shape, main.lde_h.device().data, prep_d,
                None if aux is None else aux.lde_h.device().data, public_values, challenges,
                alpha, terminal, layout="cols", selectors=self._selectors[key], out=bufs["q"].data,
                stream=s)
            self._ntt.coset_intt_device(bufs["q"].data, SHIFT, out=bufs["coeffs"].data, stream=s)
            self._layout.split_parts_device(bufs["coeffs"].data, bufs["blocks"].data, shape.n,
                                            stream=s)
        except BaseException:
            stages.mem.free(bufs["q"])
            stages.mem.free(bufs["blocks"])
            raise
        finally:
            stages.mem.free(bufs["coeffs"])
        return bufs["q"], bufs["blocks"]

    def ood(self, coeffs_dev, point) -> np.ndarray:
        s = self._s()
        return self._stage.fetch(self._stage.ood_device(coeffs_dev.data,
                                                        np.asarray(point, np.uint32), stream=s), s)

    def deep_quotient(self, stages, shape, groups, z, lam):
        N = 1 << shape.log_lde
        out = self._alloc(stages.mem, {"fri0": (N, 4)}, f"{shape.name}/deep")["fri0"]
        try:
            dev_groups = [(c.lde_h.device().data, np.asarray(v, np.uint32), nx) for c, v, nx in groups]
            self._stage.deep_quotient_device(shape, dev_groups, z, lam, layout="cols", out=out.data,
                                             stream=self._s())
        except BaseException:
            stages.mem.free(out)
            raise
        return out

    def lde_commit(self, mem, evals_T_dev, shape: TableShape, tag: str):
        w, n = evals_T_dev.shape
        N = 1 << shape.log_lde
        bufs = self._alloc(mem, {"coeffs": (w, n), "lde": (w, N), "tree": _nodes_shape(N),
                                 "rows": (N, w)}, tag)
        with self._outputs(mem, bufs):
            try:
                src, s = evals_T_dev.data, self._s()
                self._ntt.intt_device(src, out=bufs["coeffs"].data, stream=s)
                self._ntt.coset_lde_device(src, shape.log_blowup, SHIFT, out=bufs["lde"].data,
                                           stream=s)
                self._layout.bitrev_rows_device(bufs["lde"].data, out=bufs["rows"].data, stream=s)
                tree = self._merkle.commit_device(bufs["rows"].data, out=bufs["tree"].data,
                                                  stream=s)
            finally:
                mem.free(bufs["rows"])           # openings gather from the LDE itself
        return bufs["coeffs"], bufs["lde"], bufs["tree"], np.asarray(tree.root, np.uint32)

    def parts_lde_commit(self, mem, blocks_dev, shape: TableShape, tag: str):
        c = 4 * shape.num_parts
        N = 1 << shape.log_lde
        bufs = self._alloc(mem, {"lde": (c, N), "tree": _nodes_shape(N), "rows": (N, c),
                                 "padded": (c, N)}, tag)
        with self._outputs(mem, bufs):
            try:
                s = self._s()
                self._layout.pad_columns_device(blocks_dev.data, bufs["padded"].data, stream=s)
                self._ntt.coset_ntt_device(bufs["padded"].data, SHIFT, out=bufs["lde"].data,
                                           stream=s)
                self._layout.bitrev_rows_device(bufs["lde"].data, out=bufs["rows"].data, stream=s)
                tree = self._merkle.commit_device(bufs["rows"].data, out=bufs["tree"].data,
                                                  stream=s)
            finally:
                mem.free(bufs["rows"])
                mem.free(bufs["padded"])
        return bufs["lde"], bufs["tree"], np.asarray(tree.root, np.uint32)

    def commit_rows(self, mem, values_dev, width: int, tag: str):
        rows_n = values_dev.shape[0] * values_dev.shape[1] // width
        out = self._alloc(mem, {"tree": _nodes_shape(rows_n)}, tag)["tree"]
        with self._outputs(mem, out):
            rows = values_dev.data.reshape(rows_n, width)
            tree = self._merkle.commit_device(rows, out=out.data, stream=self._s())
        return out, np.asarray(tree.root, np.uint32)

    def gather_columns(self, lde_dev, nat_idx) -> np.ndarray:
        return self._layout.gather_columns_device(lde_dev.data, nat_idx, stream=self._s())

    def fri_input(self, stages, dq_devs, mu, tag: str):
        n = dq_devs[0].shape[0]
        out = self._alloc(stages.mem, {"fold": (n, 4)}, tag)["fold"]
        try:
            self._fri.mu_combine_device([self._live(d) for d in dq_devs], mu, out=out.data,
                                        stream=self._s())
        except BaseException:
            stages.mem.free(out)
            raise
        return out

    def fold_layer(self, stages, values_dev, beta, log_arity: int, log_height: int, roll_dev,
                   tag: str):
        out = self._alloc(stages.mem, {"fold": (values_dev.shape[0] >> log_arity, 4)}, tag)["fold"]
        try:
            if values_dev.shape[0] != 1 << log_height:
                raise ValueError(f"fold_layer: {values_dev.shape[0]} values, height {log_height}")
            self._fri.fri_fold_arity_device(
                self._live(values_dev), beta, log_arity,
                roll=None if roll_dev is None else self._live(roll_dev), out=out.data,
                stream=self._s())
        except BaseException:
            stages.mem.free(out)
            raise
        return out

    def gather_rows(self, dev, idx, width: int | None = None) -> np.ndarray:
        data = self._live(dev)
        if width is not None:
            data = data.reshape(-1, width)
        return self._fri.gather_node_rows_device(data, np.asarray(idx, dtype=np.int64),
                                                 stream=self._s())

    def slice_rows(self, dev, lo: int, hi: int) -> np.ndarray:
        part = self._live(dev)[lo:hi]
        if self.kind == "sim":
            return part.copy_to_host(stream=self._s())
        return part.get()           # cupy: on the thread's current (the worker's) stream

    @staticmethod
    def _live(dev: DeviceArray):
        if dev.freed or dev.data is None:
            raise RuntimeError(f"read of a freed device buffer ({dev.tag})")
        return dev.data

    def download_view(self, dev: DeviceArray) -> np.ndarray:
        data = self._live(dev)
        return data.copy_to_host() if self.kind == "sim" else data.get()

    def checksum(self, dev: DeviceArray) -> tuple:
        """Integrity tag reduced on the device (16 bytes cross to the host); the same
        pair as the host's ``checksum_words``.  Under the simulator one small block."""
        data = self._live(dev)
        if np.dtype(data.dtype) != np.uint32:
            return checksum_words(self.download_view(dev))
        if self.kind == "sim":
            return self._layout.checksum_device(data, max_blocks=1, block=8, stream=self._s())
        return self._layout.checksum_device(data, stream=self._s())

    def upload_into(self, dev: DeviceArray, host: np.ndarray) -> None:
        host = np.ascontiguousarray(host)
        if self.kind == "sim":
            dev.data.copy_to_device(host)
        else:
            dev.data.set(host)


# ----------------------------------------------------------------------------- scratch
# The device kernels allocate some temporaries themselves (numba device arrays: twiddle
# tables, LogUp denominators and scan levels, reduction partials, gathered rows and
# multiproof nodes, the uploaded preprocessed LDE).  Each CudaEngine call books an upper bound of
# them against the budget for its duration (DeviceMemory.scratch), so the budget bounds
# what the process really holds and a call whose temporaries do not fit declines with
# DeviceOOM (and recovers) instead of overshooting.  Bounds in bytes (4-byte words); the
# simulator test in tests/test_pipeline.py measures every call against them.
_SLACK = 4096


def _ood_scratch(mem, c, n):
    return mem, 4 * c * n + 16 * c * (n // 64 + 1) + _SLACK


def _scratch_estimates():
    def n_lde(shape):
        return 1 << shape.log_lde

    return {
        "aux_build": lambda self, stages, air, shape, *a, **k: (
            stages.mem, 4 * shape.n * (4 * shape.aux_width + shape.main_width) + _SLACK),
        "quotient_decompose": lambda self, stages, air, shape, main, prep_lde, *a, **k: (
            stages.mem, 4 * (0 if prep_lde is None else int(np.size(prep_lde)))
            + 4 * 8 * (1 << shape.log_quotient) + _SLACK),
        "ood": lambda self, coeffs_dev, point: _ood_scratch(self.mem, *tuple(coeffs_dev.shape)),
        "deep_quotient": lambda self, stages, shape, groups, z, lam: (
            stages.mem, 4 * n_lde(shape) * (8 * len(groups) + 8) + _SLACK),
        "lde_commit": lambda self, mem, evals_T_dev, shape, tag: (
            mem, 4 * (int(np.prod(tuple(evals_T_dev.shape))) + 8 * n_lde(shape)) + _SLACK),
        "parts_lde_commit": lambda self, mem, blocks_dev, shape, tag: (
            mem, 4 * 8 * n_lde(shape) + _SLACK),
        "commit_rows": lambda self, mem, *a, **k: (mem, _SLACK),
        "fri_input": lambda self, stages, *a, **k: (stages.mem, _SLACK),
        "fold_layer": lambda self, stages, *a, **k: (stages.mem, _SLACK),
        "gather_rows": lambda self, dev, idx, width=None: (
            self.mem, (8 + 4 * (width or tuple(dev.shape)[-1])) * len(idx) + _SLACK),
        "gather_columns": lambda self, lde_dev, nat_idx: (
            self.mem, (4 * tuple(lde_dev.shape)[0] + 8) * len(nat_idx) + _SLACK),
    }


SCRATCH_ESTIMATES = _scratch_estimates()


def _with_scratch(method, estimate, name):
    @functools.wraps(method)
    def wrapped(self, *args, **kwargs):
        mem, nbytes = estimate(self, *args, **kwargs)
        if mem is None:
            return method(self, *args, **kwargs)
        with mem.scratch(nbytes, name):
            return method(self, *args, **kwargs)
    return wrapped


for _name, _est in SCRATCH_ESTIMATES.items():
    setattr(CudaEngine, _name, _with_scratch(getattr(CudaEngine, _name), _est, _name))


__all__ = ["EmuEngine", "CudaEngine", "decompose", "parts_lde", "bit_reverse_permutation"]
