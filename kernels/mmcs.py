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

Only the levels p .. H are kept (p = ``prune``, default ``max(0, min(6, H - 8))`` like the
per-table trees of prover/core/ldetree.py, so every cap level c <= 8 is kept), in one flat
uint32[2^(H-p+1) - 1, 8] array laid out like a :class:`kernels.merkle.MerkleTree` of height
H - p (``level_offsets(H - p)``).  A node below level p is recomputed at opening time from
its group: the 2^p level-0 positions under one level-p node, i.e. the committed rows of the
participants taller than H - p under it (``rows_of``), hashed and folded exactly as in the
build.  The build itself runs group-chunk by group-chunk, so no full-height temporary is
allocated besides the caller's leaf arrays.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .field import P
from .host_pool import run_ranges
from .merkle import level_offsets
from .multiproof import multiproof_plan
from .poseidon2 import DIGEST, WIDTH, _sponge, sponge_hash

__all__ = ["mixed_cap_height", "MixedTree", "PRUNE_LEVELS", "default_prune"]

#: levels of a mixed tree dropped after the build (as prover.core.ldetree.PRUNE_LEVELS)
PRUNE_LEVELS = 6
#: the highest cap height the default pruning keeps (every cap level c <= 8 is kept)
_MAX_CAP = 8
#: level-0 positions folded per chunk of the build
_BUILD_CHUNK = 1 << 15


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


def default_prune(H: int) -> int:
    """The default number of dropped levels of a tree of height H: max(0, min(6, H - 8))."""
    return max(0, min(PRUNE_LEVELS, int(H) - _MAX_CAP))


def _fold_into(level: np.ndarray, leaf: np.ndarray, serial: bool = False) -> None:
    """level[j] = compress(level[j], leaf[j]) for every j, in place (both uint32[m, 8],
    canonical, C-contiguous; the sponge reads the pair from both arrays, no concatenated
    copy).  ``serial``: on the calling thread only."""
    _sponge(level, level, WIDTH, m2=leaf, serial=serial)


class MixedTree:
    """A mixed-height Merkle tree: the nodes of levels p .. H in one flat array (level p
    first, root last), the participants' heights, and -- when p > 0 -- the ``rows_of``
    callable that gives back the committed rows of a group for the nodes below level p.
    The participants' leaf arrays are not kept."""

    __slots__ = ("_nodes", "_height", "_heights", "_prune", "_rows_of")

    def __init__(self, nodes: np.ndarray, heights: Sequence[int], prune: int = 0,
                 rows_of=None):
        hs = _check_heights(heights)
        H = max(hs)
        p = int(prune)
        if not 0 <= p <= H:
            raise ValueError(f"mixed tree: prune {prune} outside 0 .. H = {H}")
        if p > 0 and rows_of is None:
            raise ValueError(f"mixed tree: prune {p} > 0 needs rows_of (the committed rows "
                             f"of a group, to recompute the levels below {p})")
        K = H - p
        if nodes.shape != ((2 << K) - 1, DIGEST) or nodes.dtype != np.uint32:
            raise ValueError(f"nodes: expected uint32{((2 << K) - 1, DIGEST)}, got "
                             f"{nodes.dtype}{nodes.shape}")
        v = nodes.view()
        v.setflags(write=False)
        object.__setattr__(self, "_nodes", v)
        object.__setattr__(self, "_height", H)
        object.__setattr__(self, "_heights", tuple(hs))
        object.__setattr__(self, "_prune", p)
        object.__setattr__(self, "_rows_of", rows_of if p > 0 else None)

    def __setattr__(self, name, value):
        raise AttributeError("MixedTree is immutable")

    @property
    def rows_of(self):
        """The ``rows_of`` callable the tree rehashes its pruned levels with (None at p = 0)."""
        return self._rows_of

    # -- construction -----------------------------------------------------------------
    @classmethod
    def build(cls, heights: Sequence[int], leaves: Sequence[np.ndarray],
              prune: int | None = None, rows_of=None) -> "MixedTree":
        """The tree over ``leaves[t]`` uint32[2^heights[t], 8] (participants in table
        order), keeping levels >= p (p = ``prune``, default :func:`default_prune` (H)).

        ``rows_of(t, groups, b)`` -> uint32[len(groups), 2^b, w_t]: the committed rows of
        participant t (index in this build's order) at tree positions groups[g] 2^b ..
        groups[g] 2^b + 2^b - 1 (``groups``: sorted distinct int64); leaf_t[j] =
        hash_rows(row j).  Required when p > 0 (it is called at opening time, for the
        participants taller than H - p only); unused when p == 0 (every level kept).

        ValueError on an empty list, a count or shape mismatch, a value that is not a
        canonical field element, a prune outside 0 .. H, or p > 0 without rows_of;
        TypeError on a non-uint32 array."""
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
        p = default_prune(H) if prune is None else int(prune)
        if p != prune and prune is not None:
            raise ValueError(f"mixed tree: prune must be an integer, got {prune!r}")
        if not 0 <= p <= H:
            raise ValueError(f"mixed tree: prune {p} outside 0 .. H = {H}")
        if p > 0 and rows_of is None:
            raise ValueError(f"mixed tree: prune {p} > 0 needs rows_of (the committed rows "
                             f"of a group, to recompute the levels below {p})")
        if p > 0 and not callable(rows_of):
            raise TypeError(f"mixed tree: rows_of must be callable, got {type(rows_of).__name__}")
        by_level = _by_level(hs)
        K = H - p
        offs = level_offsets(K)
        nodes = np.empty(((2 << K) - 1, DIGEST), np.uint32)
        # levels 0 .. p, a chunk of groups (level-p positions) at a time: the chunks on
        # the host pool, each on one thread from its leaves to its level-p nodes (its
        # working set stays in that core's cache, and no compression is split into
        # pool jobs too small to pay for their hand-off); each writes its own nodes
        n_groups = 1 << K
        step = max(1, min(n_groups, _BUILD_CHUNK >> p))
        top = nodes[offs[0]:offs[0] + n_groups]

        def chunks(c0, c1, lvs=leaves):
            for c in range(c0, c1):
                g0, g1 = c * step, min(n_groups, (c + 1) * step)

                def digests(t, b, g0=g0, g1=g1):
                    return lvs[t].reshape(-1, 1 << b, DIGEST)[g0:g1]

                top[g0:g1] = _group_levels(by_level, digests, g1 - g0, p, p,
                                           serial=True)[p].reshape(-1, DIGEST)

        run_ranges(chunks, -(-n_groups // step), 1)
        # levels p + 1 .. H: one batched compression each, then the injections
        for lv in range(p + 1, H + 1):
            k = lv - p
            m = 1 << (H - lv)
            below = nodes[offs[k - 1]:offs[k - 1] + 2 * m].reshape(m, WIDTH)
            cur = nodes[offs[k]:offs[k] + m]
            _sponge(below, cur, WIDTH)
            for t in by_level.get(lv, ()):
                _fold_into(cur, np.ascontiguousarray(leaves[t]))
        del leaves
        return cls(nodes, hs, p, rows_of)

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
    def prune(self) -> int:
        """p: the lowest kept level (levels 0 .. p - 1 are recomputed when opened)."""
        return self._prune

    @property
    def root(self) -> np.ndarray:
        """N_H[0], uint32[8] (a copy)."""
        return np.array(self._nodes[-1], dtype=np.uint32)

    @property
    def flat(self) -> np.ndarray:
        """The kept nodes, uint32[2^(H-p+1) - 1, 8] (read-only), level p first, root last
        (p = 0: every node, laid out like a :class:`kernels.merkle.MerkleTree`)."""
        return self._nodes

    @property
    def stored_bytes(self) -> int:
        """Bytes of the kept levels."""
        return int(self._nodes.nbytes)

    def level(self, lv: int) -> np.ndarray:
        """Level ``lv`` (p .. H, a kept level): uint32[2^(H-lv), 8] (read-only view)."""
        H, p = self._height, self._prune
        if not 0 <= lv <= H:
            raise ValueError(f"level {lv} outside 0 .. {H}")
        if lv < p:
            raise ValueError(f"level {lv} is not kept (pruned below level {p})")
        off = int(level_offsets(H - p)[lv - p])
        return self._nodes[off:off + (1 << (H - lv))]

    def cap_height(self, log_cap: int) -> int:
        return mixed_cap_height(self._heights, log_cap)

    def _checked_cap_height(self, log_cap: int) -> int:
        c = self.cap_height(log_cap)
        if self._height - c < self._prune:
            raise ValueError(f"mixed tree: the cap of height {c} is level {self._height - c}, "
                             f"below the kept levels (>= {self._prune})")
        return c

    def cap(self, log_cap: int) -> np.ndarray:
        """The commitment: level H - c in index order, uint32[2^c, 8] (a copy).
        ValueError when level H - c is pruned (H - c < p)."""
        c = self._checked_cap_height(log_cap)
        return np.array(self.level(self._height - c), dtype=np.uint32)

    def nodes(self, top_indices, log_cap: int) -> np.ndarray:
        """The multiproof of the level-0 indices ``top_indices`` (any order, repeats
        allowed; S_0 is their sorted distinct set) against :meth:`cap`: uint32[m, 8] in
        protocol order.  Nodes below level p come from their groups' rows (``rows_of``,
        one call per participant taller than H - p, for every group needed at once)."""
        c = self._checked_cap_height(log_cap)
        levels, pos = multiproof_plan(np.asarray(top_indices), self._height, c)
        return self._nodes_at(np.asarray(levels, np.int64), np.asarray(pos, np.int64))

    def _nodes_at(self, levels: np.ndarray, pos: np.ndarray) -> np.ndarray:
        H, p = self._height, self._prune
        if p == 0:
            offs = level_offsets(H)
            return np.ascontiguousarray(self._nodes[offs[levels] + pos], dtype=np.uint32)
        out = np.empty((levels.size, DIGEST), np.uint32)
        hi = levels >= p
        if hi.any():
            offs = level_offsets(H - p)
            out[hi] = self._nodes[offs[levels[hi] - p] + pos[hi]]
        lo = np.flatnonzero(~hi)
        if lo.size:
            lv_lo, pos_lo = levels[lo], pos[lo]
            grp = pos_lo >> (p - lv_lo)
            groups = np.unique(grp)
            rows_of, hs = self._rows_of, self._heights

            def digests(t, b):
                rows = rows_of(t, groups, b)
                if not isinstance(rows, np.ndarray) or rows.ndim != 3 or \
                        rows.shape[:2] != (groups.size, 1 << b) or rows.shape[2] < 1:
                    got = getattr(rows, "shape", type(rows).__name__)
                    raise ValueError(f"rows_of({t}, <{groups.size} groups>, {b}): expected "
                                     f"uint32[{groups.size}, {1 << b}, w], got {got}")
                return sponge_hash(rows)

            lvls = _group_levels(_by_level(hs), digests, groups.size, p, p - 1)
            gi = np.searchsorted(groups, grp)
            local = pos_lo - (grp << (p - lv_lo))
            for lv in np.unique(lv_lo):
                sel = lv_lo == lv
                out[lo[sel]] = lvls[int(lv)][gi[sel], local[sel]]
        return out

    def __repr__(self) -> str:
        return f"MixedTree(H={self._height}, heights={list(self._heights)}, prune={self._prune})"


def _by_level(hs: Sequence[int]) -> dict[int, list[int]]:
    """level H - h_t -> the participants injected there, table order."""
    H = max(hs)
    by_level: dict[int, list[int]] = {}
    for t, h in enumerate(hs):
        by_level.setdefault(H - h, []).append(t)
    return by_level


def _group_levels(by_level: dict, digests, G: int, p: int, top: int,
                  serial: bool = False) -> list[np.ndarray]:
    """Levels 0 .. ``top`` (<= p) of G groups of the tree (a group: the 2^p level-0
    positions under one level-p node): [uint32[G, 2^(p-l), 8] for l = 0 .. top].
    ``digests(t, b)`` -> uint32[G, 2^b, 8]: participant t's leaf digests at the groups'
    2^b positions of its level (b = p - (H - h_t))."""
    first, *rest = by_level[0]
    cur = np.array(digests(first, p), dtype=np.uint32).reshape(G << p, DIGEST)
    for t in rest:
        _fold_into(cur, np.ascontiguousarray(digests(t, p), dtype=np.uint32).reshape(-1, DIGEST),
                   serial)
    out = [cur.reshape(G, 1 << p, DIGEST)]
    for lv in range(1, top + 1):
        b = p - lv
        nxt = np.empty((G << b, DIGEST), np.uint32)
        _sponge(cur.reshape(-1, WIDTH), nxt, WIDTH, serial=serial)
        for t in by_level.get(lv, ()):
            _fold_into(nxt, np.ascontiguousarray(digests(t, b), dtype=np.uint32).reshape(-1, DIGEST),
                       serial)
        cur = nxt
        out.append(cur.reshape(G, 1 << b, DIGEST))
    return out
