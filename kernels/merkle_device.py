"""Merkle commitments on the device (numba.cuda), bit-identical to :mod:`kernels.merkle`.

``commit_device(dev_matrix)`` hashes the rows and builds every level in one flat device
buffer ``nodes`` uint32[2n - 1, 8] (same layout as the host tree: leaves first, root
last; see :func:`kernels.merkle.level_offsets`), then copies only the root (32 bytes) to
the host.  Openings gather the requested rows and sibling digests on the device, so only
the q rows and q*log n digests cross to the host.
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from .devicelib import fetch, grid_1d, kernel
from .merkle import MerkleTree, _check_indices, _log2_exact, level_offsets
from .poseidon2_constants import DIGEST, RATE
from .poseidon2_device import (DEFAULT_BLOCK, _check_dev, _out, launch_merkle_level,
                               launch_sponge_rows)

__all__ = ["DeviceMerkleTree", "commit_device", "merkle_root_device"]


@kernel("void(uint32[:, ::1], int64[::1], int64, uint32[:, :, ::1])")
def _gather_paths_kernel(nodes, idx, log_n, paths):
    # thread t = (query q, level k): paths[q, k] = sibling of the level-k ancestor of leaf idx[q]
    t = cuda.grid(1)
    if t < idx.shape[0] * log_n:
        q = t // log_n
        k = t - q * log_n
        n2 = 2 << log_n                                  # 2n
        row = n2 - (2 << (log_n - k)) + ((idx[q] >> k) ^ 1)
        for c in range(8):
            paths[q, k, c] = nodes[row, c]


@kernel("void(uint32[:, ::1], int64[::1], uint32[:, ::1])")
def _gather_rows_kernel(matrix, idx, rows):
    # thread t = (query q, column c); consecutive threads read consecutive columns
    t = cuda.grid(1)
    w = matrix.shape[1]
    if t < idx.shape[0] * w:
        q = t // w
        c = t - q * w
        rows[q, c] = matrix[idx[q], c]


class DeviceMerkleTree:
    """A tree whose nodes (and committed matrix) stay on the device; ``root`` is on the host.

    ``nodes`` device uint32[2n - 1, 8]; ``levels[k]`` are device views (k = 0: leaves);
    ``matrix`` is the caller's device matrix (kept by reference: do not modify it).
    """

    __slots__ = ("nodes", "log_n", "matrix", "root")

    def __init__(self, nodes, log_n: int, matrix, root: np.ndarray):
        self.nodes = _check_dev(nodes, "nodes", 2, DIGEST)     # numba views, sync=False
        self.log_n = int(log_n)
        self.matrix = None if matrix is None else _check_dev(matrix, "matrix", 2)
        self.root = root

    @property
    def n(self) -> int:
        return 1 << self.log_n

    @property
    def levels(self) -> list:
        offs = level_offsets(self.log_n)
        return [self.nodes[int(offs[k]):int(offs[k]) + (self.n >> k)] for k in range(self.log_n + 1)]

    def paths(self, indices, stream=None, block: int = DEFAULT_BLOCK) -> np.ndarray:
        """Authentication paths (host uint32[q, log n, 8]), gathered on the device."""
        idx = _check_indices(indices, self.n)
        return self._gather(idx, stream, block, rows=False)[1]

    def open(self, indices, stream=None, block: int = DEFAULT_BLOCK) -> tuple[np.ndarray, np.ndarray]:
        """(rows uint32[q, w], paths uint32[q, log n, 8]) on the host, like MerkleTree.open."""
        if self.matrix is None:
            raise ValueError("this tree has no matrix; use paths()")
        idx = _check_indices(indices, self.n)
        return self._gather(idx, stream, block, rows=True)

    def _gather(self, idx: np.ndarray, stream, block: int, rows: bool):
        q = idx.shape[0]
        s = stream or 0
        w = self.matrix.shape[1] if rows else 0
        host_rows = np.empty((q, w), np.uint32)
        host_paths = np.empty((q, self.log_n, DIGEST), np.uint32)
        if q == 0:
            return host_rows, host_paths
        d_idx = cuda.to_device(np.ascontiguousarray(idx, dtype=np.int64), stream=s)
        if self.log_n:
            d_paths = cuda.device_array((q, self.log_n, DIGEST), dtype=np.uint32, stream=s)
            grid, blk = grid_1d(q * self.log_n, block)
            _gather_paths_kernel[grid, blk, s](self.nodes, d_idx, self.log_n, d_paths)
            d_paths.copy_to_host(host_paths, stream=s)
        if rows:
            d_rows = cuda.device_array((q, w), dtype=np.uint32, stream=s)
            grid, blk = grid_1d(q * w, block)
            _gather_rows_kernel[grid, blk, s](self.matrix, d_idx, d_rows)
            d_rows.copy_to_host(host_rows, stream=s)
        if s:
            s.synchronize()
        return host_rows, host_paths

    def to_host(self) -> MerkleTree:
        """Copy the whole tree (and matrix) to the host (the downgrade path)."""
        nodes = self.nodes.copy_to_host()
        matrix = None if self.matrix is None else self.matrix.copy_to_host()
        return MerkleTree(nodes, self.log_n, matrix)

    def __repr__(self) -> str:
        return f"DeviceMerkleTree(n={self.n}, root={self.root.tolist()})"


def commit_device(dev_matrix, stream=None, out=None, block: int = DEFAULT_BLOCK) -> DeviceMerkleTree:
    """Commit to the rows of a device matrix uint32[n, w] (n a power of two, w >= 1).

    ``out``: optional device uint32[2n - 1, 8] for the nodes (e.g. from a budgeted pool).
    Returns a :class:`DeviceMerkleTree`; only the root is copied to the host.
    """
    dev_matrix = _check_dev(dev_matrix, "dev_matrix", 2)
    n, w = dev_matrix.shape
    if n == 0 or w == 0:
        raise ValueError(f"dev_matrix: cannot commit to an empty matrix (shape {(n, w)})")
    log_n = _log2_exact(n, "dev_matrix")
    nodes = _out(out, ((2 << log_n) - 1, DIGEST), stream, "out")
    launch_sponge_rows(dev_matrix, nodes[:n], RATE, stream, block)       # leaf digests
    offs = level_offsets(log_n)
    for k in range(log_n):
        launch_merkle_level(nodes, int(offs[k]), int(offs[k + 1]), n >> (k + 1), stream, block)
    root = np.empty((1, DIGEST), np.uint32)
    fetch(nodes[(2 << log_n) - 2:], stream, root)
    return DeviceMerkleTree(nodes, log_n, dev_matrix, root[0])


def merkle_root_device(dev_matrix, stream=None, block: int = DEFAULT_BLOCK) -> np.ndarray:
    """Root uint32[8] (host) of the tree over the rows of a device matrix."""
    return commit_device(dev_matrix, stream=stream, block=block).root
