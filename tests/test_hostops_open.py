"""The host kernels of the openings (prover/core/hostops.py): ``eval_columns`` (R3's out-of-domain
values: every column's polynomial at an EF point) and ``deep_sum`` (R4's
sum (comb - v) / (x - zeta) over one or two points, through the minimal polynomial of
zeta) against galois' GF(p^4) (an independent implementation of the extension)."""
import galois
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from steadfast.kernels import field
from steadfast.prover.core import hostops as H

from gf4_ref import GF, P, from_gf4, gf4, to_gf4

ef = st.lists(st.integers(0, P - 1), min_size=4, max_size=4)


@settings(max_examples=25, deadline=None)
@given(ef)
def test_conjugate_polys_minimal_polynomial(z):
    m, q = H.conjugate_polys(np.array(z, np.uint32))
    x = to_gf4(z)
    if x == 0 or all(v == 0 for v in z[1:]):
        return
    mp = galois.Poly([1] + [int(v) for v in m[::-1]], field=GF)      # highest degree first
    # m(z) = 0 in GF(p^4) and m is the minimal polynomial when z generates the extension
    acc = gf4()(0)
    for c in [1] + [int(v) for v in m[::-1]]:
        acc = acc * x + gf4()(c)
    assert acc == 0
    if x.minimal_poly().degree == 4:
        assert mp == x.minimal_poly()
    # m(X) = (X - z) q(X): compare at a few base points
    for t in (0, 1, 12345, P - 1):
        qt = gf4()(t) ** 3
        for k, cf in enumerate(q):
            qt += to_gf4(cf) * gf4()(t) ** k
        mt = gf4()(t) ** 4 + sum((gf4()(int(m[k])) * gf4()(t) ** k for k in range(4)),
                                 gf4()(0))
        assert (gf4()(t) - x) * qt == mt


def _horner(col, z):
    acc = gf4()(0)
    x = to_gf4(z)
    for a in col[::-1]:
        acc = acc * x + gf4()(int(a))
    return from_gf4(acc)


@settings(max_examples=8, deadline=None)
@given(st.integers(1, 4), st.sampled_from([1, 2, 255, 256, 257, 4095, 4097, 9000]), ef,
       st.integers(0, 2 ** 32 - 1))
def test_eval_columns_against_horner(c, n, z, seed):
    coeffs = np.random.default_rng(seed).integers(0, P, (c, n), dtype=np.uint32)
    got = H.eval_columns(coeffs, np.array(z, np.uint32))
    assert got.shape == (c, 4) and got.dtype == np.uint32
    for j in range(c):
        assert got[j].tolist() == _horner(coeffs[j], z)


def test_eval_columns_extremes():
    # all coefficients p - 1 at z = p - 1 (every term's bound at once), and empty shapes
    n = 3 * 4096 + 7
    coeffs = np.full((2, n), P - 1, np.uint32)
    z = np.array([P - 1, P - 1, P - 1, P - 1], np.uint32)
    got = H.eval_columns(coeffs, z)
    assert got[0].tolist() == _horner(coeffs[0], z) == got[1].tolist()
    assert H.eval_columns(np.zeros((0, 5), np.uint32), z).shape == (0, 4)
    assert not H.eval_columns(np.zeros((3, 0), np.uint32), z).any()
    with pytest.raises(ValueError):
        H.eval_columns(np.zeros(5, np.uint32), z)


def _deep_reference(terms, xs):
    out = []
    for i, x in enumerate(xs):
        acc = gf4()(0)
        for comb, cst, z in terms:
            acc += (to_gf4(comb[i]) - to_gf4(cst)) / (gf4()(int(x)) - to_gf4(z))
        out.append(from_gf4(acc))
    return out


@settings(max_examples=10, deadline=None)
@given(st.sampled_from([1, 3, 1023, 1024, 1025, 2500]), st.booleans(),
       st.integers(0, 2 ** 32 - 1))
def test_deep_sum_against_galois(n, two, seed):
    rng = np.random.default_rng(seed)
    xs = rng.integers(0, P, n, dtype=np.uint32)
    terms = [(rng.integers(0, P, (n, 4), dtype=np.uint32),
              rng.integers(0, P, 4, dtype=np.uint32),
              rng.integers(0, P, 4, dtype=np.uint32)) for _ in range(2 if two else 1)]
    got = H.deep_sum(terms, xs)
    rows = rng.choice(n, size=min(n, 40), replace=False)
    ref = _deep_reference([(c[rows], v, z) for c, v, z in terms], xs[rows])
    assert got[rows].tolist() == ref


def test_deep_sum_zero_denominator_and_arguments():
    xs = np.arange(1, 2050, dtype=np.uint32)
    comb = np.ones((xs.size, 4), np.uint32)
    base_z = np.array([777, 0, 0, 0], np.uint32)             # z in the base field: x = z
    with pytest.raises(ZeroDivisionError):
        H.deep_sum([(comb, np.zeros(4, np.uint32), base_z)], xs)
    with pytest.raises(ValueError):
        H.deep_sum([], xs)
    with pytest.raises(ValueError):
        H.deep_sum([(comb[:5], np.zeros(4, np.uint32), np.ones(4, np.uint32))], xs)


@settings(max_examples=10, deadline=None)
@given(st.sampled_from([1, 2, 7, 64, 1000]), ef, st.integers(0, 2 ** 32 - 1))
def test_divide_linear_against_galois(n, z, seed):
    g = np.random.default_rng(seed).integers(0, P, (n, 4), dtype=np.uint32)
    q, at = H.divide_linear(g, np.array(z, np.uint32))
    gz = gf4()(0)
    for k in range(n - 1, -1, -1):
        gz = gz * to_gf4(z) + to_gf4(g[k])
    assert at.tolist() == from_gf4(gz)
    assert q[n - 1].tolist() == [0, 0, 0, 0]
    # G(X) - G(z) = (X - z) Q(X), coefficient by coefficient
    zq = [to_gf4(v) for v in q]
    for k in range(n):
        lhs = to_gf4(g[k]) - (gz if k == 0 else gf4()(0))
        rhs = (zq[k - 1] if k else gf4()(0)) - to_gf4(z) * zq[k]
        assert lhs == rhs


def _bitrev(i, bits):
    return int(format(i, f"0{bits}b")[::-1], 2) if bits else 0


@pytest.mark.parametrize("honest", [True, False])
def test_deep_quotient_paths_against_galois(honest):
    """HostStages.deep_quotient: the coefficient-form division (honest opened values) and
    the pointwise sum it falls back to (a wrong opened value: no exact division) both give
    sum_k lam^k (f_k(x) - v_k) / (x - zeta_k) at every point of the LDE domain."""
    from steadfast.prover.core.stages import Committed, HostStages
    from steadfast.verifier.protocol import SHIFT, TableShape
    rng = np.random.default_rng(5)
    log_n, log_b = 3, 2
    n, N = 1 << log_n, 1 << (log_n + log_b)
    shape = TableShape("t", log_n, log_b, 3, 0, 1, 2, 0, True, False)
    z = rng.integers(0, P, 4, dtype=np.uint32)
    lam = rng.integers(0, P, 4, dtype=np.uint32)
    w_n = field.root_of_unity(log_n)
    zn = from_gf4(to_gf4(z) * gf4()(w_n))
    mats = [rng.integers(0, P, (c, n), dtype=np.uint32) for c in (3, 4)]
    groups, ref_terms = [], []
    for m, at_next in ((0, False), (0, True), (1, False), (1, True)):
        pt = zn if at_next else z.tolist()
        vals = H.eval_columns(mats[m], np.array(pt, np.uint32))
        if not honest and m == 1 and at_next:
            vals[2, 1] = (int(vals[2, 1]) + 1) % P
        groups.append((mats[m], vals, at_next))
        ref_terms.append((mats[m], vals, pt))
    coms = {id(m): Committed(None, m, None, None) for m in mats}
    got = HostStages(table_roots=False).deep_quotient(
        shape, [(coms[id(m)], v, a) for m, v, a in groups], z, lam)
    assert got.shape == (N, 4)
    w_N = field.root_of_unity(log_n + log_b)
    L = to_gf4(lam)
    for p in (0, 1, 5, N - 1):
        x = gf4()(SHIFT * pow(w_N, _bitrev(p, log_n + log_b), P) % P)
        acc, k = gf4()(0), 0
        for m, vals, pt in ref_terms:
            for j in range(m.shape[0]):
                f = gf4()(0)
                for cf in m[j][::-1]:
                    f = f * x + gf4()(int(cf))
                acc += L ** k * (f - to_gf4(vals[j])) / (x - to_gf4(pt))
                k += 1
        assert got[p].tolist() == from_gf4(acc), p
