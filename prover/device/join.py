"""The join on the device (proof format 3 on): one FRI for all tables and the openings.

:class:`DeviceJoinStages` holds the join's stages of :class:`prover.device.stages.
DeviceStages` (a mixin: it runs on that class's plumbing -- recovery sites, resident
handles): ``fri_input`` (F_h = sum_j mu^j DQ_j per height), the FRI
layers' commits and folds with their roll-ins, the final polynomial, and the caps and
openings of every tree (a table's or a layer's).  They run on the main thread after every
table's chain (docs/protocol.md section 5).  Their buffers (the combined inputs F_h, the
FRI layers and their trees) belong to the pseudo-table :data:`JOIN`; a downgrade of the
join moves the rest of the FRI to the host.  Table trees and DQs stay resident (or
spilled to the host) until then.  As there, each stage reads as its steps (``_combine``,
``_commit_layer``, ``_fold``, ``_gather_opening``: the steps
:class:`prover.device.faulting.FaultingStages` wraps under a fault plan).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from steadfast.errors import SteadfastError
from ...kernels import multiproof as mp
from ...kernels.merkle import level_offsets

from .residency import DevTree, ResidentHandle
from ..core.stages import HostStages


@dataclass(frozen=True)
class Layer:
    """A DEEP quotient, combined FRI input or FRI layer (uint32[2^log_h, 4], bit-reversed
    on g<w_{2^log_h}>) held by a resident handle."""
    h: ResidentHandle
    log_h: int


def host_of(v):
    """A layer argument on the host (None stays None)."""
    if v is None:
        return None
    return v.h.host() if isinstance(v, Layer) else np.asarray(v)


class DeviceResultError(SteadfastError, RuntimeError):
    """A device result failed one of the prover's own checks before the proof was
    finished (``check``: e.g. the final polynomial's degree): the proof is not emitted.
    With XCHECK on the pipeline turns it into an :class:`prover.device.xcheck.XcheckFailure`
    with a post-mortem."""

    def __init__(self, message: str, check: str):
        super().__init__(message)
        self.check = check


#: the pseudo-table that owns the join's buffers (F_h, FRI layers and trees) and names
#: the join in recovery counters, fault rules and timelines
JOIN = "<join>"


class DeviceJoinStages:
    """The join's stages of :class:`prover.device.stages.DeviceStages` (see the module
    docstring); every method has a device path and the host path it downgrades to."""

    def _combine(self, table: str, devs, mu, log_h: int):
        """Step: F_h = sum_j mu^j DQ_j of device DQs (uint32[2^log_h, 4]) -> its handle."""
        out = self.engine.fri_input(self, devs, mu, tag=f"{table}/F_{log_h}")
        return self._handle(table, f"F_{log_h}", out, seal=False)

    def fri_input(self, dqs, mu):
        t = JOIN
        inputs = [d.h for d in dqs if isinstance(d, Layer)]
        n = dqs[0].h.shape[0] if isinstance(dqs[0], Layer) else np.shape(dqs[0])[0]
        log_h = int(n).bit_length() - 1

        def dev():
            devs = []
            for j, d in enumerate(dqs):
                if isinstance(d, Layer):
                    devs.append(d.h.device())          # uploads a spilled DQ again
                else:                                  # a downgraded table's DQ
                    devs.append(self._put(t, f"dq_upload_{log_h}_{j}", np.asarray(d),
                                          seal=False).device())
            h = self._combine(t, devs, mu, log_h)
            self._seal(h)
            for d in dqs:                      # nothing reads a DQ after its combination
                if isinstance(d, Layer):
                    d.h.release()
            for hh in self.table(t).handles:
                if hh.stage.startswith(f"dq_upload_{log_h}_"):
                    hh.release()
            return Layer(h, log_h)

        def host():
            return HostStages.fri_input(self, [host_of(d) for d in dqs], mu)
        return self._run("r4.fri", t, dev, host, inputs)

    def _commit_layer(self, table: str, values: Layer, width: int) -> tuple:
        """Step: the Merkle commit of a layer's rows of ``width`` words -> (tree handle,
        root)."""
        nodes_d, root = self.engine.commit_rows(self.mem, values.h.device(), width,
                                                tag=f"{table}/fri_{values.log_h}")
        return self._handle(table, f"fri_{values.log_h}_tree", nodes_d, seal=False), root

    def fri_commit_layer(self, values, log_arity: int):
        t = JOIN
        if not isinstance(values, Layer):
            return self._run("r4.fri", t, self._declined("the layer is host-only"),
                             lambda: HostStages.fri_commit_layer(self, values, log_arity))
        width = 4 << log_arity

        def dev():
            nodes_h, root = self._commit_layer(t, values, width)
            n_leaves = values.h.shape[0] >> log_arity

            def rows_of(idx, on_device, vh=values.h, width=width):
                if on_device and vh.on_device:
                    return self.engine.gather_rows(vh.device(), idx, width)
                return np.ascontiguousarray(vh.host().reshape(-1, width)[idx])
            return DevTree(nodes_h, n_leaves.bit_length() - 1, rows_of, root, rows_h=values.h)

        def host():
            return HostStages.fri_commit_layer(self, values.h.host(), log_arity)
        return self._run("r4.fri", t, dev, host, [values.h])

    def _fold(self, table: str, values: Layer, beta, log_arity: int, log_height: int, roll_d):
        """Step: one layer's fold by 2^log_arity (+ the roll-in) on the device -> the next
        layer's handle."""
        nxt = log_height - log_arity
        out_d = self.engine.fold_layer(self, values.h.device(), beta, log_arity, log_height,
                                       roll_d, tag=f"{table}/fri_{nxt}")
        return self._handle(table, f"fri_{nxt}", out_d, seal=False)

    def fri_fold(self, values, beta, log_arity: int, log_height: int, rollin=None):
        t = JOIN
        if not isinstance(values, Layer):
            return self._run("r4.fri", t, self._declined("the layer is host-only"),
                             lambda: HostStages.fri_fold(self, values, beta, log_arity, log_height,
                                                         host_of(rollin)))
        inputs = [values.h] + ([rollin.h] if isinstance(rollin, Layer) else [])
        nxt = log_height - log_arity

        def dev():
            if rollin is None or isinstance(rollin, Layer):
                roll_d = None if rollin is None else rollin.h.device()
            else:
                roll_up = self._put(t, f"roll_upload_{nxt}", np.asarray(rollin), seal=False)
                roll_d = roll_up.device()
            h = self._fold(t, values, beta, log_arity, log_height, roll_d)
            self._seal(h)
            if isinstance(rollin, Layer):
                rollin.h.release()             # rolled in: F_h is not read again
            elif rollin is not None:
                roll_up.release()              # the upload of a host F_h, likewise
            return Layer(h, nxt)

        def host():
            return HostStages.fri_fold(self, values.h.host(), beta, log_arity, log_height,
                                       host_of(rollin))
        return self._run("r4.fri", t, dev, host, inputs)

    def fri_final(self, values, log_height: int, length: int):
        """The final polynomial (on the host: 2^h_final values).  Its degree check failing
        here means a wrong device result upstream (the statement was checked before
        proving): :class:`DeviceResultError`, never a wrong proof."""
        if isinstance(values, Layer):
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

    def leaf_digests(self, com) -> np.ndarray:
        """A committed matrix's leaf digests for its round's mixed tree: level 0 of its
        resident tree (a host copy; a spilled or downgraded tree reads its host side)."""
        tree = getattr(com, "tree", None)
        if not isinstance(tree, DevTree):
            return HostStages.leaf_digests(self, com)
        n = 1 << tree.log_n
        if tree.nodes.on_device:
            with self.submission_lock():
                return np.ascontiguousarray(self.engine.slice_rows(tree.nodes.device(), 0, n),
                                            np.uint32)
        return np.array(tree.nodes.host()[:n], dtype=np.uint32)

    def group_rows(self, com, groups, b: int) -> np.ndarray:
        """:meth:`prover.core.stages.HostStages.group_rows` of a resident matrix: its rows
        gathered by a device kernel when resident, else from its host copy."""
        tree = getattr(com, "tree", None)
        if not isinstance(tree, DevTree):
            return HostStages.group_rows(self, com, groups, b)
        groups = np.asarray(groups, np.int64)
        pos = ((groups[:, None] << b) + np.arange(1 << b)[None, :]).reshape(-1)

        def gather(on_device):
            rows = tree._rows_of(pos, on_device)
            return np.ascontiguousarray(rows, np.uint32).reshape(groups.size, 1 << b, -1)
        # a device gather at the opening site: its OOM recovered as every r4.open's
        return self._run("r4.open", tree.table, lambda: gather(True), lambda: gather(False),
                         tree.handles())

    def open_rows(self, tree, indices, log_cap: int, cached=None) -> np.ndarray:
        """A table's opened rows: from the resident matrix (site r4.open, its faults
        included), else as :meth:`prover.core.stages.HostStages.open_rows`."""
        if isinstance(tree, DevTree):
            return self.open_batch(tree, indices, log_cap)[0]
        return HostStages.open_rows(self, tree, indices, log_cap, cached)

    def _gather_opening(self, tree: DevTree, idx: np.ndarray, node_rows: np.ndarray) -> tuple:
        """Step: the opened rows (from the resident matrix) and the tree's multiproof
        nodes of one opening -> host (rows, nodes)."""
        rows = tree._rows_of(idx, True)
        nodes = self.engine.gather_rows(tree.nodes.device(), node_rows) if tree.nodes.on_device \
            else np.asarray(tree.nodes.host())[node_rows]
        return rows, nodes

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
            rows, nodes = self._gather_opening(tree, idx, node_rows)
            return np.ascontiguousarray(rows, np.uint32), np.ascontiguousarray(nodes, np.uint32)

        def host():
            # host copies only (the recovery materialised the missing sides): a device
            # gather here would be a device allocation outside any recovery site
            rows = tree._rows_of(idx, False)
            nodes = np.asarray(tree.nodes.host())[node_rows]
            return np.ascontiguousarray(rows, np.uint32), np.ascontiguousarray(nodes, np.uint32)
        return self._run("r4.open", t, dev, host, tree.handles())


__all__ = ["DeviceJoinStages", "DeviceResultError", "JOIN", "Layer", "host_of"]
