"""The mixed-height Merkle commitment (prover side, proof format 6; /work/tools/mmcs_spec.md
"The mixed tree (exact)").

Participants (a list, table order) each bring the leaf digests of one matrix,
uint32[2^h_t, 8] (h_t: log2 of its row count).  With H = max h_t the tree has levels
0 .. H, level l holding 2^(H-l) nodes N_l[j]:

* N_0[j] = the leaf j of the first height-H participant, then folded with every further
  height-H participant in table order: N_0[j] = compress(N_0[j], leaf_t[j]);
* N_l[j] = compress(N_(l-1)[2j], N_(l-1)[2j+1]), then folded with every participant of
  height H - l in table order: N_l[j] = compress(N_l[j], leaf_t[j]).

A single participant gives exactly today's tree (kernels.merkle).  The cap height is
c = min(log_cap, min h_t) (:func:`mixed_cap_height`), so every injection lies at or below
the cap; the cap is level H - c, the multiproof is today's rule over (S_0, H, c)
(:func:`kernels.multiproof.multiproof_plan`).

All levels live in one flat uint32[2^(H+1) - 1, 8] array laid out like a
:class:`kernels.merkle.MerkleTree` (``level_offsets(H)``); each level is one batched
compression plus one per participant injected there.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .field import P
from .merkle import level_offsets
from .multiproof import multiproof_plan
from .poseidon2 import DIGEST, WIDTH, _sponge

__all__ = ["mixed_cap_height", "MixedTree"]


def _check_heights(heights) -> list[int]:
    hs = [int(h) for h in heights]
    if not hs:
        raise ValueError("mixed tree: no participants")
    if any(h < 0 for h in hs):
        raise ValueError(f"mixed tree: negative height in {hs}")
    if any(int(h) != h for h in heights):
        raise ValueError(f"mixed tree: heights must be integers, got {list(heights)}")
    return hs


def mixed_cap_height(heights: Sequence[int], log_cap: int) -> int:
    """c = min(log_cap, min_t h_t): the cap of the mixed tree has 2^c nodes."""
    hs = _check_heights(heights)
    if int(log_cap) < 0:
        raise ValueError(f"mixed tree: log_cap {log_cap} < 0")
    return min(int(log_cap), min(hs))


def _fold_into(level: np.ndarray, leaf: np.ndarray) -> None:
    """level[j] = compress(level[j], leaf[j]) for every j, in place (both uint32[m, 8],
    canonical, C-contiguous)."""
    pairs = np.concatenate([level, leaf], axis=1)          # a fresh (m, 16) array
    _sponge(pairs, level, WIDTH)


class MixedTree:
    """A mixed-height Merkle tree: every node of levels 0 .. H in one flat array (leaves'
    level first, root last), and the participants' heights.  The participants' leaf arrays
    are not kept."""

    __slots__ = ("_nodes", "_height", "_heights")

    def __init__(self, nodes: np.ndarray, heights: Sequence[int]):
        hs = _check_heights(heights)
        H = max(hs)
        if nodes.shape != ((2 << H) - 1, DIGEST) or nodes.dtype != np.uint32:
            raise ValueError(f"nodes: expected uint32{((2 << H) - 1, DIGEST)}, got "
                             f"{nodes.dtype}{nodes.shape}")
        v = nodes.view()
        v.setflags(write=False)
        object.__setattr__(self, "_nodes", v)
        object.__setattr__(self, "_height", H)
        object.__setattr__(self, "_heights", tuple(hs))

    def __setattr__(self, name, value):
        raise AttributeError("MixedTree is immutable")

    # -- construction -----------------------------------------------------------------
    @classmethod
    def build(cls, heights: Sequence[int], leaves: Sequence[np.ndarray]) -> "MixedTree":
        """The tree over ``leaves[t]`` uint32[2^heights[t], 8] (participants in table
        order).  ValueError on an empty list, a count or shape mismatch, or a value that
        is not a canonical field element; TypeError on a non-uint32 array."""
        hs = _check_heights(heights)
        leaves = list(leaves)
        if len(leaves) != len(hs):
            raise ValueError(f"mixed tree: {len(hs)} heights but {len(leaves)} leaf arrays")
        for t, (h, lf) in enumerate(zip(hs, leaves)):
            if not isinstance(lf, np.ndarray):
                raise TypeError(f"leaves[{t}]: expected a numpy uint32 array, got "
                                f"{type(lf).__name__}")
            if lf.dtype != np.uint32:
                raise TypeError(f"leaves[{t}]: expected dtype uint32, got {lf.dtype}")
            if lf.shape != (1 << h, DIGEST):
                raise ValueError(f"leaves[{t}]: shape {lf.shape}, expected {(1 << h, DIGEST)} "
                                 f"(height {h})")
            if lf.size and int(lf.max()) >= P:
                raise ValueError(f"leaves[{t}]: values must be canonical field elements < {P}")
        H = max(hs)
        offs = level_offsets(H)
        nodes = np.empty(((2 << H) - 1, DIGEST), np.uint32)
        by_level: dict[int, list[int]] = {}
        for t, h in enumerate(hs):
            by_level.setdefault(H - h, []).append(t)
        # level 0: the first height-H participant, folded with the further ones
        first, *rest = by_level[0]
        lvl0 = nodes[offs[0]:offs[0] + (1 << H)]
        lvl0[...] = leaves[first]
        for t in rest:
            _fold_into(lvl0, np.ascontiguousarray(leaves[t]))
        for lv in range(1, H + 1):
            m = 1 << (H - lv)
            below = nodes[offs[lv - 1]:offs[lv - 1] + 2 * m].reshape(m, WIDTH)
            cur = nodes[offs[lv]:offs[lv] + m]
            _sponge(below, cur, WIDTH)
            for t in by_level.get(lv, ()):
                _fold_into(cur, np.ascontiguousarray(leaves[t]))
        del leaves
        return cls(nodes, hs)

    # -- accessors ----------------------------------------------------------------------
    @property
    def height(self) -> int:
        """H = max_t h_t."""
        return self._height

    @property
    def heights(self) -> tuple[int, ...]:
        """The participants' heights, table order."""
        return self._heights

    @property
    def root(self) -> np.ndarray:
        """N_H[0], uint32[8] (a copy)."""
        return np.array(self._nodes[-1], dtype=np.uint32)

    @property
    def flat(self) -> np.ndarray:
        """All nodes, uint32[2^(H+1) - 1, 8] (read-only), level 0 first, root last."""
        return self._nodes

    @property
    def stored_bytes(self) -> int:
        return int(self._nodes.nbytes)

    def level(self, lv: int) -> np.ndarray:
        """Level ``lv`` (0 .. H): uint32[2^(H-lv), 8] (read-only view)."""
        if not 0 <= lv <= self._height:
            raise ValueError(f"level {lv} outside 0 .. {self._height}")
        off = int(level_offsets(self._height)[lv])
        return self._nodes[off:off + (1 << (self._height - lv))]

    def cap_height(self, log_cap: int) -> int:
        return mixed_cap_height(self._heights, log_cap)

    def cap(self, log_cap: int) -> np.ndarray:
        """The commitment: level H - c in index order, uint32[2^c, 8] (a copy)."""
        c = self.cap_height(log_cap)
        return np.array(self.level(self._height - c), dtype=np.uint32)

    def nodes(self, top_indices, log_cap: int) -> np.ndarray:
        """The multiproof of the level-0 indices ``top_indices`` (any order, repeats
        allowed; S_0 is their sorted distinct set) against :meth:`cap`: uint32[m, 8] in
        protocol order."""
        c = self.cap_height(log_cap)
        levels, pos = multiproof_plan(np.asarray(top_indices), self._height, c)
        offs = level_offsets(self._height)
        return np.ascontiguousarray(self._nodes[offs[levels] + pos], dtype=np.uint32)

    def __repr__(self) -> str:
        return f"MixedTree(H={self._height}, heights={list(self._heights)})"
