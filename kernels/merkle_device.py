"""Merkle commitments on the device (numba.cuda), bit-identical to :mod:`kernels.merkle`.

``commit_device(dev_matrix)`` hashes the rows and builds every level in one flat device
buffer ``nodes`` uint32[2n - 1, 8] (same layout as the host tree: leaves first, root
last; see :func:`kernels.merkle.level_offsets`), then copies only the root (32 bytes) to
the host.  An opening gathers only its rows and multiproof nodes on the device
(:func:`kernels.fri_device.gather_node_rows_device`, built on ``_gather_rows_kernel``
here: rows of a row-major matrix, a tree's node array being one).
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from .devicelib import fetch, kernel
from .merkle import MerkleTree, _log2_exact, level_offsets
from .poseidon2_constants import DIGEST, RATE
from .poseidon2_device import (DEFAULT_BLOCK, _check_dev, _out, launch_merkle_level,
                               launch_sponge_rows)

__all__ = ["DeviceMerkleTree", "commit_device", "merkle_root_device"]


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
