"""Merkle commitments over matrix rows (SPEC §3; Plonky3 ``MerkleTreeMmcs``, arity 2).

Leaf i is the sponge digest of row i (:func:`kernels.poseidon2.hash_rows`); an inner node is
``compress(left, right)`` = the first 8 lanes of ``permute(left || right)``.  Rows are
committed in the order given: callers choose natural or bit-reversed order, and an opening
index refers to that order.

All the nodes of a tree live in one array ``nodes`` uint32[2n - 1, 8]: the n leaf digests
first, then each level above, the root last.  Level k (k = 0 for the leaves) starts at row
``2n - 2^(log n - k + 1)`` and has ``n >> k`` digests; since the two children of a node are
adjacent, a level of 2m digests viewed as uint32[m, 16] is exactly the batch of
(left || right) inputs of the next level, so every level is one batched permutation call.
"""
from __future__ import annotations

import numpy as np

from .field import P
from .poseidon2 import DIGEST, RATE, WIDTH, _check_canonical, _check_u32, _sponge
from .poseidon2 import hash_rows  # noqa: F401  (re-exported: the leaf hash, kernels.hash_rows)

__all__ = ["MerkleTree", "commit", "merkle_root", "verify_paths", "level_offsets", "hash_rows",
           "level_digests"]


def level_offsets(log_n: int) -> np.ndarray:
    """Row offset of every level in the flat node array (int64[log_n + 1]); level 0 = leaves."""
    n = 1 << log_n
    return np.array([2 * n - (1 << (log_n - k + 1)) for k in range(log_n + 1)], dtype=np.int64)


def _log2_exact(n: int, what: str) -> int:
    if n < 1 or n & (n - 1):
        raise ValueError(f"{what}: the number of rows must be a power of two >= 1, got {n}")
    return n.bit_length() - 1


def _build_levels(nodes: np.ndarray, log_n: int) -> None:
    """Fill levels 1..log_n of ``nodes`` from its leaf level (in place)."""
    offs = level_offsets(log_n)
    for k in range(log_n):
        m = 1 << (log_n - k)                         # digests on level k
        children = nodes[offs[k]:offs[k] + m].reshape(m // 2, WIDTH)
        _sponge(children, nodes[offs[k + 1]:offs[k + 1] + m // 2], WIDTH)


def _readonly(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.setflags(write=False)
    return v


def _check_indices(indices, n: int) -> np.ndarray:
    idx = np.asarray(indices)
    if idx.size == 0:
        idx = idx.astype(np.int64)                  # [] arrives as float64
    if idx.dtype.kind not in "iu":
        raise TypeError(f"indices: expected integers, got dtype {idx.dtype}")
    if idx.ndim != 1:
        raise ValueError(f"indices: expected a 1-d array of row indices, got shape {idx.shape}")
    idx = idx.astype(np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise ValueError(f"indices: row index out of range [0, {n})")
    return idx


class MerkleTree:
    """A committed matrix: all node digests plus (a read-only view of) the committed rows.

    ``levels[0]`` are the leaf digests uint32[n, 8], ``levels[-1]`` the root level uint32[1, 8];
    ``root`` is uint32[8].  The tree keeps a view of the matrix, not a copy: do not modify
    the matrix after committing it.
    """

    __slots__ = ("_nodes", "_log_n", "_matrix")

    def __init__(self, nodes: np.ndarray, log_n: int, matrix: np.ndarray | None):
        if nodes.shape != ((2 << log_n) - 1, DIGEST):
            raise ValueError(f"nodes: expected shape {((2 << log_n) - 1, DIGEST)}, got {nodes.shape}")
        object.__setattr__(self, "_nodes", _readonly(nodes))
        object.__setattr__(self, "_log_n", int(log_n))
        object.__setattr__(self, "_matrix", None if matrix is None else _readonly(matrix))

    def __setattr__(self, name, value):
        raise AttributeError("MerkleTree is immutable")

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def from_digests(cls, leaf_digests: np.ndarray, matrix: np.ndarray | None = None) -> "MerkleTree":
        """Tree over given leaf digests uint32[n, 8] (n a power of two); ``matrix`` optional."""
        leaf_digests = _check_u32(leaf_digests, "leaf_digests")
        if leaf_digests.ndim != 2 or leaf_digests.shape[1] != DIGEST:
            raise ValueError(f"leaf_digests: expected uint32[n, {DIGEST}], got {leaf_digests.shape}")
        log_n = _log2_exact(leaf_digests.shape[0], "leaf_digests")
        _check_canonical(leaf_digests, "leaf_digests")
        if matrix is not None and (matrix.ndim != 2 or matrix.shape[0] != leaf_digests.shape[0]):
            raise ValueError("matrix: must have one row per leaf digest")
        nodes = np.empty(((2 << log_n) - 1, DIGEST), np.uint32)
        nodes[: 1 << log_n] = leaf_digests
        _build_levels(nodes, log_n)
        return cls(nodes, log_n, matrix)

    # -- accessors ---------------------------------------------------------------------
    @property
    def log_n(self) -> int:
        return self._log_n

    @property
    def n(self) -> int:
        return 1 << self._log_n

    @property
    def nodes(self) -> np.ndarray:
        """All digests, uint32[2n - 1, 8] (read-only): leaves first, root last."""
        return self._nodes

    @property
    def levels(self) -> list[np.ndarray]:
        offs = level_offsets(self._log_n)
        return [self._nodes[offs[k]:offs[k] + (self.n >> k)] for k in range(self._log_n + 1)]

    @property
    def root(self) -> np.ndarray:
        return self._nodes[-1].copy()

    @property
    def matrix(self) -> np.ndarray | None:
        return self._matrix

    # -- openings ----------------------------------------------------------------------
    def paths(self, indices) -> np.ndarray:
        """Authentication paths uint32[q, log n, 8]: the sibling at each level, leaves first."""
        idx = _check_indices(indices, self.n)
        offs = level_offsets(self._log_n)[:-1]
        shifts = np.arange(self._log_n, dtype=np.int64)
        sib = ((idx[:, None] >> shifts[None, :]) ^ 1) + offs[None, :]      # [q, log n]
        return self._nodes[sib]

    def open(self, indices) -> tuple[np.ndarray, np.ndarray]:
        """(rows uint32[q, w], paths uint32[q, log n, 8]) for the given row indices."""
        if self._matrix is None:
            raise ValueError("this tree was built from digests without its matrix; use paths()")
        idx = _check_indices(indices, self.n)
        return self._matrix[idx], self.paths(idx)

    def __repr__(self) -> str:
        w = None if self._matrix is None else self._matrix.shape[1]
        return f"MerkleTree(n={self.n}, w={w}, root={self._nodes[-1].tolist()})"


def commit(matrix: np.ndarray) -> MerkleTree:
    """Commit to the rows of ``matrix`` uint32[n, w] (n a power of two >= 1, w >= 1)."""
    matrix = _check_u32(matrix, "matrix")
    if matrix.ndim != 2:
        raise ValueError(f"matrix: expected a 2-d array uint32[n, w], got shape {matrix.shape}")
    if matrix.shape[0] == 0 or matrix.shape[1] == 0:
        raise ValueError(f"matrix: cannot commit to an empty matrix (shape {matrix.shape})")
    log_n = _log2_exact(matrix.shape[0], "matrix")
    _check_canonical(matrix, "matrix")
    nodes = np.empty(((2 << log_n) - 1, DIGEST), np.uint32)
    _sponge(matrix, nodes[: 1 << log_n], RATE)                          # leaf digests
    _build_levels(nodes, log_n)
    return MerkleTree(nodes, log_n, matrix)


def level_digests(matrix: np.ndarray, level: int) -> np.ndarray:
    """The digests of level ``level`` (0: the leaves) of the tree over the rows of
    ``matrix`` (uint32[n, w] canonical, n a multiple of 2^level): uint32[n >> level, 8],
    equal to ``commit(matrix).levels[level]`` when n is a power of two.  Holds only two
    levels at a time (no node array): a caller that commits a large matrix in chunks of
    rows keeps only the level it asks for (the pruned LDE trees, prover/core/stages.py)."""
    matrix = _check_u32(matrix, "matrix")
    if matrix.ndim != 2 or matrix.shape[0] == 0 or matrix.shape[1] == 0:
        raise ValueError(f"matrix: expected a non-empty uint32[n, w], got shape {matrix.shape}")
    if level < 0 or matrix.shape[0] % (1 << level):
        raise ValueError(f"level {level}: {matrix.shape[0]} rows are not a multiple of 2^{level}")
    _check_canonical(matrix, "matrix")
    cur = np.empty((matrix.shape[0], DIGEST), np.uint32)
    _sponge(matrix, cur, RATE)                     # _check_u32 made it C-contiguous
    return _levels_up(cur, level)


def _levels_up(cur: np.ndarray, level: int) -> np.ndarray:
    """``level`` compression levels above the digests ``cur`` (uint32[n, 8] C-contiguous,
    canonical, n a multiple of 2^level): uint32[n >> level, 8] (``cur`` itself for level
    0).  No checks: the internal step of :func:`level_digests` for callers whose digests
    come from the sponge (the pruned LDE trees, prover/core/ldetree.py)."""
    for _ in range(level):
        nxt = np.empty((cur.shape[0] // 2, DIGEST), np.uint32)
        _sponge(cur.reshape(-1, WIDTH), nxt, WIDTH)
        cur = nxt
    return cur


def merkle_root(m: np.ndarray) -> np.ndarray:
    """Root uint32[8] of the Merkle tree over the rows of m (uint32[n, w], n a power of two)."""
    return commit(m).root


def verify_paths(root: np.ndarray, rows: np.ndarray, indices, paths: np.ndarray) -> np.ndarray:
    """Check q openings against ``root``; returns bool[q] (True where the opening is valid).

    ``rows`` uint32[q, w], ``indices`` int[q], ``paths`` uint32[q, log n, 8] (sibling at each
    level, leaves first; log n = 0 for a one-row tree).  Malformed shapes or dtypes raise;
    an index outside [0, 2^log n) or a non-canonical value makes that opening invalid.
    """
    root = _check_u32(root, "root")
    rows = _check_u32(rows, "rows")
    paths = _check_u32(paths, "paths")
    if root.shape != (DIGEST,):
        raise ValueError(f"root: expected uint32[{DIGEST}], got shape {root.shape}")
    if rows.ndim != 2 or rows.shape[1] == 0:
        raise ValueError(f"rows: expected uint32[q, w] with w >= 1, got shape {rows.shape}")
    q = rows.shape[0]
    if paths.ndim != 3 or paths.shape[0] != q or paths.shape[2] != DIGEST:
        raise ValueError(f"paths: expected uint32[{q}, log n, {DIGEST}], got shape {paths.shape}")
    idx = np.asarray(indices)
    if idx.size == 0:
        idx = idx.astype(np.int64)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"indices: expected integers, got dtype {idx.dtype}")
    if idx.shape != (q,):
        raise ValueError(f"indices: expected shape ({q},), got {idx.shape}")
    depth = paths.shape[1]
    ok = (idx >= 0) & (idx < (1 << depth))
    ok &= np.all(rows < P, axis=1) & np.all(paths < P, axis=(1, 2))
    if not root.max(initial=0) < P:
        return np.zeros(q, dtype=bool)
    live = np.flatnonzero(ok)
    if live.size == 0:
        return ok
    pos = idx[live].astype(np.int64)
    cur = np.empty((live.size, DIGEST), np.uint32)
    _sponge(rows[live], cur, RATE)
    pairs = np.empty((live.size, WIDTH), np.uint32)
    for k in range(depth):
        sib = paths[live, k]
        right = ((pos >> k) & 1).astype(bool)[:, None]       # current node is a right child
        pairs[:, :DIGEST] = np.where(right, sib, cur)
        pairs[:, DIGEST:] = np.where(right, cur, sib)
        _sponge(pairs, cur, WIDTH)
    ok[live] = np.all(cur == root[None, :], axis=1)
    return ok
