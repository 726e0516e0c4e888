"""BabyBear and its quartic extension against galois (an independent implementation)."""
import galois
import numpy as np
import pytest
from hypothesis import given, strategies as st

from steadfast.kernels import field
from steadfast.kernels import hostlib as H

from gf4_ref import from_gf4, irreducible_poly, to_gf4

P = field.P
GF = galois.GF(P)
elem = st.integers(0, P - 1)
nonzero = st.integers(1, P - 1)
arrays = st.lists(elem, min_size=1, max_size=40)


def test_constants():
    assert P == 2**31 - 2**27 + 1
    assert field.root_of_unity(27) == 440564289 == 0x1A427A41
    assert pow(field.root_of_unity(27), 1 << 27, P) == 1
    assert pow(field.root_of_unity(27), 1 << 26, P) != 1
    assert GF.primitive_element == field.GENERATOR or GF(field.GENERATOR).multiplicative_order() == P - 1
    assert (field.MONT_NINV * P) % (1 << 32) == (1 << 32) - 1
    with pytest.raises(ValueError):
        field.root_of_unity(28)


def test_extension_modulus_irreducible():
    assert irreducible_poly().is_irreducible()


@given(arrays, arrays)
def test_base_ops_against_galois(xs, ys):
    n = min(len(xs), len(ys))
    a = np.array(xs[:n], np.uint32)
    b = np.array(ys[:n], np.uint32)
    ga, gb = GF(a.astype(np.int64)), GF(b.astype(np.int64))
    assert np.array_equal(H.add(a, b), np.array(ga + gb, dtype=np.uint32))
    assert np.array_equal(H.sub(a, b), np.array(ga - gb, dtype=np.uint32))
    assert np.array_equal(H.mul(a, b), np.array(ga * gb, dtype=np.uint32))


@given(st.lists(nonzero, min_size=1, max_size=60), st.integers(0, 2**64 - 1))
def test_pow_inverse_batch_inverse(xs, e):
    a = np.array(xs, np.uint32)
    ga = GF(a.astype(np.int64))
    # galois takes exponents < 2^63; above that Python's pow is the reference
    expect_pow = np.array(ga ** e, dtype=np.uint32) if e < 2**63 else \
        np.array([pow(int(x), e, P) for x in xs], dtype=np.uint32)
    assert np.array_equal(H.power(a, e), expect_pow)
    expect = np.array(ga ** -1, dtype=np.uint32)
    assert np.array_equal(H.inverse(a), expect)
    assert np.array_equal(H.batch_inverse(a), expect)


def test_batch_inverse_spans_chunks():
    rng = np.random.default_rng(5)
    a = rng.integers(1, P, (1 << 14) + 3, dtype=np.uint32)
    inv = H.batch_inverse(a)
    assert np.all(H.mul(a, inv) == 1)


@given(elem, elem)
def test_scalar_host_functions_and_montgomery(a, b):
    HF = H.HF
    assert HF.mul(np.uint32(a), np.uint32(b)) == a * b % P
    bm = int(field.to_mont_host(np.array([b], np.uint32))[0])
    assert HF.mont_mul(np.uint32(a), np.uint32(bm)) == a * b % P
    assert HF.neg(np.uint32(a)) == (-a) % P
    assert HF.reduce64(np.uint64(a) * np.uint64(b) + np.uint64(a)) == (a * b + a) % P


ef_elem = st.lists(elem, min_size=4, max_size=4)


@given(ef_elem, ef_elem)
def test_extension_against_galois(x, y):
    a = np.array([x], np.uint32)
    b = np.array([y], np.uint32)
    assert H.ef_mul(a, b)[0].tolist() == from_gf4(to_gf4(x) * to_gf4(y))
    assert H.ef_add(a, b)[0].tolist() == from_gf4(to_gf4(x) + to_gf4(y))
    assert H.ef_sub(a, b)[0].tolist() == from_gf4(to_gf4(x) - to_gf4(y))
    if any(x):
        assert H.ef_inverse(a)[0].tolist() == from_gf4(to_gf4(x) ** -1)


@given(ef_elem, st.integers(0, 2**40))
def test_extension_pow(x, e):
    r = H.HF.ef_pow(*[np.uint32(v) for v in x], np.uint64(e))
    assert [int(v) for v in r] == from_gf4(to_gf4(x) ** e)


@given(ef_elem, st.integers(0, 70))
def test_extension_powers_table(x, n):
    """hostlib.ef_powers (the prover's per-table alpha / beta / lambda powers, compiled)
    against galois and against air.field.ef_powers (the numpy reference it replaced in
    the prover): the same values, layout (4, n) and dtype."""
    from steadfast.air import field as AF
    got = H.ef_powers(np.array(x, np.uint32), n)
    assert got.shape == (4, n) and got.dtype == np.uint64
    g = to_gf4(x)
    assert [got[:, i].tolist() for i in range(n)] == [from_gf4(g ** i) for i in range(n)]
    assert np.array_equal(got, AF.ef_powers(np.array(x, np.uint64).reshape(4, 1), n))


def test_extension_powers_refuses_bad_input():
    with pytest.raises(ValueError, match="not one EF element"):
        H.ef_powers(np.arange(3, dtype=np.uint32), 4)
    with pytest.raises(ValueError, match="canonical"):
        H.ef_powers(np.array([P, 0, 0, 0], np.uint64), 4)


def test_errors():
    with pytest.raises(TypeError, match="uint32"):
        H.mul(np.arange(3, dtype=np.int64), np.arange(3, dtype=np.int64))
    with pytest.raises(TypeError):
        H.add([1, 2], [3, 4])
    with pytest.raises(ZeroDivisionError):
        H.batch_inverse(np.array([1, 0, 2], np.uint32))
    with pytest.raises(ZeroDivisionError):
        H.ef_inverse(np.zeros((1, 4), np.uint32))
    with pytest.raises(ValueError, match="4 coefficients"):
        H.ef_mul(np.zeros((2, 3), np.uint32), np.zeros((2, 3), np.uint32))
    assert H.mul(np.zeros(0, np.uint32), np.zeros(0, np.uint32)).shape == (0,)
    assert H.batch_inverse(np.zeros(0, np.uint32)).shape == (0,)


# ---- the same source compiled as CUDA device functions, run under the simulator ----

@pytest.mark.parametrize("n", [127, 128, 129])
def test_device_field_kernels_match_host(n):
    from numba import cuda
    from steadfast.kernels import field_device as D
    rng = np.random.default_rng(n)
    a = rng.integers(1, P, n, dtype=np.uint32)
    b = rng.integers(0, P, n, dtype=np.uint32)
    da, db = cuda.to_device(a), cuda.to_device(b)
    assert np.array_equal(D.add(da, db).copy_to_host(), H.add(a, b))
    assert np.array_equal(D.sub(da, db).copy_to_host(), H.sub(a, b))
    assert np.array_equal(D.mul(da, db).copy_to_host(), H.mul(a, b))
    assert np.array_equal(D.batch_inverse(da, chunk=16).copy_to_host(), H.batch_inverse(a))
    # extension kernels: one thread per row, so n rows straddle BLOCK as well
    assert D.BLOCK == 128, "the parametrisation straddles BLOCK = 128"
    ea = rng.integers(0, P, (n, 4), dtype=np.uint32)
    eb = rng.integers(0, P, (n, 4), dtype=np.uint32)
    dea, deb = cuda.to_device(ea), cuda.to_device(eb)
    assert np.array_equal(D.ef_mul(dea, deb).copy_to_host(), H.ef_mul(ea, eb))
    assert np.array_equal(D.ef_inverse(dea).copy_to_host(), H.ef_inverse(ea))


@pytest.mark.parametrize("n,threads", [(380, 127), (384, 128), (385, 129)])
def test_device_batch_inverse_straddles_the_block(n, threads):
    # chunk 3: ceil(n / 3) threads across BLOCK = 128, with a last chunk of 2, 3 and 1
    from numba import cuda
    from steadfast.kernels import field_device as D
    assert (n + 2) // 3 == threads and D.BLOCK == 128
    a = np.random.default_rng(n).integers(1, P, n, dtype=np.uint32)
    got = D.batch_inverse(cuda.to_device(a), chunk=3).copy_to_host()
    assert np.array_equal(got, H.batch_inverse(a))
    assert all(int(x) * int(y) % P == 1 for x, y in zip(a[-5:], got[-5:]))
