"""NTT, coset NTT and coset LDE (kernels/ntt_host.py, kernels/ntt_device.py) against
independent references: the naive O(n^2) DFT over Python integers, naive interpolation and
Horner evaluation, a few-point direct evaluation at sizes too large for O(n^2), and
algebraic properties (round trips, linearity, the convolution theorem).  Device kernels
run under numba's CUDA simulator (tests/conftest.py) and must match the host bit for bit.
"""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from steadfast.kernels.field import P, root_of_unity
from steadfast.kernels.ntt_host import (bit_reverse_permutation, coset_intt, coset_lde, coset_ntt, intt,
                         lde_columns, ntt)

RNG = np.random.default_rng(20240611)


def rand(shape):
    return RNG.integers(0, P, shape, dtype=np.uint32)


def naive_dft(row, w):
    """[sum_j row[j] w^(jk) for k < n] over Python integers."""
    vals = [int(v) for v in row]
    out = []
    for k in range(len(vals)):
        wk, acc, s = pow(w, k, P), 1, 0
        for v in vals:
            s += v * acc
            acc = acc * wk % P
        out.append(s % P)
    return out


def interpolate(evals):
    """Coefficients of the degree < n polynomial with the given values on <omega_n>."""
    n = len(evals)
    wi = pow(root_of_unity(n.bit_length() - 1), P - 2, P)
    ninv = pow(n, P - 2, P)
    return [c * ninv % P for c in naive_dft(evals, wi)]


def horner(coeffs, x):
    acc = 0
    for c in reversed(coeffs):
        acc = (acc * x + int(c)) % P
    return acc


def powers(x, n):
    """x^0 .. x^(n-1) mod p (uint64; doubling, products < 2^62)."""
    pw = np.ones(n, np.uint64)
    m = 1
    while m < n:
        pw[m:2 * m] = pw[:min(m, n - m)] * np.uint64(pow(x, m, P)) % np.uint64(P)
        m *= 2
    return pw


def spot_check(row, out, points, shift=1):
    """out[k] == sum_j row[j] (shift w^k)^j at a few k (direct O(n) evaluation)."""
    n = row.shape[-1]
    w = root_of_unity(n.bit_length() - 1)
    for k in points:
        terms = row.astype(np.uint64) * powers(shift * pow(w, int(k), P) % P, n) % np.uint64(P)
        assert int(out[k]) == int(terms.sum()) % P      # n < 2^27 terms < 2^31: no wrap


# ---------------------------------------------------------------------------- ntt / intt
@pytest.mark.parametrize("log_n", range(10))
def test_ntt_matches_naive_dft(log_n):
    n = 1 << log_n
    batch = [(), (1,), (3,), (2, 3)][log_n % 4]
    a = rand(batch + (n,))
    got = ntt(a)
    assert got.shape == a.shape and got.dtype == np.uint32
    w = root_of_unity(log_n)
    flat_a, flat_g = a.reshape(-1, n), got.reshape(-1, n)
    for r in range(flat_a.shape[0]):
        assert flat_g[r].tolist() == naive_dft(flat_a[r], w)
    winv = pow(w, P - 2, P)
    ninv = pow(n, P - 2, P)
    inv = intt(a).reshape(-1, n)
    for r in range(flat_a.shape[0]):
        assert inv[r].tolist() == [v * ninv % P for v in naive_dft(flat_a[r], winv)]


@pytest.mark.parametrize("log_n", range(13))
def test_round_trip_all_small_sizes(log_n):
    a = rand((3, 1 << log_n))
    assert np.array_equal(intt(ntt(a)), a)
    assert np.array_equal(ntt(intt(a)), a)


@pytest.mark.parametrize("log_n", [10, 11, 12])
def test_block_edge_sizes_against_direct_evaluation(log_n):
    # 2^12 is the host block edge (one cache block); the naive DFT is too slow here, so
    # check several outputs of several columns by direct O(n) evaluation
    n = 1 << log_n
    a = rand((3, n))
    out = ntt(a)
    inv = intt(a)
    winv = pow(root_of_unity(log_n), P - 2, P)
    ninv = pow(n, P - 2, P)
    for r in range(3):
        pts = [0, 1, 2, n // 2 - 1, n // 2, n - 1] + RNG.integers(0, n, 3).tolist()
        spot_check(a[r], out[r], pts)
        for j in pts:                     # intt[j] = n^-1 sum_k a[k] w^(-jk)
            terms = a[r].astype(np.uint64) * powers(pow(winv, int(j), P), n) % np.uint64(P)
            assert int(inv[r, j]) == int(terms.sum()) % P * ninv % P


@pytest.mark.parametrize("log_n,rows", [(13, 1), (14, 1), (14, 3), (15, 2), (16, 4), (17, 1)])
def test_large_sizes_spot_checked(log_n, rows):
    # cache-blocked passes (blocks of 2^12, slab passes above) and both threading modes
    a = rand((rows, 1 << log_n))
    out = ntt(a)
    for r in range(rows):
        spot_check(a[r], out[r], [0, 1, 5, (1 << log_n) - 1, int(RNG.integers(1 << log_n))])
        assert np.array_equal(ntt(a[r]), out[r])          # a single row alone
    assert np.array_equal(intt(out), a)


def test_two_slab_ranges_round_trip():
    # 2^22: long spans need two slab passes ([12, 21) and [21, 22))
    a = rand((1, 1 << 22))
    out = ntt(a)
    spot_check(a[0], out[0], [3, (1 << 22) - 7])
    assert np.array_equal(intt(out), a)


@given(st.integers(0, 6), st.integers(0, P - 1), st.data())
def test_linearity(log_n, c, data):
    n = 1 << log_n
    a = np.array(data.draw(st.lists(st.integers(0, P - 1), min_size=n, max_size=n)), np.uint32)
    b = np.array(data.draw(st.lists(st.integers(0, P - 1), min_size=n, max_size=n)), np.uint32)
    combo = ((a.astype(object) + c * b.astype(object)) % P).astype(np.uint32)
    expect = (ntt(a).astype(object) + c * ntt(b).astype(object)) % P
    assert ntt(combo).tolist() == expect.tolist()


@given(st.integers(0, 6), st.data())
def test_convolution_theorem(log_n, data):
    n = 1 << log_n
    a = data.draw(st.lists(st.integers(0, P - 1), min_size=n, max_size=n))
    b = data.draw(st.lists(st.integers(0, P - 1), min_size=n, max_size=n))
    cyc = [sum(a[j] * b[(k - j) % n] for j in range(n)) % P for k in range(n)]
    fa, fb = ntt(np.array(a, np.uint32)), ntt(np.array(b, np.uint32))
    prod = (fa.astype(object) * fb.astype(object) % P).astype(np.uint32)
    assert intt(prod).tolist() == cyc


# ---------------------------------------------------------------------------- cosets
@pytest.mark.parametrize("log_n", [0, 1, 3, 6, 8])
@pytest.mark.parametrize("shift", [31, 7])
def test_coset_ntt_and_intt(log_n, shift):
    n = 1 << log_n
    c = rand((2, n))
    ev = coset_ntt(c, shift)
    w = root_of_unity(log_n)
    for r in range(2):
        assert ev[r].tolist() == [horner(c[r], shift * pow(w, i, P) % P) for i in range(n)]
    assert np.array_equal(coset_intt(ev, shift), c)


@pytest.mark.parametrize("log_n", [0, 1, 2, 3, 5])
@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_coset_lde_matches_naive_evaluation(log_n, k):
    n, w = 1 << log_n, 3
    ev = rand((n, w))
    shift = 31 if k != 2 else 11
    out = coset_lde(ev, k, shift)
    assert out.shape == (n << k, w) and out.dtype == np.uint32
    om = root_of_unity(log_n + k)
    for c in range(w):
        coeffs = interpolate(ev[:, c].tolist())
        assert out[:, c].tolist() == [horner(coeffs, shift * pow(om, i, P) % P)
                                      for i in range(n << k)]
    assert np.array_equal(lde_columns(np.ascontiguousarray(ev.T), k, shift), out.T)


@pytest.mark.parametrize("log_n,k,w", [(8, 1, 2), (9, 3, 1), (12, 1, 3), (13, 2, 2),
                                       (14, 1, 1), (14, 1, 3), (15, 4, 2), (10, 6, 2)])
def test_lde_medium_sizes(log_n, k, w):
    # tiles (n >= 256), blocks and slab passes; k >= 4 takes the replication-only path
    evals_t = rand((w, 1 << log_n))
    got = lde_columns(evals_t, k)
    coeffs = intt(evals_t)
    for c in range(w):
        spot_check(coeffs[c], got[c][::1 << k], [0, 1, 7], shift=31)  # subgroup points
        big = np.zeros(1 << (log_n + k), np.uint32)
        big[:1 << log_n] = coeffs[c]
        spot_check(big, got[c], [0, 1, 2, 3, (1 << (log_n + k)) - 1], shift=31)
    assert np.array_equal(coset_lde(np.ascontiguousarray(evals_t.T), k), got.T)


def test_lde_of_low_degree_data_is_consistent():
    # evaluations of a degree < n polynomial: LDE with k=2 restricted to every 4th point
    # equals the k=0 re-evaluation on the same coset shift*<omega_n>
    ev = rand((1 << 11, 2))
    assert np.array_equal(coset_lde(ev, 2)[::4], coset_lde(ev, 0))


def test_bit_reverse_permutation():
    a = rand((3, 16))
    got = bit_reverse_permutation(a, axis=1)
    rev = [int(f"{i:04b}"[::-1], 2) for i in range(16)]
    assert np.array_equal(got, a[:, rev])
    assert np.array_equal(bit_reverse_permutation(a.T, axis=0), got.T)
    assert np.array_equal(bit_reverse_permutation(got, 1), a)


# ---------------------------------------------------------------------------- errors
def test_errors():
    with pytest.raises(ValueError):
        ntt(np.zeros(12, np.uint32))                 # not a power of two
    with pytest.raises(ValueError):
        ntt(np.zeros((2, 0), np.uint32))             # n = 0
    with pytest.raises(TypeError):
        ntt(np.zeros(8, np.int64))
    with pytest.raises(TypeError):
        intt(np.zeros(8, np.float64))
    with pytest.raises(TypeError):
        ntt([1, 2, 3, 4])
    with pytest.raises(ValueError):
        ntt(np.array(5, np.uint32))                  # 0-d
    assert ntt(np.zeros((0, 8), np.uint32)).shape == (0, 8)
    assert intt(np.zeros((2, 0, 4), np.uint32)).shape == (2, 0, 4)
    ev = rand((8, 2))
    with pytest.raises(ValueError):
        coset_lde(ev, -1)
    with pytest.raises(ValueError):
        coset_lde(ev, 25)                            # 2^28 > two-adicity
    with pytest.raises(TypeError):
        coset_lde(ev, 1.0)
    with pytest.raises(ValueError):
        coset_lde(ev.reshape(-1), 1)                 # wrong ndim
    with pytest.raises(ValueError):
        coset_lde(rand((6, 2)), 1)
    with pytest.raises(TypeError):
        coset_lde(ev.astype(np.uint64), 1)
    with pytest.raises(ValueError):
        coset_lde(ev, 1, shift=0)
    with pytest.raises(ValueError):
        coset_lde(ev, 1, shift=P)
    with pytest.raises(ValueError):
        lde_columns(rand((2, 8)), 20 + 8)
    with pytest.raises(ValueError):
        bit_reverse_permutation(rand((3, 6)), axis=1)
    assert coset_lde(np.zeros((8, 0), np.uint32), 2).shape == (32, 0)
    assert lde_columns(np.zeros((0, 8), np.uint32), 1).shape == (0, 16)


def test_public_api_rejects_non_canonical_values():
    from steadfast import kernels
    for bad in (P, P + 1, 0xFFFFFFFF):
        a = rand((2, 8))
        a[1, 5] = bad
        for fn in (kernels.ntt, kernels.intt):
            with pytest.raises(ValueError, match="canonical"):
                fn(a)
        with pytest.raises(ValueError, match="canonical"):
            kernels.coset_lde(np.ascontiguousarray(a.T), 1)
    ok = rand((2, 8))
    ok[0, 0] = P - 1                                   # the largest canonical value passes
    assert np.array_equal(kernels.ntt(ok), ntt(ok))
    assert np.array_equal(kernels.intt(ok), intt(ok))
    assert np.array_equal(kernels.coset_lde(ok.T, 2, shift=7), coset_lde(ok.T, 2, 7))
    # type and shape errors are still the kernels' own
    with pytest.raises(TypeError, match="float64"):
        kernels.ntt(np.zeros(8, np.float64))
    with pytest.raises(TypeError):
        kernels.coset_lde([[1]], 1)
    with pytest.raises(ValueError, match="power of two"):
        kernels.intt(np.zeros(6, np.uint32))
    assert kernels.ntt(np.zeros((0, 8), np.uint32)).shape == (0, 8)


def test_inputs_not_modified():
    a = rand((2, 1 << 14))
    keep = a.copy()
    ntt(a), intt(a), coset_ntt(a), coset_intt(a)
    lde_columns(a, 1)
    coset_lde(np.ascontiguousarray(a.T), 1)
    assert np.array_equal(a, keep)


def test_non_contiguous_input():
    a = rand((16, 8))
    assert np.array_equal(ntt(a.T), ntt(np.ascontiguousarray(a.T)))
    assert np.array_equal(coset_lde(a[:, ::2], 1), coset_lde(np.ascontiguousarray(a[:, ::2]), 1))


# ---------------------------------------------------------------------------- device
@pytest.fixture(scope="module")
def dev():
    from numba import cuda

    from steadfast.kernels import ntt_device
    return cuda, ntt_device


def _sim_sizes(D):
    t = D.SHARED_WORDS.bit_length() - 1      # shared tile 2^t (2^8 under the simulator)
    return [t - 1, t, t + 1]


def test_device_ntt_matches_host(dev):
    cuda, D = dev
    below, at, above = _sim_sizes(D)
    for log_n, rows in [(below, 3), (at, 1), (at, 3), (above, 1), (0, 3), (1, 1), (3, 3)]:
        a = rand((rows, 1 << log_n))
        got = D.ntt_device(cuda.to_device(a)).copy_to_host()
        assert np.array_equal(got, ntt(a)), (log_n, rows)
        if rows == 3:
            back = D.intt_device(cuda.to_device(got)).copy_to_host()
            assert np.array_equal(back, a)


def test_device_cosets_and_out(dev):
    cuda, D = dev
    a = rand((2, 64))
    out = cuda.device_array((2, 64), np.uint32)
    res = D.coset_ntt_device(cuda.to_device(a), 7, stream=0, out=out)
    assert res is out
    assert np.array_equal(out.copy_to_host(), coset_ntt(a, 7))
    assert np.array_equal(D.coset_intt_device(cuda.to_device(a), 7).copy_to_host(),
                          coset_intt(a, 7))


def test_device_stage_groups_straddle(dev):
    # force groups of at most 2 stages: slabs with row widths below and at the slab width
    cuda, D = dev
    a = rand((2, 1 << 9))
    d = cuda.to_device(a)
    # DIF (inverse twiddles, natural -> bit-reversed) then DIT (forward twiddles,
    # bit-reversed -> natural) is n times the identity
    D._run_stages(d, 0, 9, False, D._twiddles(9, True), 0, max_stages=2)
    D._run_stages(d, 0, 9, True, D._twiddles(9, False), 0, max_stages=3)
    assert np.array_equal(d.copy_to_host(), (a.astype(np.uint64) * 512 % P).astype(np.uint32))


def test_device_gpu_geometry_under_simulator(dev, monkeypatch):
    # the GPU launch geometry (2^11-word tiles, 32-word slab rows, 256 threads), which the
    # simulator build shrinks; simulator kernels read these module globals at run time
    cuda, D = dev
    monkeypatch.setattr(D, "_LOG_SHARED", 11)
    monkeypatch.setattr(D, "_LOG_SLAB_W", 5)
    monkeypatch.setattr(D, "_TPB", 256)
    monkeypatch.setattr(D, "SHARED_WORDS", 1 << 11)
    a = rand((1, 1 << 9))
    d = cuda.to_device(a)
    D._run_stages(d, 0, 9, False, D._twiddles(9, True), 0, max_stages=4)   # slab rows 1, 16, 32
    D._run_stages(d, 0, 9, True, D._twiddles(9, False), 0, max_stages=4)
    assert np.array_equal(d.copy_to_host(), (a.astype(np.uint64) * 512 % P).astype(np.uint32))


@pytest.mark.parametrize("log_n,k,w", [(3, 3, 2), (7, 1, 1), (8, 2, 1), (0, 2, 3), (8, 0, 2)])
def test_device_lde_matches_host(dev, log_n, k, w):
    # under the simulator the shared tile is 2^8 words: outputs of 2^8 and 2^10
    cuda, D = dev
    cols = rand((w, 1 << log_n))
    got = D.coset_lde_device(cuda.to_device(cols), k).copy_to_host()
    assert np.array_equal(got, lde_columns(cols, k))


def test_device_errors(dev):
    cuda, D = dev
    with pytest.raises(TypeError):
        D.ntt_device(rand((2, 8)))                   # host array
    with pytest.raises(TypeError):
        D.ntt_device(cuda.to_device(np.zeros((2, 8), np.int32)))
    with pytest.raises(ValueError):
        D.ntt_device(cuda.to_device(np.zeros(8, np.uint32)))
    with pytest.raises(ValueError):
        D.coset_lde_device(cuda.to_device(rand((2, 6))), 1)
    with pytest.raises(ValueError):
        D.coset_lde_device(cuda.to_device(rand((2, 8))), -1)
    with pytest.raises(ValueError):
        D.ntt_device(cuda.to_device(rand((2, 8))), out=cuda.device_array((2, 4), np.uint32))
    empty = D.coset_lde_device(cuda.to_device(np.zeros((0, 8), np.uint32)), 1)
    assert tuple(empty.shape) == (0, 16)


def test_public_name_is_the_function_even_after_submodule_imports():
    from steadfast import kernels  # noqa: F401
    import steadfast.kernels.ntt_host  # noqa: F401  (a submodule import must not shadow the function)
    from steadfast.kernels import coset_lde, intt, ntt
    assert callable(ntt) and ntt.__name__ == "ntt" and intt.__name__ == "intt"
    assert coset_lde.__name__ == "coset_lde"
