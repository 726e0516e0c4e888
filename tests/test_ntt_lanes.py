"""The NTT's butterflies in 32-bit lanes (kernels/ntt_lanes.py) against the scalar ones.

Every transform of kernels/ntt_host.py runs both ways in one process (the compiled entry
point takes the choice as an argument: ``ntt_host._LANES``, ``STEADFAST_NTT_KERNEL``) and
must give the same words, at sizes that exercise each pass (tiles, blocks, slabs) and in
both thread modes; the primitives with counts that leave a scalar tail, against the
scalar butterfly one pair at a time; and the transform against a naive DFT."""
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from numba import njit

from steadfast.kernels import ntt_host, ntt_lanes
from steadfast.kernels.field import P, root_of_unity
from steadfast.kernels.ntt_host import _dif, _dit


def _both(fn, *args, **kw):
    old = ntt_host._LANES
    try:
        ntt_host._LANES = np.bool_(False)
        scalar = fn(*args, **kw)
        ntt_host._LANES = np.bool_(True)
        lanes = fn(*args, **kw)
    finally:
        ntt_host._LANES = old
    return scalar, lanes


@pytest.mark.parametrize("log_n", [0, 1, 3, 4, 5, 8, 9, 12, 13, 14, 16])
@pytest.mark.parametrize("rows", [1, 3])
def test_transforms_equal_scalar(log_n, rows):
    rng = np.random.default_rng(1000 * log_n + rows)
    a = rng.integers(0, P, size=(rows, 1 << log_n), dtype=np.uint32)
    for fn in (ntt_host.ntt, ntt_host.intt, ntt_host.coset_ntt, ntt_host.coset_intt):
        s, v = _both(fn, a)
        assert np.array_equal(s, v), fn.__name__
    for k in (1, 2, 3):
        s, v = _both(ntt_host.lde_from_coeffs, a, k)
        assert np.array_equal(s, v), ("lde_from_coeffs", k)
        s, v = _both(ntt_host.lde_columns, a, k)
        assert np.array_equal(s, v), ("lde_columns", k)


def test_lde_against_naive_dft():
    """The lanes path's LDE is the polynomial's values on the coset (naive evaluation)."""
    rng = np.random.default_rng(7)
    n, k, shift = 1 << 5, 2, 31
    coeffs = rng.integers(0, P, size=(2, n), dtype=np.uint32)
    got = ntt_host.lde_from_coeffs(coeffs, k, shift)
    w = root_of_unity(5 + k)
    for c in range(2):
        for i in range(0, n << k, 7):
            x = shift * pow(w, i, P) % P
            want = sum(int(coeffs[c, j]) * pow(x, j, P) for j in range(n)) % P
            assert int(got[c, i]) == want


@njit
def _scalar_run(x, iu, iv, tw, iw, count, forward):
    for j in range(count):
        if forward:
            x[iu + j], x[iv + j] = _dit(x[iu + j], x[iv + j], tw[iw + j])
        else:
            x[iu + j], x[iv + j] = _dif(x[iu + j], x[iv + j], tw[iw + j])


@njit
def _lanes_run(x, iu, iv, tw, iw, count, forward):
    ntt_lanes.run(x, iu, iv, tw, iw, count, forward)


@njit
def _lanes_splat(x, iu, iv, wm, count, forward):
    ntt_lanes.run_splat(x, iu, iv, wm, count, forward)


@settings(max_examples=60, deadline=None)
@given(count=st.integers(0, 70), forward=st.booleans(), seed=st.integers(0, 2**32 - 1),
       edge=st.booleans())
def test_primitives_equal_scalar_butterflies(count, forward, seed, edge):
    """Whole vectors and a scalar tail, unaligned offsets; edge: operands at 0, 1, p-1."""
    rng = np.random.default_rng(seed)
    if edge:
        pool = np.array([0, 1, 2, P - 2, P - 1], np.uint32)
        x = rng.choice(pool, size=2 * count + 9).astype(np.uint32)
        tw = rng.choice(pool, size=count + 5).astype(np.uint32)
    else:
        x = rng.integers(0, P, size=2 * count + 9, dtype=np.uint32)
        tw = rng.integers(0, P, size=count + 5, dtype=np.uint32)
    iu, iv, iw = 3, 3 + count + 2, 5 % (len(tw) - count + 1)
    a, b = x.copy(), x.copy()
    _scalar_run(a, iu, iv, tw, iw, count, forward)
    _lanes_run(b, iu, iv, tw, iw, count, forward)
    assert np.array_equal(a, b)
    wm = np.uint32(tw[0])
    c, d = x.copy(), x.copy()
    _scalar_run(c, iu, iv, np.full(count + 1, wm, np.uint32), 0, count, forward)
    _lanes_splat(d, iu, iv, wm, count, forward)
    assert np.array_equal(c, d)


def test_kernel_switch_is_checked():
    """STEADFAST_NTT_KERNEL: lanes (default) or scalar; anything else refused by name."""
    code = ("import steadfast.kernels.ntt_lanes as m, steadfast.kernels.ntt_host as h; "
            "print(m.KERNEL, bool(h._LANES))")
    run = lambda env: subprocess.run([sys.executable, "-c", code], capture_output=True,
                                     text=True, env=env)
    import os
    base = {k: v for k, v in os.environ.items() if k != "STEADFAST_NTT_KERNEL"}
    assert run(base).stdout.split() == ["lanes", "True"]
    assert run(dict(base, STEADFAST_NTT_KERNEL="scalar")).stdout.split() == ["scalar", "False"]
    bad = run(dict(base, STEADFAST_NTT_KERNEL="avx9"))
    assert bad.returncode != 0 and "STEADFAST_NTT_KERNEL must be 'lanes' or 'scalar'" in bad.stderr
