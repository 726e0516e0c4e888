"""The Merkle tree of a committed LDE, held without its lowest levels (issue #12), and
the gathers that turn the column-major LDE (c, N) into committed rows (bit-reversed
order).  Split out of prover/core/stages.py; :class:`prover.core.stages.Committed` owns one."""
from __future__ import annotations

import numpy as np

from ...kernels import multiproof as mp
from ...kernels.lde_rows import gather_rows, leaf_digests
from ...kernels.ntt_host import bit_reverse_indices as _bitrev_index
from ...kernels.ntt_host import bit_reverse_permutation
from ...kernels.poseidon2 import RATE, _sponge

#: levels of an LDE tree's node array dropped after the commit (the leaves and the
#: levels just above): an opening rehashes the 2^PRUNE_LEVELS rows around each opened
#: row instead.  The node array then holds 64 N / 2^PRUNE_LEVELS bytes instead of 64 N
#: (issue #12: at 2^16 cycles the full trees outweighed the LDEs).
PRUNE_LEVELS = 6
#: tree positions hashed per call when an LDE is committed (one chunk's leaf digests are
#: the only per-row buffer, 4 MB, and none for a leaves-only commit; the rows are read
#: straight from the columns).  2^17: a 2^21-row LDE in 16 pool calls instead of 64 --
#: leaves-only commits of 2^21 x (34, 52, 20) columns at 15.0 M permutations/s against
#: 13.7 at 2^15 (docs/benchmarks.md, twentieth session)
_COMMIT_CHUNK = 1 << 17
#: a commit chunk is 2^_COMMIT_SPREAD runs of tree positions, one under each of the top
#: 2^_COMMIT_SPREAD subtrees, so that it reads 2^_COMMIT_SPREAD adjacent natural rows of
#: every column at once (16: one 64-byte line) -- see kernels/lde_rows.py
_COMMIT_SPREAD = 4


def _bitrev_rows(lde_T: np.ndarray) -> np.ndarray:
    """(c, N) natural columns -> (N, c) rows in bit-reversed order (the committed matrix)."""
    N = lde_T.shape[1] if lde_T.ndim == 2 else 0
    if lde_T.dtype != np.uint32 or N == 0 or N & (N - 1) or lde_T.shape[0] == 0:
        return np.ascontiguousarray(bit_reverse_permutation(np.ascontiguousarray(lde_T.T), axis=0))
    log_n = N.bit_length() - 1
    hb = min(_COMMIT_SPREAD, log_n)
    return gather_rows(lde_T, hb, log_n - hb, 0)


def _tree_rows(lde: np.ndarray, lo: int, count: int, out: np.ndarray | None = None) -> np.ndarray:
    """Committed rows lo .. lo + count - 1 (tree positions, bit-reversed order) of the LDE
    columns (c, N): uint32[count, c] (into ``out`` when given).  For count = 2^b dividing
    lo, tree position lo + t is the natural position bitrev(lo) + bitrev_b(t) N / 2^b: a
    strided read of the columns (kernels/lde_rows.py, plan (0, b, lo / count))."""
    b = int(count).bit_length() - 1
    if count != 1 << b or lo % count:
        raise ValueError(f"_tree_rows: count {count} must be a power of two dividing lo {lo}")
    return gather_rows(lde, 0, b, lo >> b, out)


class _LdeTree:
    """The Merkle tree of a committed LDE (tree row s = the LDE's natural row bitrev(s)),
    held without the committed matrix and without its lowest ``prune`` levels: the node
    array keeps levels prune .. log N (a tree over the level-``prune`` digests).  An
    opening reads the rows from the LDE (recomputed from the coefficients if it was
    released) and rehashes the 2^prune-row group of each opened row for the nodes below.
    Same rows, same paths, same caps, same root as the full tree over the matrix."""

    __slots__ = ("_upper", "_prune", "_log_n", "_src")

    def __init__(self, upper, prune: int, log_n: int, src):
        from ...kernels.merkle import MerkleTree
        # no matrix view; None for a leaves-only tree (commit(levels=False))
        self._upper = None if upper is None else MerkleTree(upper.nodes, upper.log_n, None)
        self._prune = int(prune)
        self._log_n = int(log_n)
        self._src = src if hasattr(src, "get") else _ArraySource(src)

    @classmethod
    def commit(cls, lde: np.ndarray, src=None, prune: int | None = None,
               leaves_out: np.ndarray | None = None, levels: bool = True) -> "_LdeTree":
        """Commit the rows of the LDE columns (c, N) in bit-reversed order, hashing
        ``_COMMIT_CHUNK`` tree positions at a time and keeping levels >= prune
        (default: PRUNE_LEVELS, at most log N - 8 so that every cap level is kept).
        ``leaves_out`` (uint32[N, 8]) receives the leaf digests (tree order): a round's
        mixed-height commitment is built from them (kernels/mmcs.py).  ``levels=False``
        hashes the leaves into ``leaves_out`` only: a tree without nodes, whose rows are
        opened (:meth:`open_rows`) but which has no root or cap -- the table's own tree is
        not part of a format-6 proof, only its leaves (in the round's mixed tree)."""
        from ...kernels.merkle import MerkleTree, _levels_up
        N = lde.shape[1]
        log_n = N.bit_length() - 1
        if N != 1 << log_n or lde.shape[0] == 0:
            raise ValueError(f"_LdeTree.commit: an LDE of shape {lde.shape}")
        if not levels:
            if (leaves_out is None or leaves_out.shape != (N, 8)
                    or leaves_out.dtype != np.uint32 or not leaves_out.flags.c_contiguous):
                raise ValueError("_LdeTree.commit(levels=False) needs leaves_out, a "
                                 "C-contiguous uint32[N, 8] (hashed into in place)")
            prune = 0
        elif prune is None:
            prune = max(0, min(PRUNE_LEVELS, log_n - 8))
        # chunk k: 2^hb runs of 2^l tree positions (l >= prune), h N/2^hb + k 2^l + t
        chunk_bits = min(log_n, max(_COMMIT_CHUNK.bit_length() - 1, prune))
        hb = min(_COMMIT_SPREAD, chunk_bits - prune)
        l = chunk_bits - hb
        H, L = 1 << hb, 1 << l
        top = np.empty((N >> prune, 8), np.uint32) if levels else None
        runs = top.reshape(H, (N >> hb) >> prune, 8) if levels else None  # level-prune digests
        leaves = np.empty((1 << chunk_bits, 8), np.uint32) if levels else None  # reused
        cols = np.ascontiguousarray(lde, dtype=np.uint32)      # (no copy: the LDE is)
        out_runs = None if leaves_out is None or not levels else leaves_out.reshape(H, N >> hb, 8)
        for k in range(N >> chunk_bits):
            if not levels:
                # straight into the leaves' places (h N/H + k L + t), by the hashing threads
                leaf_digests(cols, hb, l, k, leaves_out, N >> hb, k * L)
                continue
            leaf_digests(cols, hb, l, k, leaves)
            if out_runs is not None:
                out_runs[:, k * L:(k + 1) * L] = leaves.reshape(H, L, 8)
            if levels:
                digests = _levels_up(leaves, prune)
                runs[:, (k * L) >> prune:((k + 1) * L) >> prune] = digests.reshape(H, L >> prune, 8)
        return cls(MerkleTree.from_digests(top) if levels else None, prune, log_n,
                   lde if src is None else src)

    @property
    def has_levels(self) -> bool:
        """False for a leaves-only tree (``commit(levels=False)``): no root, no cap."""
        return self._upper is not None

    def _need_levels(self) -> None:
        if self._upper is None:
            raise ValueError("this committed matrix has no tree of its own (committed with "
                             "levels=False: only its leaves, in a mixed tree)")

    def open_rows(self, idx: np.ndarray) -> np.ndarray:
        """The committed rows at sorted distinct tree positions ``idx``, from one read of
        the LDE, or -- released -- evaluated from the coefficients at those points alone."""
        idx = np.asarray(idx, np.int64)
        if getattr(self._src, "lde", None) is None and hasattr(self._src, "group_rows"):
            return np.ascontiguousarray(self._src.group_rows(idx, 0)[:, 0], np.uint32)
        return np.ascontiguousarray(self.rows(idx), np.uint32)

    @property
    def root(self) -> np.ndarray:
        self._need_levels()
        return self._upper.root

    @property
    def log_n(self) -> int:
        return self._log_n

    @property
    def prune(self) -> int:
        return self._prune

    @property
    def stored_bytes(self) -> int:
        return 0 if self._upper is None else int(self._upper.nodes.nbytes)

    def _nodes_at(self, levels: np.ndarray, pos: np.ndarray, lde=None,
                  grows: dict | None = None) -> np.ndarray:
        """The digests at (level, position) pairs: uint32[m, 8].  Below the kept levels
        each group is rehashed from ``grows`` (group -> its rows uint32[2^prune, c], tree
        order) when given, else from the LDE ``lde`` (read from the source if None)."""
        from ...kernels.merkle import _build_levels, level_offsets
        self._need_levels()
        levels = np.asarray(levels, np.int64)
        pos = np.asarray(pos, np.int64)
        out = np.empty((levels.size, 8), np.uint32)
        hi = levels >= self._prune
        if hi.any():
            offs = level_offsets(self._log_n - self._prune)
            out[hi] = self._upper.nodes[offs[levels[hi] - self._prune] + pos[hi]]
        lo = np.flatnonzero(~hi)
        if lo.size:
            g_size = 1 << self._prune
            groups = pos[lo] >> (self._prune - levels[lo])
            if grows is None:
                if lde is None:
                    lde = self._src.get(keep=False)
                lde = np.ascontiguousarray(lde, dtype=np.uint32)
            offs = level_offsets(self._prune)
            mini = np.empty((2 * g_size - 1, 8), np.uint32)        # the group's subtree
            for g in np.unique(groups):
                if grows is None:
                    leaf_digests(lde, 0, self._prune, int(g), mini[:g_size])
                else:
                    _sponge(np.ascontiguousarray(grows[int(g)]), mini[:g_size], RATE)
                _build_levels(mini, self._prune)
                sel = lo[groups == g]
                local = pos[sel] - (int(g) << (self._prune - levels[sel]))
                out[sel] = mini[offs[levels[sel]] + local]
        return out

    def cap(self, log_cap: int) -> np.ndarray:
        """The 2^c nodes of level log N - c, c = min(log_cap, log N)."""
        self._need_levels()
        c = min(int(log_cap), self._log_n)
        return self._nodes_at(np.full(1 << c, self._log_n - c), np.arange(1 << c))

    def rows(self, indices, lde=None) -> np.ndarray:
        """The committed rows at tree positions ``indices`` (uint32[q, c])."""
        nat = _bitrev_index(np.asarray(indices, dtype=np.int64), self._log_n)
        if lde is None:
            lde = self._src.get(keep=False)
        return np.ascontiguousarray(lde[:, nat].T)

    def paths(self, indices, lde=None) -> np.ndarray:
        """Authentication paths uint32[q, log N, 8] (sibling at each level, leaves first)."""
        from ...kernels.merkle import _check_indices
        idx = _check_indices(indices, 1 << self._log_n)
        k = np.arange(self._log_n, dtype=np.int64)
        sib = (idx[:, None] >> k[None, :]) ^ 1
        lv = np.broadcast_to(k[None, :], sib.shape)
        if lde is None and self._prune and idx.size:
            lde = self._src.get(keep=False)
        return self._nodes_at(lv.reshape(-1), sib.reshape(-1), lde).reshape(idx.size, self._log_n, 8)

    def open(self, indices) -> tuple[np.ndarray, np.ndarray]:
        paths = self.paths(indices)                       # validates the indices
        return self.rows(indices), paths

    def open_batch(self, idx: np.ndarray, log_cap: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows, multiproof nodes against ``cap(log_cap)``) of sorted distinct tree
        positions, from one read of the LDE."""
        self._need_levels()
        levels, pos = mp.multiproof_plan(idx, self._log_n, log_cap)
        if getattr(self._src, "lde", None) is None and hasattr(self._src, "group_rows"):
            # a released LDE: only the groups the openings touch (the opened rows' and
            # the multiproof nodes' below the kept levels -- the same groups), evaluated
            # from the coefficients on their cosets (kernels/open_rows.py)
            b = self._prune
            lo = levels < b
            groups = np.unique(np.concatenate([idx >> b, pos[lo] >> (b - levels[lo])]))
            gr = self._src.group_rows(groups, b)                    # (groups, 2^b, c)
            rows = gr[np.searchsorted(groups, idx >> b), idx & ((1 << b) - 1)]
            grows = {int(g): gr[i] for i, g in enumerate(groups)}
            return np.ascontiguousarray(rows), self._nodes_at(levels, pos, grows=grows)
        lde = self._src.get(keep=False)
        return self.rows(idx, lde), self._nodes_at(levels, pos, lde)


class _ArraySource:
    """An LDE held as a plain array (the ``src`` of a tree committed without a
    :class:`prover.core.stages.Committed`)."""

    __slots__ = ("lde",)

    def __init__(self, lde: np.ndarray):
        self.lde = lde

    def get(self, keep: bool = True) -> np.ndarray:
        return self.lde
