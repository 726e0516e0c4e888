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

from .poseidon2 import hash_rows, permute


def roots_from_paths(digests: np.ndarray, indices: np.ndarray, paths: np.ndarray) -> np.ndarray:
    """Fold every (leaf digest, index, path) up to a root: uint32[q, 8].

    One batched permutation per level.  Queries that reach the same node are hashed
    once: they are merged only if their current digests AND their siblings agree.  Where
    two queries at one node disagree, both get an all-ones "root" (never a valid digest:
    every element >= p), so both fail the comparison with the real root; a query that is
    merged shares a computation that ends at the root, so it passes only if valid.
    """
    cur = np.asarray(digests, dtype=np.uint32).reshape(-1, 8)
    idx = np.asarray(indices, dtype=np.int64).reshape(-1)
    paths = np.asarray(paths, dtype=np.uint32)
    bad = np.zeros(cur.shape[0], dtype=bool)
    for level in range(paths.shape[1]):
        node = idx >> level
        uniq, first, inv = np.unique(node, return_index=True, return_inverse=True)
        inv = inv.reshape(-1)
        sib = paths[:, level]
        rep = first[inv]
        diff = np.any(cur != cur[rep], axis=1) | np.any(sib != sib[rep], axis=1)
        bad |= diff
        bad[rep[diff]] = True
        c, s = cur[first], sib[first]
        right = (uniq & 1).astype(bool)[:, None]            # node is a right child
        state = np.empty((uniq.size, 16), dtype=np.uint32)
        state[:, :8] = np.where(right, s, c)
        state[:, 8:] = np.where(right, c, s)
        cur = permute(state)[:, :8][inv]
    cur = np.ascontiguousarray(cur)
    cur[bad] = 0xFFFFFFFF
    return cur


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
