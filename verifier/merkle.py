"""Merkle path verification for the verifier (SPEC §3), batched over queries.

Conventions (shared with the prover's trees, and written in docs/protocol.md):

* leaf i = sponge(row i) (:func:`verifier.poseidon2.hash_rows`);
* inner node = compress(left, right); the root is the single node of the top level;
* an opening path for leaf ``i`` lists the siblings bottom-up: ``path[0]`` is the
  sibling of the leaf (index ``i ^ 1``), ``path[l]`` the sibling at level ``l``; at level
  ``l`` the current node is the left child iff bit ``l`` of ``i`` is 0.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .poseidon2 import _from_mont, _permute_lanes, _to_mont, hash_rows


@njit(cache=True)
def _roots_kernel(digests, idx, paths, order):
    # Queries are visited in index order (``order`` sorts idx), so queries sharing a node
    # at any level are adjacent: the first of each run (its leader) is hashed, the others
    # must carry the same current digest and sibling (else both are marked bad).  All of a
    # level's leaders are permuted together as one lane-major batch.
    q, depth = paths.shape[0], paths.shape[1]
    cur = np.empty((q, 8), dtype=np.uint64)          # current digests, as given / canonical
    for r in range(q):
        for i in range(8):
            cur[r, i] = np.uint64(digests[r, i])
    bad = np.zeros(q, dtype=np.bool_)
    st = np.empty((16, max(q, 1)), dtype=np.uint64)  # lane-major batch, Montgomery form
    leaders = np.empty(max(q, 1), dtype=np.int64)
    for level in range(depth):
        # pass 1: followers must agree with their run's leader (current digest, sibling)
        lead = -1
        for k in range(q):
            r = order[k]
            if lead >= 0 and (idx[r] >> level) == (idx[lead] >> level):
                for i in range(8):
                    if cur[r, i] != cur[lead, i] or paths[r, level, i] != paths[lead, level, i]:
                        bad[r] = True
                        bad[lead] = True
            else:
                lead = r
        # pass 2: gather each leader with its sibling (left || right) into column nl
        nl = 0
        lead = -1
        for k in range(q):
            r = order[k]
            if lead >= 0 and (idx[r] >> level) == (idx[lead] >> level):
                continue
            lead = r
            leaders[nl] = r
            off_cur = 8 if (idx[r] >> level) & 1 else 0
            off_sib = 8 - off_cur
            for i in range(8):
                st[off_cur + i, nl] = _to_mont(cur[r, i])
                st[off_sib + i, nl] = _to_mont(np.uint64(paths[r, level, i]))
            nl += 1
        # pass 3: permute the batch, the leaders take lanes 0..7; followers copy
        _permute_lanes(st, nl)
        for j in range(nl):
            r = leaders[j]
            for i in range(8):
                cur[r, i] = _from_mont(st[i, j])
        lead = -1
        for k in range(q):
            r = order[k]
            if lead >= 0 and (idx[r] >> level) == (idx[lead] >> level):
                for i in range(8):
                    cur[r, i] = cur[lead, i]
            else:
                lead = r
    out = np.empty((q, 8), dtype=np.uint32)
    for r in range(q):
        for i in range(8):
            out[r, i] = np.uint32(0xFFFFFFFF) if bad[r] else np.uint32(cur[r, i])
    return out


def roots_from_paths(digests: np.ndarray, indices: np.ndarray, paths: np.ndarray) -> np.ndarray:
    """Fold every (leaf digest, index, path) up to a root: uint32[q, 8].

    One numba kernel; queries that reach the same node are hashed once.  They are merged
    only if their current digests AND their siblings agree; where two queries at one
    node disagree, both get an all-ones "root" (never a valid digest: every element
    >= p), so both fail the comparison with the real root.  A merged query shares a
    computation that ends at the root, so it passes only if it is valid.
    """
    digests = np.ascontiguousarray(digests, dtype=np.uint32).reshape(-1, 8)
    idx = np.ascontiguousarray(indices, dtype=np.int64).reshape(-1)
    paths = np.ascontiguousarray(paths, dtype=np.uint32)
    order = np.argsort(idx, kind="stable")
    return _roots_kernel(digests, idx, paths, order)


def check_rows(root: np.ndarray, rows: np.ndarray, indices: np.ndarray,
               paths: np.ndarray) -> np.ndarray:
    """Boolean mask: which opened rows (uint32[q, w]) authenticate against ``root``."""
    digests = hash_rows(rows)
    roots = roots_from_paths(digests, indices, paths)
    return np.all(roots == np.asarray(root, dtype=np.uint32)[None, :], axis=1)


def merkle_root(matrix: np.ndarray) -> np.ndarray:
    """Reference root of a full tree over the rows of ``matrix`` (n a power of two);
    used by tests and by small commitments, not on the verifier's hot path."""
    from .poseidon2 import compress
    level = hash_rows(matrix)
    while level.shape[0] > 1:
        level = compress(level[0::2], level[1::2])
    return level[0]


# Load (or compile, on a cold cache) the path kernel at import, like the permutation.
roots_from_paths(np.zeros((1, 8), np.uint32), np.zeros(1, np.int64), np.zeros((1, 1, 8), np.uint32))
