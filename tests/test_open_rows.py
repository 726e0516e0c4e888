"""kernels/open_rows.py: committed LDE rows of a few tree groups straight from the
coefficients, against the rows of the whole LDE (lde_columns(ntt(c))) and a naive
evaluation."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from steadfast.kernels.field import P, root_of_unity
from steadfast.kernels.ntt_host import bit_reverse_indices as _bitrev, lde_columns, ntt
from steadfast.kernels import open_rows
from steadfast.kernels.open_rows import fused_depth, group_rows


def _want(coeffs, k, shift, groups, b):
    c, n = coeffs.shape
    L = n.bit_length() - 1 + k
    lde = lde_columns(ntt(coeffs), k, shift)
    out = np.empty((len(groups), 1 << b, c), np.uint32)
    for q, g in enumerate(groups):
        pos = g * (1 << b) + np.arange(1 << b)
        out[q] = lde[:, _bitrev(pos, L)].T
    return out


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 9), st.integers(0, 3), st.integers(1, 6), st.data())
def test_group_rows_equal_the_lde_rows(log_n, k, c, data):
    L = log_n + k
    b = data.draw(st.integers(0, min(L, 7)))
    shift = data.draw(st.sampled_from([31, 7, 1, 1234567]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    coeffs = rng.integers(0, P, (c, 1 << log_n), dtype=np.uint64).astype(np.uint32)
    ng = 1 << (L - b)
    groups = np.sort(rng.choice(ng, data.draw(st.integers(1, min(ng, 12))), replace=False))
    want = _want(coeffs, k, shift, groups, b)
    assert np.array_equal(group_rows(coeffs, k, shift, groups, b), want)
    assert np.array_equal(group_rows(coeffs, k, shift, groups, b, method="tree"), want)


@settings(max_examples=40, deadline=None)
@given(st.integers(4, 11), st.integers(0, 3), st.data())
def test_the_fused_kernel_at_every_depth_and_without_lanes(log_n, k, data):
    """Every number of tree levels before Horner's rule (0 .. all), with the 32-bit lanes
    and with the scalar loop alone (values near p included), gives the LDE's rows."""
    L = log_n + k
    b = data.draw(st.integers(0, min(L, 7)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    coeffs = rng.integers(0, P, (3, 1 << log_n), dtype=np.uint64).astype(np.uint32)
    coeffs[2] = P - 1 - rng.integers(0, 3, 1 << log_n, dtype=np.uint64).astype(np.uint32)
    ng = 1 << (L - b)
    groups = np.sort(rng.choice(ng, data.draw(st.integers(1, min(ng, 40))), replace=False))
    levels = max(0, log_n - b)
    d = data.draw(st.integers(0, levels))
    lanes = data.draw(st.booleans())
    want = _want(coeffs, k, 31, groups, b)
    orig_depth, orig_lanes = open_rows.fused_depth, open_rows.LANES_ON
    try:
        open_rows.fused_depth = lambda *a: d
        open_rows.LANES_ON = lanes
        got = group_rows(coeffs, k, 31, groups, b, method="fused")
    finally:
        open_rows.fused_depth, open_rows.LANES_ON = orig_depth, orig_lanes
    assert np.array_equal(got, want)


def test_fused_depth_follows_the_product_count():
    keys = [8, 16, 32, 50, 50, 50, 50, 50, 50, 50, 50, 50, 50]     # 2^19 rows, 50 groups
    assert fused_depth(1 << 19, keys, 1, 64) == 0        # one group: Horner alone
    assert fused_depth(1 << 19, keys, 50, 64) == 3       # the levels that share keys
    assert fused_depth(64, [], 5, 64) == 0               # no level (n <= G)
    for q in (1, 7, 50, 120):
        d = fused_depth(1 << 19, keys, q, 64)
        scratch = sum(keys[l] * (1 << (d - l - 1)) for l in range(d)) * 64 * 4
        assert 0 <= d <= len(keys) and scratch <= open_rows._SCRATCH_BYTES
    with pytest.raises(ValueError, match="method"):
        group_rows(np.zeros((1, 8), np.uint32), 1, 31, [0], 0, method="naive")


def test_group_rows_naive_points_and_extremes():
    rng = np.random.default_rng(5)
    coeffs = rng.integers(0, P, (3, 64), dtype=np.uint64).astype(np.uint32)
    coeffs[1] = P - 1                                   # largest canonical values
    coeffs[2] = 0
    k, b, shift = 2, 3, 31
    L = 8
    got = group_rows(coeffs, k, shift, [0, 5, 31], b)
    w = root_of_unity(L)
    for q, g in enumerate([0, 5, 31]):
        for t in range(1 << b):
            x = shift * pow(w, int(_bitrev(np.array([g * 8 + t]), L)[0]), P) % P
            for col in range(3):
                v = 0
                for a in reversed(coeffs[col].tolist()):
                    v = (v * x + a) % P
                assert got[q, t, col] == v


def test_group_rows_larger_and_empty():
    rng = np.random.default_rng(9)
    coeffs = rng.integers(0, P, (5, 1 << 14), dtype=np.uint64).astype(np.uint32)
    groups = np.sort(rng.choice(1 << 10, 50, replace=False))
    assert np.array_equal(group_rows(coeffs, 2, 31, groups, 6), _want(coeffs, 2, 31, groups, 6))
    assert group_rows(coeffs, 2, 31, [], 6).shape == (0, 64, 5)


def test_group_rows_errors():
    c = np.zeros((2, 8), np.uint32)
    with pytest.raises(ValueError, match="power of two"):
        group_rows(np.zeros((2, 6), np.uint32), 1, 31, [0], 0)
    with pytest.raises(ValueError, match="outside"):
        group_rows(c, 1, 31, [4], 2)
    with pytest.raises(ValueError, match="log_group"):
        group_rows(c, 1, 31, [0], 5)
    with pytest.raises(ValueError, match="uint32\\[c, n\\]"):
        group_rows(np.zeros(8, np.uint32), 1, 31, [0], 0)


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 4), st.sampled_from([(12, 2), (13, 1), (11, 3)]))
def test_released_lde_opens_from_the_coefficients(seed, log_cap, shape):
    """A released LDE's openings (rows and multiproof nodes below the kept tree levels)
    come from kernels/open_rows.py: the same as with the LDE held."""
    from steadfast.prover.core.stages import Committed, HostStages
    log_n, k = shape
    rng = np.random.default_rng(seed)
    coeffs = rng.integers(0, P, (5, 1 << log_n), dtype=np.uint64).astype(np.uint32)
    com = Committed.commit(lde_columns(ntt(coeffs), k, 31), coeffs)
    assert com.tree.prune > 0
    N = 1 << (log_n + k)
    idx = np.unique(rng.integers(0, N, rng.integers(1, 60)))
    held = HostStages().open_batch(com.tree, idx, log_cap)
    com.release()
    got = HostStages().open_batch(com.tree, idx, log_cap)
    assert not com.holds_lde
    assert np.array_equal(held[0], got[0]) and np.array_equal(held[1], got[1])


def test_the_switch_is_read_and_checked_at_import():
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = "import steadfast.kernels.open_rows as o; print(o.METHOD)"
    for value, ok in (("tree", True), ("", False), ("naive", False)):
        env = {**os.environ, "STEADFAST_OPEN_ROWS": value}
        out = subprocess.run([sys.executable, "-c", code], cwd=root, env=env,
                             capture_output=True, text=True, timeout=300)
        if ok:
            assert out.returncode == 0 and out.stdout.strip() == value
        else:
            assert out.returncode != 0 and "STEADFAST_OPEN_ROWS" in out.stderr


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8), st.data())
def test_the_levels_pair_each_key_with_its_negative(log_mod, data):
    """_entries: every key of a level appears once, as a product's key or as its pair's
    second; a pair is (k, k + mod/2) -- the values c and -c -- and no pair is missed."""
    mod = 1 << log_mod
    keys = np.array(sorted(data.draw(st.sets(st.integers(0, mod - 1), min_size=1))), np.int64)
    a, b = open_rows._entries(keys, mod)
    seen = np.concatenate([a, b[b >= 0]])
    assert sorted(seen.tolist()) == list(range(keys.size))
    half = mod >> 1
    for i, j in zip(a.tolist(), b.tolist()):
        if j >= 0:
            assert keys[j] == keys[i] + half
        else:
            partner = keys[i] + half if keys[i] < half else keys[i] - half
            assert partner not in set(keys.tolist())


def test_fused_depth_counts_the_pairs_once():
    """With the c/-c pairs counted once, the levels are cheaper and the depth no smaller."""
    keys = [8, 16, 32, 50, 50, 50, 50, 50, 50, 50, 50, 50, 50]
    prods = [4, 8, 16, 32, 50, 50, 50, 50, 50, 50, 50, 50, 50]
    assert fused_depth(1 << 19, keys, 50, 64, prods) >= fused_depth(1 << 19, keys, 50, 64)
    assert fused_depth(1 << 19, keys, 1, 64, prods) == 0
