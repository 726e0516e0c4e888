"""Merkle commitments for the prover: a thin adapter over ``kernels.merkle``.

``commit(rows)`` -> a tree with ``.root`` (uint32[8]) and ``.open(indices) ->
(rows uint32[q, w], paths uint32[q, log n, 8])``, paths bottom-up (``paths[:, 0]`` is the
leaf's sibling), exactly the convention :mod:`verifier.merkle` checks.  The tree keeps a
view of the committed matrix (no copy): callers must not modify it afterwards.
"""
from __future__ import annotations

import numpy as np

from ...kernels.merkle import commit as _kernel_commit


def commit(rows: np.ndarray):
    """Commit to the rows of a uint32[n, w] matrix (n a power of two)."""
    return _kernel_commit(np.ascontiguousarray(rows, dtype=np.uint32))
