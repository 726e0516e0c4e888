"""Verification of mixed-height Merkle openings (proof format 6;
/work/tools/mmcs_spec.md "The mixed tree (exact)").  Independent of the prover: numpy and
the verifier's own Poseidon2 only.

The tree: participants (table order) with heights h_t, H = max h_t; level 0 is the first
height-H participant's leaf digests folded with the further height-H participants
(compress(N, leaf_t)); level l is compress(left child, right child), then folded with every
participant of height H - l in table order.  Cap height c = min(log_cap, min h_t); the
commitment is level H - c.  The multiproof is today's (:mod:`verifier.merkle`) over
(S_0, H, c): for l = 0 .. H-c-1, each j of S_l ascending whose sibling j^1 is not in S_l
supplies node (l, j^1).

Participant t's opened rows sit at S_(H-h_t) = sorted distinct {j >> (H - h_t) : j in S_0}:
their digests are injected at level H - h_t while the verifier walks up.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .errors import MerkleError, ShapeError
from .merkle import check_u32_matrix, multiproof_size
from .poseidon2 import compress

__all__ = ["mixed_cap_height", "mixed_multiproof_size", "participant_indices", "verify_mixed"]


def _heights(heights) -> list[int]:
    hs = [int(h) for h in heights]
    if not hs or any(h < 0 for h in hs):
        raise ValueError(f"mixed tree: heights must be a non-empty list of integers >= 0, "
                         f"got {list(heights)}")
    return hs


def mixed_cap_height(heights: Sequence[int], log_cap: int) -> int:
    """c = min(log_cap, min_t h_t)."""
    return min(int(log_cap), min(_heights(heights)))


def _top_set(top_indices, H: int, what: str) -> np.ndarray:
    s0 = np.unique(np.asarray(top_indices, dtype=np.int64).reshape(-1))
    if s0.size and (int(s0[0]) < 0 or int(s0[-1]) >= (1 << H)):
        raise ValueError(f"{what}: leaf index out of range for 2^{H} leaves")
    return s0


def participant_indices(top_indices, heights: Sequence[int], t: int) -> np.ndarray:
    """S_(H-h_t): the sorted distinct rows of participant t opened by ``top_indices``."""
    hs = _heights(heights)
    H = max(hs)
    return np.unique(_top_set(top_indices, H, "mixed tree") >> (H - hs[t]))


def mixed_multiproof_size(top_indices, heights: Sequence[int], log_cap: int) -> int:
    """m: the number of nodes the multiproof of ``top_indices`` (any order, repeats
    allowed) carries in the mixed tree of these heights."""
    hs = _heights(heights)
    H = max(hs)
    c = mixed_cap_height(hs, log_cap)
    return multiproof_size(_top_set(top_indices, H, "mixed tree"), H, c)


def verify_mixed(cap, heights: Sequence[int], leaf_digests: Sequence[np.ndarray], top_indices,
                 nodes, log_cap: int, what: str, table: str | None = None) -> None:
    """Authenticate every participant's opened leaf digests against the mixed tree's cap.

    ``leaf_digests[t]`` uint32[|S_t|, 8] are participant t's digests at
    S_t = sorted distinct {j >> (H - h_t) : j in top_indices}; ``nodes`` uint32[m, 8] the
    multiproof (protocol order); ``cap`` uint32[2^c, 8].

    ShapeError (before any hashing) for a cap, digest or node array of the wrong shape or
    count, or a value that is not a field element; MerkleError naming ``what`` when the
    recomputed level-(H-c) nodes differ from the cap.  ValueError for a caller's mistake
    (no heights, an index out of range)."""
    hs = _heights(heights)
    H = max(hs)
    c = min(int(log_cap), min(hs))
    s0 = _top_set(top_indices, H, what)

    cap = check_u32_matrix(cap, 8, f"{what} cap", table)
    if cap.shape[0] != 1 << c:
        raise ShapeError(f"{what} cap: {cap.shape[0]} nodes, expected {1 << c}", table)
    leaf_digests = list(leaf_digests)
    if len(leaf_digests) != len(hs):
        raise ShapeError(f"{what}: {len(leaf_digests)} participants' leaf digests, expected "
                         f"{len(hs)}", table)
    digests = []
    for t, (h, d) in enumerate(zip(hs, leaf_digests)):
        d = check_u32_matrix(d, 8, f"{what} leaf digests of participant {t}", table)
        k = int(np.unique(s0 >> (H - h)).size)
        if d.shape[0] != k:
            raise ShapeError(f"{what}: participant {t} has {d.shape[0]} opened leaves, "
                             f"expected {k}", table)
        digests.append(d)
    nodes = check_u32_matrix(nodes, 8, f"{what} multiproof nodes", table)
    m = multiproof_size(s0, H, c)
    if nodes.shape[0] != m:
        raise ShapeError(f"{what} multiproof: {nodes.shape[0]} nodes, expected {m}", table)
    if s0.size == 0:
        return

    by_level: dict[int, list[int]] = {}
    for t, h in enumerate(hs):
        by_level.setdefault(H - h, []).append(t)

    # level 0: the height-H participants folded in table order
    first, *rest = by_level[0]
    idx = s0
    cur = digests[first]
    for t in rest:
        cur = compress(cur, digests[t])
    ptr = 0
    for lv in range(H - c):
        n = idx.size
        # j^1 is in S_l (sorted, distinct) iff it is j's neighbour in the array
        has_sib = np.zeros(n, bool)
        if n > 1:
            pair = idx[1:] == (idx[:-1] ^ 1)
            has_sib[:-1] |= pair
            has_sib[1:] |= pair
        parents = np.unique(idx >> 1)
        pi = np.searchsorted(parents, idx >> 1)
        slot = idx & 1
        children = np.empty((parents.size, 2, 8), np.uint32)
        children[pi, slot] = cur
        need = np.flatnonzero(~has_sib)                   # ascending j: proof order
        children[pi[need], 1 - slot[need]] = nodes[ptr:ptr + need.size]
        ptr += need.size
        cur = compress(children[:, 0], children[:, 1])
        idx = parents
        for t in by_level.get(lv + 1, ()):
            cur = compress(cur, digests[t])
    bad = np.flatnonzero(np.any(cur != cap[idx], axis=1))
    if bad.size:
        raise MerkleError(f"{what}: the opening does not authenticate (cap entry "
                          f"{int(idx[bad[0]])} differs)", table)
