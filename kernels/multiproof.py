"""Merkle caps and multiproofs over a :class:`kernels.merkle.MerkleTree` (prover side,
proof format 3; docs/protocol.md §3).

A tree over 2^h leaves has levels 0 (leaf digests) .. h (root).  With cap height
c = min(log_cap, h) the **commitment** is the cap: the 2^c nodes of level h - c, in index
order (uint32[2^c, 8]).  The **multiproof** of a set of leaf indices lists, level by level
from the leaves (l = 0 .. h-c-1), for each j of S_l ascending whose sibling j^1 is not in
S_l, the node (l, j^1); S_0 = the sorted distinct indices, S_{l+1} = sorted distinct
{j >> 1}.  The verifier recomputes the nodes of S_{h-c} and compares them with the cap.

Everything here is vectorised numpy over the tree's flat node array (``tree.nodes``,
leaves first, root last; ``tree.log_n``), so it works for any object with those two
attributes (the host trees of :mod:`prover.core.stages` included).
"""
from __future__ import annotations

import numpy as np

from .merkle import level_offsets

__all__ = ["cap_height", "cap", "sorted_unique", "multiproof_plan", "multiproof_count",
           "multiproof_nodes"]


def cap_height(log_n: int, log_cap: int) -> int:
    """c = min(log_cap, h) for a tree over 2^h leaves."""
    if log_cap < 0 or log_n < 0:
        raise ValueError(f"cap height of a tree of height {log_n} with log_cap {log_cap}")
    return min(int(log_cap), int(log_n))


def cap(tree, log_cap: int) -> np.ndarray:
    """The commitment of ``tree``: its level h - c, uint32[2^c, 8] (a copy)."""
    h = tree.log_n
    c = cap_height(h, log_cap)
    off = int(level_offsets(h)[h - c])
    return np.array(tree.nodes[off:off + (1 << c)], dtype=np.uint32)


def sorted_unique(indices, n: int) -> np.ndarray:
    """The sorted distinct indices (int64), each checked to lie in [0, n)."""
    idx = np.asarray(indices)
    if idx.size == 0:
        return np.zeros(0, np.int64)
    if idx.dtype.kind not in "iu" or idx.ndim != 1:
        raise ValueError(f"indices: expected a 1-d integer array, got {idx.dtype} {idx.shape}")
    idx = np.unique(idx.astype(np.int64))
    if idx[0] < 0 or idx[-1] >= n:
        raise ValueError(f"indices: leaf index out of range [0, {n})")
    return idx


def multiproof_plan(indices, log_n: int, log_cap: int) -> tuple[np.ndarray, np.ndarray]:
    """(levels int64[m], positions int64[m]): the nodes the multiproof of ``indices``
    supplies, in proof order.  ``indices`` need not be sorted or distinct."""
    s = sorted_unique(indices, 1 << log_n)
    depth = log_n - cap_height(log_n, log_cap)
    lv, pos = [], []
    for level in range(depth):
        if s.size == 0:
            break
        # j^1 is in S (sorted, distinct) iff it is j's neighbour in the array
        has_sib = np.zeros(s.size, bool)
        if s.size > 1:
            pair = (s[1:] == (s[:-1] ^ 1))            # s[k], s[k+1] are siblings
            has_sib[:-1] |= pair
            has_sib[1:] |= pair
        need = s[~has_sib] ^ 1
        lv.append(np.full(need.size, level, np.int64))
        pos.append(need)
        s = np.unique(s >> 1)
    if not lv:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(lv), np.concatenate(pos)


def multiproof_count(indices, log_n: int, log_cap: int) -> int:
    """m, the number of nodes in the multiproof of ``indices``."""
    return int(multiproof_plan(indices, log_n, log_cap)[0].size)


def multiproof_nodes(tree, indices, log_cap: int) -> np.ndarray:
    """The multiproof of ``indices`` against ``cap(tree, log_cap)``: uint32[m, 8]."""
    levels, pos = multiproof_plan(indices, tree.log_n, log_cap)
    offs = level_offsets(tree.log_n)
    return np.ascontiguousarray(np.asarray(tree.nodes)[offs[levels] + pos], dtype=np.uint32)
