"""Device kernels of the v3 join (kernels/fri_device.py) against naive references
written from the v3 spec (plain Python integers, no steadfast field code), under the
CUDA simulator (tests/conftest.py switches it on).  Sizes and blocks are small so that
launches straddle block edges."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as stt
from numba import cuda

from steadfast.kernels import fri_device as FD
from steadfast.kernels import merkle as HM
from steadfast.kernels.merkle_device import commit_device
from steadfast.prover.core.stages import HostStages

P = 2013265921
G = 31
W = 11


# ---------------------------------------------------------------- naive reference (spec)

def root(log):
    return pow(31, (P - 1) >> log, P)


def brv(i, bits):
    return int(format(i, f"0{bits}b")[::-1], 2) if bits else 0


def emul(a, b):
    r = [0] * 7
    for i in range(4):
        for j in range(4):
            r[i + j] += a[i] * b[j]
    return tuple((r[i] + (W * r[i + 4] if i + 4 < 7 else 0)) % P for i in range(4))


def eadd(a, b):
    return tuple((x + y) % P for x, y in zip(a, b))


def esub(a, b):
    return tuple((x - y) % P for x, y in zip(a, b))


def escale(a, s):
    return tuple(x * s % P for x in a)


def epow(a, e):
    r = (1, 0, 0, 0)
    for _ in range(e):
        r = emul(r, a)
    return r


def point(p, h):
    """x_p = g w_{2^h}^bitrev_h(p)"""
    return G * pow(root(h), brv(p, h), P) % P


def ref_binary_fold(f, b):
    h = len(f).bit_length() - 1
    inv2 = pow(2, P - 2, P)
    out = []
    for u in range(len(f) // 2):
        x = point(2 * u, h)
        assert point(2 * u + 1, h) == (P - x) % P            # x_{2u+1} = -x_{2u}
        s = escale(eadd(f[2 * u], f[2 * u + 1]), inv2)
        d = escale(esub(f[2 * u], f[2 * u + 1]), inv2 * pow(x, P - 2, P) % P)
        out.append(eadd(s, emul(b, d)))
    return out


def ref_fold(f, beta, k, roll=None):
    b = beta
    for _ in range(k):
        f = ref_binary_fold(f, b)
        b = emul(b, b)
    if roll is not None:
        ba = epow(beta, 1 << k)
        f = [eadd(v, emul(ba, r)) for v, r in zip(f, roll)]
    return f


def evals(coeffs, h):
    """EF polynomial (list of EF coefficients) at every position of height h"""
    out = []
    for p in range(1 << h):
        x = point(p, h)
        acc = (0, 0, 0, 0)
        for c in reversed(coeffs):
            acc = eadd(escale(acc, x), c)
        out.append(acc)
    return out


def rnd_ef(rng, n):
    return [tuple(int(v) for v in rng.integers(0, P, 4)) for _ in range(n)]


def arr(vals):
    return np.array(vals, dtype=np.uint32).reshape(-1, 4)


def tup(a):
    return [tuple(int(v) for v in row) for row in np.asarray(a)]


# ---------------------------------------------------------------- fold

@pytest.mark.parametrize("h,k", [(1, 1), (3, 1), (4, 2), (5, 3), (5, 4), (4, 4)])
def test_fold_matches_naive_reference(h, k):
    rng = np.random.default_rng(h * 10 + k)
    f = rnd_ef(rng, 1 << h)
    beta = rnd_ef(rng, 1)[0]
    roll = rnd_ef(rng, 1 << (h - k))
    for r in (None, roll):
        want = ref_fold(f, beta, k, r)
        got = FD.fri_fold_arity_device(cuda.to_device(arr(f)), beta, k,
                                       roll=None if r is None else cuda.to_device(arr(r)),
                                       block=4).copy_to_host()
        assert tup(got) == want
        # the host stage (prover.core.stages.HostStages.fri_fold) agrees with both
        host = HostStages().fri_fold(arr(f), arr([beta])[0], k, h, None if r is None else arr(r))
        assert tup(host) == want


@pytest.mark.parametrize("k", [1, 2, 3])
def test_fold_is_the_rescaled_polynomial_fold(k):
    # spec: f'(Y) = E(gY) + b O(gY) for f(X) = E(X^2) + X O(X^2), one binary fold; k folds
    # with b = beta, beta^2, ...  The folded values are the evaluations of that polynomial
    # on the next (rescaled) domain g<w_{2^(h-1)}>, and the degree drops by 2 per fold.
    rng = np.random.default_rng(k)
    h, deg = 5, 8
    coeffs = rnd_ef(rng, deg)
    beta = rnd_ef(rng, 1)[0]
    c, b = coeffs, beta
    for _ in range(k):
        e, o = c[0::2], c[1::2]
        o = o + [(0, 0, 0, 0)] * (len(e) - len(o))
        c = [escale(eadd(e[i], emul(b, o[i])), pow(G, i, P)) for i in range(len(e))]
        b = emul(b, b)
    got = FD.fri_fold_arity_device(cuda.to_device(arr(evals(coeffs, h))), beta, k,
                                   block=2).copy_to_host()
    assert tup(got) == evals(c, h - k)


def test_fold_detects_a_changed_input():
    rng = np.random.default_rng(7)
    f = arr(rnd_ef(rng, 16))
    beta = rnd_ef(rng, 1)[0]
    a = FD.fri_fold_arity_device(cuda.to_device(f), beta, 2).copy_to_host()
    f[5, 2] = (int(f[5, 2]) + 1) % P
    b = FD.fri_fold_arity_device(cuda.to_device(f), beta, 2).copy_to_host()
    assert (a != b).any(axis=1).sum() == 1 and (a != b)[1].any()     # position 5 -> leaf 1


def test_fold_validates():
    f = cuda.to_device(np.zeros((8, 4), np.uint32))
    with pytest.raises(ValueError):
        FD.fri_fold_arity_device(f, (1, 0, 0, 0), 4)                  # 8 < 16
    with pytest.raises(ValueError):
        FD.fri_fold_arity_device(f, (1, 0, 0, 0), 0)
    with pytest.raises(ValueError):
        FD.fri_fold_arity_device(f, (1, 0, 0, 0), 1, roll=cuda.to_device(np.zeros((2, 4), np.uint32)))
    with pytest.raises(TypeError):
        FD.fri_fold_arity_device(np.zeros((8, 4), np.uint32), (1, 0, 0, 0), 1)


# ---------------------------------------------------------------- mu-combine

@pytest.mark.parametrize("t", [1, 2, 3])
def test_mu_combine_matches_naive(t):
    rng = np.random.default_rng(t)
    n = 9
    dqs = [rnd_ef(rng, n) for _ in range(t)]
    mu = rnd_ef(rng, 1)[0]
    want = []
    for x in range(n):
        acc = (0, 0, 0, 0)
        for j in range(t):
            acc = eadd(acc, emul(epow(mu, j), dqs[j][x]))
        want.append(acc)
    got = FD.mu_combine_device([cuda.to_device(arr(d)) for d in dqs], mu, block=4).copy_to_host()
    assert tup(got) == want
    with pytest.raises(ValueError):
        FD.mu_combine_device([cuda.to_device(arr(dqs[0])), cuda.to_device(arr(dqs[0][:4]))], mu)


# ---------------------------------------------------------------- multiproofs and caps

def naive_multiproof(indices, log_n, cap):
    """Spec text, literally: (level, index) pairs in order."""
    c = min(cap, log_n)
    s = sorted(set(indices))
    out = []
    for lev in range(log_n - c):
        for j in s:
            if j ^ 1 not in s:
                out.append((lev, j ^ 1))
        s = sorted({j >> 1 for j in s})
    return out


@settings(max_examples=60, deadline=None)
@given(stt.integers(0, 6), stt.integers(0, 8), stt.data())
def test_multiproof_rows_follow_the_spec_order(log_n, cap, data):
    idx = data.draw(stt.lists(stt.integers(0, (1 << log_n) - 1), min_size=1, max_size=12))
    offs = HM.level_offsets(log_n)
    want = [int(offs[lev]) + j for lev, j in naive_multiproof(idx, log_n, cap)]
    assert FD.multiproof_rows(np.array(idx), log_n, cap).tolist() == want


def test_multiproof_nodes_and_cap_rebuild_the_root_level():
    # gather on the device, then recompute the cap entries from the rows + nodes like a
    # verifier (hashing with the host tree's own compress: its levels are the reference)
    rng = np.random.default_rng(3)
    log_n, cap = 5, 2
    mat = rng.integers(0, P, (1 << log_n, 3), dtype=np.uint64).astype(np.uint32)
    host = HM.commit(mat)
    tree = commit_device(cuda.to_device(mat))
    got_cap = FD.cap_device(tree.nodes, log_n, cap)
    assert np.array_equal(got_cap, host.levels[log_n - cap])
    assert np.array_equal(FD.cap_device(tree.nodes, log_n, 9), host.levels[0])   # c = min(., h)
    assert np.array_equal(FD.cap_device(tree.nodes, log_n, 0), host.root.reshape(1, 8))
    idx = [3, 17, 17, 4, 30]
    rows = FD.multiproof_rows(idx, log_n, cap)
    nodes = FD.gather_node_rows_device(tree.nodes, rows, block=4)
    assert np.array_equal(nodes, host.nodes[rows])
    # walk: known nodes at level 0 are the leaves of idx; each level's missing siblings
    # come from `nodes` in order; parents from the host levels must match the known set
    it = iter(nodes)
    known = {j: host.levels[0][j] for j in sorted(set(idx))}
    for lev in range(log_n - cap):
        full = dict(known)
        for j in sorted(known):
            if j ^ 1 not in known:
                full[j ^ 1] = next(it)
        for j, v in full.items():
            assert np.array_equal(v, host.levels[lev][j])
        known = {j >> 1: host.levels[lev + 1][j >> 1] for j in full}
    assert next(it, None) is None
    for j, v in known.items():
        assert np.array_equal(v, got_cap[j])
    # FRI layer values: an arbitrary row gather of an EF array
    vals = rng.integers(0, P, (16, 4), dtype=np.uint64).astype(np.uint32)
    pos = np.array([1, 2, 3, 9, 9, 0])
    assert np.array_equal(FD.gather_node_rows_device(cuda.to_device(vals), pos, block=4), vals[pos])
    with pytest.raises(ValueError):
        FD.gather_node_rows_device(cuda.to_device(vals), [16])
    with pytest.raises(ValueError):
        FD.multiproof_rows([32], log_n, cap)
