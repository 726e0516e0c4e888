"""Random leaf values for the AIR program evaluators' tests (air.program.evaluate /
evaluate_point): one value per distinct leaf, base or extension field by the leaf's kind,
with the field's edge values (0, 1, p - 1) mixed in."""
from __future__ import annotations

import numpy as np

from steadfast.air.field import P


def random_leaves(rng, ef_kinds, edge: float = 0.15):
    """leaf(op, payload) -> the same random value for the same leaf: uint64[4, 1] for an
    ``ef_kinds`` leaf, a uint64 scalar otherwise; a fraction ``edge`` of them 0, 1 or p - 1."""
    cache: dict = {}

    def leaf(op, payload):
        key = (op, payload if not isinstance(payload, list) else tuple(payload))
        if key not in cache:
            hit = rng.random() < edge
            if op in ef_kinds:
                v = rng.integers(0, P, (4, 1), dtype=np.uint64)
                if hit:
                    v[:, 0] = rng.choice([0, 1, P - 1], 4)
            else:
                v = np.uint64(rng.choice([0, 1, P - 1]) if hit else rng.integers(0, P))
            cache[key] = v
        return cache[key]
    return leaf
