"""lde_from_coeffs (kernels/ntt_host.py): the coset LDE straight from coefficients.

Checked bit for bit against the path it replaces, ``lde_columns(ntt(coeffs))``, against
``coset_ntt`` of the zero-padded coefficients, and against direct evaluation of the
polynomials over Python / numpy integers (Horner at every point for small sizes, a few
points for larger ones), across the small-transform, tile, block, slab and threaded
(few long rows) code paths.
"""
import numba
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from steadfast.kernels.field import GENERATOR, P, root_of_unity
from steadfast.kernels.ntt_host import coset_ntt, lde_columns, lde_from_coeffs, ntt

RNG = np.random.default_rng(20261201)


def rand(shape, rng=RNG):
    return rng.integers(0, P, shape, dtype=np.uint32)


def horner(coeffs, x):
    acc = 0
    for c in reversed(coeffs):
        acc = (acc * x + int(c)) % P
    return acc


def powers(x, n):
    """x^0 .. x^(n-1) mod p as uint64 (doubling; products < 2^62)."""
    pw = np.ones(n, np.uint64)
    m = 1
    while m < n:
        pw[m:2 * m] = pw[:min(m, n - m)] * np.uint64(pow(x, m, P)) % np.uint64(P)
        m *= 2
    return pw


def direct(coeffs, x):
    """sum_j coeffs[j] x^j mod p, vectorised (n < 2^27 terms < 2^31: the sum cannot wrap)."""
    return int((coeffs.astype(np.uint64) * powers(x, coeffs.size) % np.uint64(P)).sum()) % P


def padded(c, k):
    z = np.zeros((c.shape[0], c.shape[1] << k), np.uint32)
    z[:, :c.shape[1]] = c
    return z


@settings(max_examples=80)
@given(st.integers(1, 9), st.integers(0, 10), st.integers(0, 3), st.integers(1, P - 1),
       st.integers(0, 2 ** 32 - 1))
def test_matches_old_path_and_naive_evaluation(w, log_n, k, shift, seed):
    rng = np.random.default_rng(seed)
    n, big = 1 << log_n, 1 << (log_n + k)
    c = rand((w, n), rng)
    got = lde_from_coeffs(c, k, shift)
    assert got.shape == (w, big) and got.dtype == np.uint32 and got.flags.c_contiguous
    assert np.array_equal(got, lde_columns(ntt(c), k, shift))
    assert np.array_equal(got, coset_ntt(padded(c, k), shift))
    om = root_of_unity(log_n + k)
    if n * big <= 1 << 12:                       # every point, Horner over Python ints
        for r in range(w):
            assert got[r].tolist() == [horner(c[r], shift * pow(om, i, P) % P)
                                       for i in range(big)]
    else:                                        # a few points, first/last included
        for r in (0, w - 1):
            for i in {0, 1, big // 2 + 1, big - 1, int(rng.integers(big))}:
                assert int(got[r, i]) == direct(c[r], shift * pow(om, i, P) % P)


@pytest.mark.parametrize("log_n,k,w", [(8, 0, 2), (8, 4, 1), (9, 3, 1), (12, 1, 3),
                                       (13, 2, 5), (14, 2, 1), (15, 1, 3), (16, 2, 1),
                                       (16, 2, 4), (10, 6, 2), (20, 2, 1)])
def test_medium_and_large_sizes(log_n, k, w):
    # tiles, blocks, one and two slab passes (log n + k > 21), the replication-only path
    # (k >= 4), and the few-long-rows mode that splits every pass over threads
    c = rand((w, 1 << log_n))
    got = lde_from_coeffs(c, k)
    assert np.array_equal(got, lde_columns(ntt(c), k, GENERATOR))
    om, big = root_of_unity(log_n + k), 1 << (log_n + k)
    for i in (0, 1, 3, big // 2 - 1, big - 1):
        assert int(got[w - 1, i]) == direct(c[w - 1], GENERATOR * pow(om, i, P) % P)


def test_threads_do_not_change_bits():
    c = rand((3, 1 << 15))
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = lde_from_coeffs(c, 2)
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        many = lde_from_coeffs(c, 2)
    finally:
        numba.set_num_threads(before)
    assert np.array_equal(one, many)


def test_sub_coset_is_a_smaller_blowup():
    # the quotient domain g<w_{n 2^j}> (j < k) is every 2^(k-j)-th point of the k LDE
    c = rand((2, 1 << 11))
    full = lde_from_coeffs(c, 3, 7)
    for j in range(3):
        assert np.array_equal(lde_from_coeffs(c, j, 7), full[:, ::1 << (3 - j)])


def test_out_parameter():
    c = rand((3, 1 << 9))
    ref = lde_from_coeffs(c, 2)
    out = np.full((3, 1 << 11), 5, np.uint32)
    assert lde_from_coeffs(c, 2, out=out) is out
    assert np.array_equal(out, ref)
    with pytest.raises(ValueError, match="shape"):
        lde_from_coeffs(c, 1, out=out)
    with pytest.raises(TypeError, match="uint32"):
        lde_from_coeffs(c, 2, out=out.astype(np.uint64))
    with pytest.raises(ValueError, match="contiguous"):
        lde_from_coeffs(c, 2, out=np.empty((1 << 11, 3), np.uint32).T)
    ro = np.empty((3, 1 << 11), np.uint32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        lde_from_coeffs(c, 2, out=ro)
    both = rand((3, 1 << 10))
    with pytest.raises(ValueError, match="overlap"):
        lde_from_coeffs(both[:, :1 << 9], 1, out=both)


def test_inputs_not_modified_and_non_contiguous():
    c = rand((4, 1 << 14))
    keep = c.copy()
    lde_from_coeffs(c, 2)
    assert np.array_equal(c, keep)
    f = np.asfortranarray(c[:, :256])
    assert np.array_equal(lde_from_coeffs(f, 1), lde_from_coeffs(np.ascontiguousarray(f), 1))
    assert np.array_equal(lde_from_coeffs(c[::2], 1), lde_from_coeffs(c, 1)[::2])


def test_empty_and_trivial():
    assert lde_from_coeffs(np.zeros((0, 8), np.uint32), 2).shape == (0, 32)
    one = np.array([[5]], np.uint32)                 # n = 1: the constant polynomial
    assert lde_from_coeffs(one, 3).tolist() == [[5] * 8]
    assert lde_from_coeffs(np.zeros((2, 64), np.uint32), 2).tolist() == [[0] * 256] * 2


def test_errors():
    c = rand((2, 8))
    with pytest.raises(TypeError, match="numpy uint32 array"):
        lde_from_coeffs([[1, 2]], 1)
    with pytest.raises(TypeError, match="uint64"):
        lde_from_coeffs(c.astype(np.uint64), 1)
    with pytest.raises(ValueError, match="2-d"):
        lde_from_coeffs(c.reshape(-1), 1)
    with pytest.raises(ValueError, match="2-d"):
        lde_from_coeffs(c.reshape(1, 2, 8), 1)
    with pytest.raises(ValueError, match="power of two"):
        lde_from_coeffs(rand((2, 6)), 1)
    with pytest.raises(ValueError, match="power of two"):
        lde_from_coeffs(np.zeros((2, 0), np.uint32), 1)
    with pytest.raises(ValueError, match="two-adicity"):
        lde_from_coeffs(c, 25)                          # 2^28 > 2^27
    with pytest.raises(ValueError, match=">= 0"):
        lde_from_coeffs(c, -1)
    with pytest.raises(TypeError, match="integer"):
        lde_from_coeffs(c, 1.0)
    with pytest.raises(TypeError, match="integer"):
        lde_from_coeffs(c, True)
    for bad in (0, P, -3):
        with pytest.raises(ValueError, match="nonzero canonical"):
            lde_from_coeffs(c, 1, bad)
    with pytest.raises(TypeError, match="shift"):
        lde_from_coeffs(c, 1, 3.0)
