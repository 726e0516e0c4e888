"""kernels/lde_rows.py: the compiled gathers and the column-reading leaf sponge equal the
numpy path they replace (strided slice + transpose + bit_reverse_permutation, then
hash_rows), on random shapes incl. one column, odd widths, fewer than 64 rows and
several chunks; the pruned LDE tree built from them has the full tree's root."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from steadfast.kernels import lde_rows as LR
from steadfast.kernels import merkle as mk
from steadfast.kernels.field import P
from steadfast.kernels.ntt_host import bit_reverse_permutation
from steadfast.kernels.poseidon2 import hash_rows
from steadfast.prover.core import ldetree as LT


def committed_matrix(lde):
    """The committed rows (tree order) by the old numpy path: natural rows, bit-reversed."""
    return np.ascontiguousarray(bit_reverse_permutation(np.ascontiguousarray(lde.T), axis=0))


def naive_bitrev(i, bits):
    return int(format(i, f"0{bits}b")[::-1], 2) if bits else 0


def old_tree_rows(lde, lo, count):
    """prover/core/ldetree.py's _tree_rows before kernels/lde_rows.py (numpy gathers)."""
    N = lde.shape[1]
    base = naive_bitrev(lo, N.bit_length() - 1)
    cols = np.ascontiguousarray(lde[:, base::N // count].T)
    return np.ascontiguousarray(bit_reverse_permutation(cols, axis=0))


def plan_positions(log_n, hb, l, k):
    """Tree positions of chunk k of the plan (hb, l), in the chunk's local row order."""
    N = 1 << log_n
    return np.array([h * (N >> hb) + k * (1 << l) + t
                     for h in range(1 << hb) for t in range(1 << l)], dtype=np.int64)


@st.composite
def plans(draw, max_log_n=10, max_hb=6):
    log_n = draw(st.integers(0, max_log_n))
    hb = draw(st.integers(0, min(max_hb, log_n)))
    l = draw(st.integers(0, log_n - hb))
    k = draw(st.integers(0, (1 << (log_n - hb - l)) - 1))
    return log_n, hb, l, k


@settings(max_examples=60, deadline=None)
@given(plans(), st.sampled_from([1, 2, 3, 7, 8, 9, 16, 17, 33]), st.integers(0, 2**32 - 1))
def test_gather_and_leaves_equal_numpy_path(plan, c, seed):
    log_n, hb, l, k = plan
    rng = np.random.default_rng(seed)
    lde = rng.integers(0, P, (c, 1 << log_n), dtype=np.uint32)
    want = committed_matrix(lde)[plan_positions(log_n, hb, l, k)]
    rows = LR.gather_rows(lde, hb, l, k)
    assert rows.shape == (1 << (hb + l), c) and np.array_equal(rows, want)
    out = np.full((1 << (hb + l), 8), 7, np.uint32)
    assert LR.leaf_digests(lde, hb, l, k, out) is out
    assert np.array_equal(out, hash_rows(want))
    # in place: local row h L + t at h N/H + k L + t of a whole tree's leaves; the rest kept
    N = 1 << log_n
    tree = np.full((N + 3, 8), 5, np.uint32)
    pos = plan_positions(log_n, hb, l, k)
    assert LR.leaf_digests(lde, hb, l, k, tree, N >> hb, k << l) is tree
    assert np.array_equal(tree[pos], out)
    rest = np.ones(N + 3, bool)
    rest[pos] = False
    assert (tree[rest] == 5).all()


def test_views_and_edge_values():
    """Non-contiguous and read-only inputs, values at p - 1, a reused output buffer."""
    rng = np.random.default_rng(5)
    big = rng.integers(0, P, (12, 1 << 9), dtype=np.uint32)
    big[:, ::3] = P - 1
    lde = big[::2]                                        # non-contiguous rows of columns
    ro = big.copy()
    ro.setflags(write=False)
    want = committed_matrix(lde)
    buf = np.empty((1 << 9, 6), np.uint32)
    assert np.array_equal(LR.gather_rows(lde, 4, 5, 0, buf), want)
    assert np.array_equal(LR.leaf_digests(ro, 2, 7, 0), hash_rows(committed_matrix(ro)))
    with pytest.raises(ValueError):
        LR.gather_rows(lde, 4, 5, 0, np.empty((1 << 9, 5), np.uint32))
    with pytest.raises(ValueError):
        LR.leaf_digests(lde, 7, 2, 0)                      # 2^7 states do not fit a block
    with pytest.raises(ValueError, match="stride"):
        LR.leaf_digests(lde, 2, 5, 0, np.empty((1 << 8, 8), np.uint32), 1 << 7, 0)  # short
    with pytest.raises(ValueError, match="stride"):
        LR.leaf_digests(lde, 2, 5, 0, None, 1 << 7, 0)     # in place needs an out
    for bad in (None, np.empty((1 << 9, 16), np.uint32)[:, ::2],
                np.empty((1 << 9, 8), np.int64), np.empty((1 << 8, 8), np.uint32)):
        with pytest.raises(ValueError, match="leaves_out"):
            LT._LdeTree.commit(lde, leaves_out=bad, levels=False)
    with pytest.raises(ValueError):
        LR.chunk_plan(4, 2, 2, 1)                          # one chunk only


def test_bitrev_table():
    for bits in range(0, 11):
        t = LR.bitrev_table(bits)
        assert [int(x) for x in t] == [naive_bitrev(i, bits) for i in range(1 << bits)]
        assert not t.flags.writeable


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 11), st.sampled_from([1, 2, 5, 8, 13]), st.integers(0, 2**32 - 1),
       st.data())
def test_tree_rows_and_bitrev_rows_equal_old_path(log_n, c, seed, data):
    rng = np.random.default_rng(seed)
    lde = rng.integers(0, P, (c, 1 << log_n), dtype=np.uint32)
    assert np.array_equal(LT._bitrev_rows(lde), committed_matrix(lde))
    b = data.draw(st.integers(0, log_n))
    lo = data.draw(st.integers(0, (1 << (log_n - b)) - 1)) << b
    assert np.array_equal(LT._tree_rows(lde, lo, 1 << b), old_tree_rows(lde, lo, 1 << b))


def test_bitrev_rows_other_dtypes_keep_numpy_path():
    a = np.arange(24, dtype=np.uint64).reshape(3, 8)
    assert np.array_equal(LT._bitrev_rows(a), committed_matrix(a))
    assert LT._bitrev_rows(a).dtype == np.uint64


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 12), st.sampled_from([1, 3, 8, 9, 20]), st.integers(0, 6),
       st.integers(8, 13), st.integers(0, 6), st.integers(0, 2**32 - 1))
def test_lde_tree_commit_equals_full_tree(log_n, c, prune, chunk_bits, spread, seed):
    """Root, caps and openings of the pruned tree hashed from the columns in chunks (any
    chunk size and spread) = those of merkle.commit over the numpy-built row matrix."""
    rng = np.random.default_rng(seed)
    lde = rng.integers(0, P, (c, 1 << log_n), dtype=np.uint32)
    prune = min(prune, log_n)
    full = mk.commit(committed_matrix(lde))
    saved = LT._COMMIT_CHUNK, LT._COMMIT_SPREAD
    try:
        LT._COMMIT_CHUNK, LT._COMMIT_SPREAD = 1 << chunk_bits, spread
        lean = LT._LdeTree.commit(lde, prune=prune)
    finally:
        LT._COMMIT_CHUNK, LT._COMMIT_SPREAD = saved
    assert np.array_equal(lean.root, full.root)
    # the leaves-only commit (a format-6 proof's): its leaves written in place
    leaves = np.full((1 << log_n, 8), 3, np.uint32)
    try:
        LT._COMMIT_CHUNK, LT._COMMIT_SPREAD = 1 << chunk_bits, spread
        LT._LdeTree.commit(lde, leaves_out=leaves, levels=False)
    finally:
        LT._COMMIT_CHUNK, LT._COMMIT_SPREAD = saved
    assert np.array_equal(leaves, hash_rows(committed_matrix(lde)))
    idx = rng.integers(0, 1 << log_n, 5)
    rows, paths = lean.open(idx)
    r2, p2 = full.open(idx)
    assert np.array_equal(rows, r2) and np.array_equal(paths, p2)


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 8), st.integers(1, 12), st.integers(0, 2**32 - 1))
def test_levels_up_equals_level_digests(log_n, w, seed):
    rng = np.random.default_rng(seed)
    m = rng.integers(0, P, (1 << log_n, w), dtype=np.uint32)
    leaves = hash_rows(m)
    for level in range(log_n + 1):
        assert np.array_equal(mk._levels_up(leaves.copy(), level), mk.level_digests(m, level))
