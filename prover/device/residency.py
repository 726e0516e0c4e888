"""Resident handles: the source of truth for every table-stage buffer (SPEC §6).

A :class:`ResidentHandle` owns one logical buffer (a table's main LDE, aux LDE, quotient
parts, a Merkle tree's levels, an FRI layer) and knows where its bytes live: on the host,
on the device, or both.  Stages never keep their own copies; they ask the handle:

* :meth:`host` -- the data on the host, downloading only if the host side is missing
  (a *host materialisation*, counted by the recovery layer);
* :meth:`device` -- the data on the device, uploading only if the device side is missing;
* :meth:`drop_host` / :meth:`drop_device` / :meth:`release` -- give a side back.

Device-only mode means the handle keeps no host copy after upload.  If both sides are
gone (e.g. a device buffer was reclaimed by the end of its epoch and no host copy was
kept) the data is *lost*: :class:`DataLost` is raised and the proof fails cleanly -- the
only condition that aborts a proof.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Flag

import numpy as np

from ...kernels.backend import DeviceArray, DeviceMemory


#: the uploads of the calling thread's current device attempt (see :func:`tracking_uploads`)
_TRACK = threading.local()


class tracking_uploads:
    """Inside, every :meth:`ResidentHandle.device` of the calling thread that uploads (a
    spilled input brought back) is recorded in the yielded list, so a failed device attempt
    can give those device copies back (:meth:`TableState.attempt`)."""

    def __enter__(self) -> list:
        self._prev = getattr(_TRACK, "uploads", None)
        _TRACK.uploads = []
        return _TRACK.uploads

    def __exit__(self, *exc):
        _TRACK.uploads = self._prev
        return False


class DataLost(RuntimeError):
    """A resident buffer has no valid copy on either side (unrecoverable)."""


class Where(Flag):
    NONE = 0
    HOST = 1
    DEVICE = 2
    BOTH = 3


@dataclass
class TransferStats:
    """A table's transfers (shared by its handles; a spill or the join may move them from
    another thread than the table's worker, so every update takes the lock: :meth:`add`)."""
    h2d_bytes: int = 0
    d2h_bytes: int = 0
    host_materialisations: int = 0

    def __post_init__(self):
        self._lock = threading.Lock()

    def add(self, h2d_bytes: int = 0, d2h_bytes: int = 0, host_materialisations: int = 0) -> None:
        with self._lock:
            self.h2d_bytes += int(h2d_bytes)
            self.d2h_bytes += int(d2h_bytes)
            self.host_materialisations += int(host_materialisations)


class ResidentHandle:
    """One table-stage buffer, resident on the host, the device, or both."""

    def __init__(self, table: str, stage: str, mem: DeviceMemory | None, *,
                 host: np.ndarray | None = None, device: DeviceArray | None = None,
                 stats: TransferStats | None = None):
        if host is None and device is None:
            raise ValueError(f"resident handle {table}/{stage} created with no data")
        self.table = table
        self.stage = stage
        self.mem = mem
        self._host = host
        self._dev = device
        self.stats = stats if stats is not None else TransferStats()
        self._lock = threading.Lock()
        ref = host if host is not None else device
        self.shape = tuple(ref.shape)
        self.dtype = np.dtype(ref.dtype)

    # -- where --------------------------------------------------------------------
    @property
    def where(self) -> Where:
        w = Where.NONE
        if self._host is not None:
            w |= Where.HOST
        if self._dev is not None and not self._dev.freed:
            w |= Where.DEVICE
        return w

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def on_device(self) -> bool:
        return Where.DEVICE in self.where

    @property
    def on_host(self) -> bool:
        return self._host is not None

    def __repr__(self):
        return (f"ResidentHandle({self.table}/{self.stage}, shape={self.shape}, "
                f"where={self.where.name})")

    # -- access -------------------------------------------------------------------
    def host(self) -> np.ndarray:
        """The host copy, downloading it (once) if only the device side exists."""
        with self._lock:
            if self._host is not None:
                return self._host
            if self._dev is None or self._dev.freed:
                raise DataLost(f"{self.table}/{self.stage}: no host copy and the device "
                               f"buffer is gone")
            self._host = self.mem.to_host(self._dev)
            self.stats.add(d2h_bytes=self._host.nbytes, host_materialisations=1)
            return self._host

    def device(self) -> DeviceArray:
        """The device copy, uploading it if only the host side exists (may raise DeviceOOM)."""
        with self._lock:
            if self._dev is not None and not self._dev.freed:
                return self._dev
            if self._host is None:
                raise DataLost(f"{self.table}/{self.stage}: no device copy and no host copy")
            self._dev = self.mem.to_device(self._host, tag=f"{self.table}/{self.stage}")
            self.stats.add(h2d_bytes=self._host.nbytes)
            uploads = getattr(_TRACK, "uploads", None)
            if uploads is not None:
                uploads.append(self)
            return self._dev

    # -- release --------------------------------------------------------------------
    def drop_host(self) -> None:
        """Device-only mode: forget the host copy (only if the device copy is valid)."""
        with self._lock:
            if self._dev is None or self._dev.freed:
                raise DataLost(f"{self.table}/{self.stage}: refusing to drop the only copy")
            self._host = None

    def drop_device(self) -> None:
        with self._lock:
            if self._dev is not None:
                if self.mem is not None:
                    self.mem.free(self._dev)
                self._dev = None

    def release(self) -> None:
        self.drop_device()
        with self._lock:
            self._host = None


# ----------------------------------------------------------------- a table's resident state
@dataclass
class TableState:
    """A table's device state (touched only by the worker running that table; the join's
    by the main thread): its handles with their integrity tags and the host inputs they
    were uploaded from, its stages' outputs (for post-mortems), its transfers, and whether
    it went on on the host.  The bookkeeping over all of its handles is here, called at a
    device attempt's entry and exit (:meth:`attempt`) and at the table's own
    (:meth:`device_bytes`, :meth:`spill`, :meth:`release_device`)."""
    name: str
    downgraded: bool = False
    recomputed: bool = False        # a caught corruption recomputed it on the host (#26)
    handles: list = field(default_factory=list)
    tags: dict = field(default_factory=dict)          # handle id -> checksum at production
    host_inputs: dict = field(default_factory=dict)   # stage -> the host array it was uploaded from
    outputs: dict = field(default_factory=dict)       # stage -> handle (for post-mortems)
    transfers: TransferStats = field(default_factory=TransferStats)

    @contextmanager
    def attempt(self):
        """One device attempt of a stage: when it raises, every handle it created (an
        upload before a commit that did not fit, an output of a kernel that failed) is
        released and forgotten, and every input it brought back to the device from the
        host (a spilled table's buffer) gives that device copy back, so the retry -- and,
        after a downgrade, the host path -- starts with exactly the device bytes the
        first attempt found (issue #28.1).  Only the table's own worker appends to its
        handles; uploads are tracked per thread."""
        n0 = len(self.handles)
        try:
            with tracking_uploads() as uploads:
                yield
        except BaseException:
            made = self.handles[n0:]
            for h in uploads:
                if h.on_host and all(h is not m for m in made):
                    try:
                        h.drop_device()     # the host copy it was uploaded from stays
                    except Exception:       # noqa: BLE001 -- the attempt's own error wins
                        pass
            del self.handles[n0:]
            for h in made:
                self.tags.pop(id(h), None)
                for stage, out in list(self.outputs.items()):
                    if out is h:
                        del self.outputs[stage]
                try:
                    h.release()
                except Exception:       # noqa: BLE001 -- the attempt's own error wins
                    pass
            raise

    def device_bytes(self) -> int:
        """Bytes of the table's buffers on the device now."""
        return sum(h.nbytes for h in self.handles if h.on_device)

    def spill(self) -> int:
        """Move every resident buffer to the host (to admit another table) -> bytes moved."""
        moved = 0
        for h in self.handles:
            if h.on_device:
                if not h.on_host:
                    h.host()
                moved += h.nbytes
                h.drop_device()
        return moved

    def release_device(self) -> None:
        """Give back every device buffer (the table is finished)."""
        for h in self.handles:
            h.drop_device()


# ----------------------------------------------------------------- resident structures
class DevTree:
    """A Merkle tree whose nodes (and opened matrix) stay resident; an opening
    (:meth:`prover.device.join.DeviceJoinStages.open_batch`) gathers only the requested
    rows and multiproof nodes."""

    def __init__(self, nodes: ResidentHandle, log_n: int, rows_of, root: np.ndarray,
                 rows_h: ResidentHandle | None = None):
        self.nodes = nodes
        self.log_n = log_n
        # (indices, on_device) -> uint32[q, w]: gathered by a device kernel when
        # ``on_device`` and the data is resident, else from the host copy
        self._rows_of = rows_of
        self.rows_h = rows_h             # the handle the opened rows come from
        self.root = np.asarray(root, np.uint32)

    @property
    def table(self) -> str:
        return self.nodes.table

    def handles(self) -> list:
        """Every handle an opening reads (the tree and the opened matrix)."""
        return [self.nodes] + ([self.rows_h] if self.rows_h is not None else [])


class DevCommitted:
    """Duck-typed :class:`prover.core.stages.Committed` whose buffers are resident handles."""

    def __init__(self, table: str, lde: ResidentHandle, coeffs: ResidentHandle, tree: DevTree):
        self.table = table
        self.lde_h = lde
        self.coeffs_h = coeffs
        self.tree = tree
        self.root = tree.root

    @property
    def lde(self) -> np.ndarray:
        return self.lde_h.host()

    @property
    def coeffs(self) -> np.ndarray:
        return self.coeffs_h.host()

    def handles(self):
        return [self.lde_h, self.coeffs_h, self.tree.nodes]
