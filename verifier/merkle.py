"""Merkle verification for the verifier (docs/protocol.md), batched: caps and
multiproofs (proof format v3 on).

Conventions (shared with the prover's trees, and written in docs/protocol.md):

* leaf i = sponge(row i) (:func:`verifier.poseidon2.hash_rows`);
* inner node = compress(left, right) (the first 8 lanes of the permutation of
  left || right); level 0 holds the leaf digests, level h (a tree over 2^h leaves) the root;
* **cap** (format v3): with c = min(log_cap, h), the commitment is the 2^c nodes of level
  h - c in index order (uint32[2^c, 8]); c = h commits the leaf digests themselves;
* **multiproof** (format v3) for a set of leaf indices: S_0 = the sorted distinct indices;
  for level l = 0 .. h-c-1 and each j in S_l ascending, when j^1 is not in S_l the proof
  supplies node (l, j^1), next in order; S_(l+1) = the sorted distinct {j >> 1}.  The
  verifier recomputes level by level and compares the level-(h-c) nodes with the cap
  entries at S_(h-c).  The node count m is a function of S_0 alone
  (:func:`multiproof_size`): a nodes array of another length is a ShapeError, checked
  before any hashing; a node that does not hash to the cap is a MerkleError.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from steadfast._jit_cache import adopt

from .errors import MerkleError, ShapeError
from .poseidon2 import P, _from_mont, _permute_lanes, _to_mont, hash_rows


def merkle_root(matrix: np.ndarray) -> np.ndarray:
    """Reference root of a full tree over the rows of ``matrix`` (n a power of two);
    used by tests and by small commitments, not on the verifier's hot path."""
    from .poseidon2 import compress
    level = hash_rows(matrix)
    while level.shape[0] > 1:
        level = compress(level[0::2], level[1::2])
    return level[0]


# ---------------------------------------------------------------- caps and multiproofs

# The kernels allocate nothing (verifier/poseidon2.py: an np.empty inside a cached
# kernel makes loading it import numba's array module).

@njit(cache=True, _nrt=False)
def _count_kernel(idx, levels, pos):
    """Nodes a multiproof of the sorted distinct leaf indices ``idx`` carries over
    ``levels`` levels (index arithmetic only; pos: int64 scratch of idx's size)."""
    n = idx.shape[0]
    for r in range(n):
        pos[r] = idx[r]
    m = 0
    for _ in range(levels):
        a = 0
        k = 0
        while a < n:
            j = pos[a]
            if (j & 1) == 0 and a + 1 < n and pos[a + 1] == j + 1:
                a += 2
            else:
                m += 1
                a += 1
            pos[k] = j >> 1
            k += 1
        n = k
    return m


def count_nodes(idx: np.ndarray, levels: int) -> int:
    """:func:`_count_kernel` of int64[k] ``idx``."""
    return int(_count_kernel(idx, levels, np.empty(idx.shape[0], np.int64)))


@njit(cache=True, _nrt=False)
def _multiproof_kernel(digests, idx, nodes, levels, pos, cur, st, out):
    """Recompute a multiproof up ``levels`` levels.  digests uint32[k, 8] are the leaf
    digests at the sorted distinct indices idx int64[k]; nodes uint32[m, 8] the proof's
    nodes in protocol order (m checked by the caller: exactly what this walk consumes).
    Each level is one lane-major Poseidon2 batch over its distinct parents.  Scratch:
    pos int64[k], cur uint64[k, 8], st uint64[16, k]; out uint32[k, 8] (k >= 1).
    Returns k': the parents at the top level are pos[:k'], their digests out[:k']."""
    n = idx.shape[0]
    for r in range(n):
        pos[r] = idx[r]
    for r in range(n):
        for i in range(8):
            cur[r, i] = _to_mont(np.uint64(digests[r, i]))       # Montgomery form
    ptr = 0
    for _ in range(levels):
        a = 0
        nl = 0
        while a < n:
            j = pos[a]
            if (j & 1) == 0 and a + 1 < n and pos[a + 1] == j + 1:
                for i in range(8):
                    st[i, nl] = cur[a, i]
                    st[8 + i, nl] = cur[a + 1, i]
                a += 2
            else:
                off_cur = 8 if (j & 1) else 0
                off_sib = 8 - off_cur
                for i in range(8):
                    st[off_cur + i, nl] = cur[a, i]
                    st[off_sib + i, nl] = _to_mont(np.uint64(nodes[ptr, i]))
                ptr += 1
                a += 1
            pos[nl] = j >> 1                     # nl <= a: never overwrites an unread index
            nl += 1
        _permute_lanes(st, nl)
        for b in range(nl):
            for i in range(8):
                cur[b, i] = st[i, b]
        n = nl
    for r in range(n):
        for i in range(8):
            out[r, i] = np.uint32(_from_mont(cur[r, i]))
    return n


def multiproof_top(digests, idx, nodes, levels: int):
    """:func:`_multiproof_kernel`: (the parents' indices at the top level int64[k'],
    their digests uint32[k', 8])."""
    k = max(idx.shape[0], 1)
    pos = np.empty(k, np.int64)
    out = np.empty((k, 8), np.uint32)
    n = _multiproof_kernel(digests, idx, nodes, levels, pos, np.empty((k, 8), np.uint64),
                           np.empty((16, k), np.uint64), out)
    return pos[:n].copy(), out[:n]


def cap_height(height: int, log_cap: int) -> int:
    """c = min(log_cap, h): the cap of a tree over 2^h leaves has 2^c nodes."""
    return min(int(log_cap), int(height))


def leaf_set(indices) -> np.ndarray:
    """S_0: the sorted distinct leaf indices (int64) -- also the order of opened rows."""
    return np.unique(np.asarray(indices, dtype=np.int64).reshape(-1))


def multiproof_size(indices, height: int, log_cap: int) -> int:
    """m: the number of nodes a multiproof for ``indices`` (any order, repeats allowed)
    carries in a tree over 2^height leaves with cap parameter ``log_cap``."""
    s0 = leaf_set(indices)
    return count_nodes(s0, int(height) - cap_height(height, log_cap))


def check_u32_matrix(a, cols: int, what: str, table) -> np.ndarray:
    """A 2-d array of ``cols`` columns of field elements (caps, digests, multiproof
    nodes) as contiguous uint32, ShapeError otherwise; shared with verifier.mmcs."""
    a = np.asarray(a)
    if a.ndim != 2 or a.shape[1] != cols:
        raise ShapeError(f"{what}: shape {a.shape}, expected (*, {cols})", table)
    if a.size and (a.dtype.kind not in "ui" or int(a.min()) < 0 or int(a.max()) >= P):
        raise ShapeError(f"{what}: holds a value that is not a field element", table)
    return np.ascontiguousarray(a, dtype=np.uint32)


def verify_multiproof(cap, leaf_digests, indices, nodes, height: int, log_cap: int,
                      what: str = "tree", table: str | None = None) -> None:
    """Authenticate the leaf digests uint32[k, 8] at the sorted distinct ``indices``
    (k of them, :func:`leaf_set`) of a tree over 2^height leaves against its ``cap``
    (uint32[2^c, 8]) with the multiproof ``nodes`` (uint32[m, 8], protocol order).

    Raises :class:`ShapeError` for a cap, digest or node array of the wrong shape (the
    node count m follows from the indices: :func:`multiproof_size`) -- before any
    hashing -- and :class:`MerkleError` when the recomputed level-(h-c) nodes differ from
    the cap's entries."""
    height = int(height)
    idx = np.asarray(indices, dtype=np.int64).reshape(-1)
    if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= (1 << height)):
        raise ValueError(f"{what}: leaf index out of range for 2^{height} leaves")
    if idx.size > 1 and not bool(np.all(idx[1:] > idx[:-1])):
        raise ValueError(f"{what}: indices must be sorted and distinct (leaf_set)")
    c = cap_height(height, log_cap)
    cap = check_u32_matrix(cap, 8, f"{what} cap", table)
    if cap.shape[0] != 1 << c:
        raise ShapeError(f"{what} cap: {cap.shape[0]} nodes, expected {1 << c}", table)
    digests = check_u32_matrix(leaf_digests, 8, f"{what} leaf digests", table)
    if digests.shape[0] != idx.size:
        raise ShapeError(f"{what}: {digests.shape[0]} opened leaves, expected {idx.size}", table)
    nodes = check_u32_matrix(nodes, 8, f"{what} multiproof nodes", table)
    m = count_nodes(idx, height - c)
    if nodes.shape[0] != m:
        raise ShapeError(f"{what} multiproof: {nodes.shape[0]} nodes, expected {m}", table)
    if idx.size == 0:
        return
    top, computed = multiproof_top(digests, idx, nodes, height - c)
    bad = np.flatnonzero(np.any(computed != cap[top], axis=1))
    if bad.size:
        raise MerkleError(f"{what}: the opening does not authenticate (cap entry "
                          f"{int(top[bad[0]])} differs)", table)


def check_rows(rows, what: str, table: str | None = None, count: int | None = None) -> np.ndarray:
    """Opened rows as a 2-d array of field elements, ShapeError otherwise: ``count`` rows
    when given, a width > 0 (unless ``count`` is 0), every value in [0, p)."""
    rows = np.asarray(rows)
    if (rows.ndim != 2 or (count is not None and rows.shape[0] != count)
            or (rows.shape[1] == 0 and (count is None or count))):
        want = f"({count}, w > 0)" if count is not None else "a width > 0"
        raise ShapeError(f"{what}: opened rows of shape {rows.shape}, expected {want}", table)
    if rows.size and (rows.dtype.kind not in "ui" or int(rows.min()) < 0 or int(rows.max()) >= P):
        raise ShapeError(f"{what}: an opened row holds a value that is not a field element", table)
    return rows


def check_opening(cap, rows, indices, nodes, height: int, log_cap: int,
                  what: str = "tree", table: str | None = None) -> None:
    """Authenticate opened rows uint32[k, w] (one per index of ``indices``, sorted and
    distinct) against a cap: leaf digests (the sponge of each row), then
    :func:`verify_multiproof`.  ShapeError / MerkleError as there."""
    idx = np.asarray(indices, dtype=np.int64).reshape(-1)
    rows = check_rows(rows, what, table, idx.size)
    digests = hash_rows(rows) if idx.size else np.zeros((0, 8), np.uint32)
    verify_multiproof(cap, digests, idx, nodes, height, log_cap, what, table)


def cap_of(matrix: np.ndarray, log_cap: int) -> np.ndarray:
    """Reference cap of a full tree over the rows of ``matrix`` (n a power of two); for
    tests and small commitments, not the verifier's hot path."""
    from .poseidon2 import compress
    level = hash_rows(matrix)
    h = int(level.shape[0]).bit_length() - 1
    for _ in range(h - cap_height(h, log_cap)):
        level = compress(level[0::2], level[1::2])
    return level


def warm_kernels() -> None:
    """Load (or compile, on a cold cache) the kernels verify uses, like the permutation's."""
    count_nodes(np.zeros(1, np.int64), 1)
    multiproof_top(np.zeros((1, 8), np.uint32), np.zeros(1, np.int64),
                   np.zeros((1, 8), np.uint32), 1)


# cache hits start numba's runtime only, not its compiler (steadfast/_jit_cache.py)
adopt(globals(), depends=("poseidon2.py",))
