"""Merkle commitments for the prover: a thin adapter over ``kernels.merkle``.

``commit(rows)`` -> an object with ``.root`` (uint32[8]) and ``.open(indices) ->
(rows uint32[q, w], paths uint32[q, log n, 8])``, paths bottom-up (``paths[:, 0]`` is the
leaf's sibling), exactly the convention :mod:`verifier.merkle` checks.
"""
from __future__ import annotations

import numpy as np

try:                                   # the kernels' tree (SPEC §3), preferred
    from kernels.merkle import commit as _kernel_commit
except ImportError:                    # pragma: no cover - only while kernels/ is incomplete
    _kernel_commit = None


class _HostTree:
    """Fallback tree built with kernels' hash_rows / poseidon2 (used only if
    ``kernels.merkle.commit`` is unavailable)."""

    def __init__(self, rows: np.ndarray):
        try:
            from kernels import hash_rows, poseidon2_permute
            hash_rows(np.zeros((1, 1), np.uint32))
        except (ImportError, AttributeError):   # TEMPORARY until kernels/poseidon2 lands
            from verifier.poseidon2 import hash_rows, permute as poseidon2_permute
        self.rows = rows
        levels = [hash_rows(rows)]
        while levels[-1].shape[0] > 1:
            cur = levels[-1]
            st = np.concatenate([cur[0::2], cur[1::2]], axis=1)
            levels.append(np.ascontiguousarray(poseidon2_permute(st)[:, :8]))
        self.levels = levels
        self.root = levels[-1][0].copy()

    def open(self, indices):
        idx = np.asarray(indices, dtype=np.int64)
        paths = np.empty((idx.size, len(self.levels) - 1, 8), dtype=np.uint32)
        for lvl in range(len(self.levels) - 1):
            paths[:, lvl] = self.levels[lvl][(idx >> lvl) ^ 1]
        return self.rows[idx], paths


def commit(rows: np.ndarray):
    """Commit to the rows of a uint32[n, w] matrix (n a power of two)."""
    rows = np.ascontiguousarray(rows, dtype=np.uint32)
    if _kernel_commit is not None:
        return _kernel_commit(rows)
    return _HostTree(rows)  # pragma: no cover
