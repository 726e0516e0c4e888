"""The join's host stages and the prover's FRI (proof format 3) against naive references
written from docs/protocol.md §5: folded values equal the polynomial E(gY) + b O(gY)
evaluated directly, roll-in, mu-combination, final polynomial, the layer heights rule,
the FRI openings, and honest proofs over mixed table heights."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from steadfast.air import examples as ex
from steadfast.air import field as F
from steadfast.prover import Params, prove
from steadfast.prover.core.rounds import _fri_openings, fri_layer_heights
from steadfast.prover.core.stages import HostStages
from steadfast.verifier import decode
from steadfast.verifier.protocol import SHIFT

P = F.P
S = HostStages()


def _rand_ef(rng, n):
    return rng.integers(0, P, size=(4, n), dtype=np.uint64)


def _bitrev(p, bits):
    return int(format(p, f"0{bits}b")[::-1], 2) if bits else 0


def _points(h):
    """x_p = g w_{2^h}^bitrev_h(p), p = 0 .. 2^h - 1 (base field, Python ints)."""
    w = F.root_of_unity(h)
    return [SHIFT * pow(w, _bitrev(p, h), P) % P for p in range(1 << h)]


def _evaluate(coeffs, xs):
    """EF polynomial (coeffs (4, d), constant first) at base points, by Horner: (N, 4)."""
    xs = np.asarray(xs, np.uint64)
    acc = np.zeros((4, xs.size), np.uint64)
    for j in range(coeffs.shape[1] - 1, -1, -1):
        acc = F.ef_add(F.ef_mul_base(acc, xs), coeffs[:, j:j + 1])
    return np.ascontiguousarray(acc.T.astype(np.uint32))


def _fold_coeffs(coeffs, b):
    """f'(Y) = E(gY) + b O(gY): coefficient j is (E_j + b O_j) g^j."""
    e, o = coeffs[:, 0::2], coeffs[:, 1::2]
    c = F.ef_add(e, F.ef_mul(b, o))
    return F.ef_mul_base(c, F.powers(SHIFT, c.shape[1]))


@settings(max_examples=12, deadline=None)
@given(h=st.integers(2, 7), k=st.integers(1, 4), lb=st.integers(1, 2), seed=st.integers(0, 99),
       roll=st.booleans())
def test_fold_equals_the_folded_polynomial(h, k, lb, seed, roll):
    k = min(k, h - lb) if h > lb else 0
    if k == 0:
        return
    rng = np.random.default_rng(seed)
    coeffs = _rand_ef(rng, 1 << (h - lb))                  # degree < 2^h / blowup
    beta = rng.integers(0, P, size=4, dtype=np.uint64)
    values = _evaluate(coeffs, _points(h))
    rollin = _evaluate(_rand_ef(rng, 1 << (h - k - lb)), _points(h - k)) if roll else None
    got = S.fri_fold(values, beta.astype(np.uint32), k, h, rollin)
    c = coeffs
    b = beta.reshape(4, 1)
    for _ in range(k):
        c = _fold_coeffs(c, b)
        b = F.ef_mul(b, b)
    want = _evaluate(c, _points(h - k))
    if roll:
        want = np.ascontiguousarray(F.ef_add(want.T.astype(np.uint64),
                                             F.ef_mul(b, rollin.T.astype(np.uint64))).T.astype(np.uint32))
    np.testing.assert_array_equal(got, want)


def test_binary_fold_formula_pointwise():
    """One binary fold, element by element from the spec formula."""
    rng = np.random.default_rng(5)
    h = 4
    v = rng.integers(0, P, size=(1 << h, 4), dtype=np.uint32)
    beta = rng.integers(0, P, size=4, dtype=np.uint32)
    got = S.fri_fold(v, beta, 1, h)
    xs = _points(h)
    inv2 = pow(2, P - 2, P)
    for u in range(1 << (h - 1)):
        a, bb = v[2 * u].astype(np.uint64).reshape(4, 1), v[2 * u + 1].astype(np.uint64).reshape(4, 1)
        assert xs[2 * u + 1] == P - xs[2 * u]
        s = F.ef_mul_base(F.ef_add(a, bb), inv2)
        d = F.ef_mul_base(F.ef_sub(a, bb), pow(2 * xs[2 * u], P - 2, P))
        want = F.ef_add(s, F.ef_mul(beta.astype(np.uint64).reshape(4, 1), d)).reshape(4)
        np.testing.assert_array_equal(got[u], want.astype(np.uint32))
    with pytest.raises(ValueError):
        S.fri_fold(v, beta, 5, h)
    with pytest.raises(ValueError):
        S.fri_fold(v, beta, 1, h, rollin=v)


def test_fri_input_is_the_mu_combination():
    rng = np.random.default_rng(2)
    dqs = [rng.integers(0, P, size=(16, 4), dtype=np.uint32) for _ in range(3)]
    mu = rng.integers(0, P, size=4, dtype=np.uint32)
    got = S.fri_input(dqs, mu)
    m = mu.astype(np.uint64).reshape(4, 1)
    want = dqs[0].T.astype(np.uint64)
    want = F.ef_add(want, F.ef_mul(m, dqs[1].T.astype(np.uint64)))
    want = F.ef_add(want, F.ef_mul(F.ef_mul(m, m), dqs[2].T.astype(np.uint64)))
    np.testing.assert_array_equal(got, want.T.astype(np.uint32))
    np.testing.assert_array_equal(S.fri_input(dqs[:1], mu), dqs[0])
    with pytest.raises(ValueError):
        S.fri_input([], mu)


@pytest.mark.parametrize("h,L", [(3, 4), (5, 4), (4, 1), (6, 8)])
def test_fri_final_interpolates_and_checks_the_degree(h, L):
    rng = np.random.default_rng(h)
    coeffs = _rand_ef(rng, L)
    got = S.fri_final(_evaluate(coeffs, _points(h)), h, L)
    np.testing.assert_array_equal(got, coeffs.T.astype(np.uint32))
    high = np.zeros((4, L + 1), np.uint64)
    high[:, :L] = coeffs
    high[0, L] = 1                                          # degree exactly L
    with pytest.raises(RuntimeError, match="degree"):
        S.fri_final(_evaluate(high, _points(h)), h, L)


def naive_heights(log_ldes, lb, lf, la):
    """docs/protocol.md §5 step 4, literally."""
    h_final = min(lf, min(log_ldes) - lb) + lb
    hs = [max(log_ldes)]
    while hs[-1] > h_final:
        h = hs[-1]
        below = [t for t in log_ldes if t < h]
        hs.append(max([h - la, h_final] + ([max(below)] if below else [])))
    return hs


def test_heights_rule():
    assert fri_layer_heights([19, 17, 10, 4], 1, 2, 2) == [19, 17, 15, 13, 11, 10, 8, 6, 4, 3]
    assert fri_layer_heights([5, 5], 1, 4, 2) == [5]                  # r = 0
    assert fri_layer_heights([3], 1, 0, 1) == [3, 2, 1]
    assert fri_layer_heights([12, 9], 1, 2, 3) == [12, 9, 6, 3]
    rng = np.random.default_rng(0)
    for _ in range(300):
        lb, la, lf = int(rng.integers(1, 4)), int(rng.integers(1, 5)), int(rng.integers(0, 6))
        ldes = [int(x) + lb for x in rng.integers(1, 20, size=int(rng.integers(1, 6)))]
        hs = fri_layer_heights(ldes, lb, lf, la)
        assert hs == naive_heights(ldes, lb, lf, la)
        assert all(0 < a - b <= la for a, b in zip(hs, hs[1:]))
        assert all(t in hs for t in ldes if t >= hs[-1])            # every roll-in point


def test_fri_openings_skip_the_queried_positions():
    rng = np.random.default_rng(4)
    vals = rng.integers(0, P, size=(32, 4), dtype=np.uint32)
    tree = S.fri_commit_layer(vals, 2)
    positions = np.array([5, 7, 5, 20, 31, 30])
    got, nodes = _fri_openings(tree, positions, 2, S, 1)
    want = []
    qs = set(positions.tolist())
    for leaf in sorted({p >> 2 for p in qs}):
        for p in range(4 * leaf, 4 * leaf + 4):
            if p not in qs:
                want.append(vals[p])
    np.testing.assert_array_equal(got, np.array(want, np.uint32))
    assert nodes.shape[1] == 8


def _mixed_block():
    """Tables of LDE heights 4, 7 and 10 (blowup 2), linked by nothing."""
    airs = [ex.fibonacci_air(), ex.cubic_air(), ex.fibonacci_air()]
    tr = [ex.fibonacci_trace(8), ex.cubic_trace(5), ex.fibonacci_trace(2)]
    return airs, [t for t, _ in tr], [pv for _, pv in tr]


@pytest.mark.parametrize("la,lc,lf", [(1, 0, 0), (2, 2, 2), (3, 4, 1)])
def test_honest_proof_shapes_with_mixed_heights(la, lc, lf):
    airs, traces, pvs = _mixed_block()
    params = Params(log_blowup=1, num_queries=6, pow_bits=1, log_final_poly_len=lf, log_fri_arity=la,
                    log_cap=lc, logup_pow_bits=1, deep_pow_bits=1, commit_pow_bits=1)
    proof = decode(prove(traces, airs, pvs, params))        # fri_final checks the degree
    ldes = [t.shape[0].bit_length() - 1 + 1 for t in traces]
    hs = fri_layer_heights(ldes, 1, lf, la)
    f = proof.fri
    assert f.num_layers == len(hs) - 1 and len(f.fold_nonces) == f.num_layers
    assert f.final_poly.shape == (1 << (hs[-1] - 1), 4)
    for i, (h, hn) in enumerate(zip(hs, hs[1:])):
        assert f.caps[i].shape == (1 << min(lc, hn), 8)    # tree over 2^(h - log a) leaves
    # one mixed tree per kind (format 6): its cap height is capped by the lowest table
    assert proof.commits.main_cap.shape == (1 << min(lc, min(ldes)), 8)
    assert proof.commits.parts_cap.shape == (1 << min(lc, min(ldes)), 8)
    for t, ln in zip(proof.tables, ldes):
        assert 1 <= t.main_rows.shape[0] <= 6
        assert t.main_rows.shape[0] == t.parts_rows.shape[0]
    try:
        from steadfast.verifier import verify
    except ImportError:                                     # pragma: no cover
        return
    verify(encode_proof(proof), airs, pvs, min_security_bits=0)


def encode_proof(p):
    from steadfast.verifier import encode
    return encode(p)


def test_join_halves_hand_the_dqs_over_and_leave_the_records():
    """rounds.take_quotients, r4_fri (the FRI with its queries), r4_open (the openings):
    the bytes of prove(); the chains' records are not changed (the DQs are handed over
    and each taken once); R4Fri.positions is each table's query positions; a missing or
    doubled table is refused."""
    from steadfast.prover.core.prove import prepare
    from steadfast.prover.core.rounds import (prove_tables, r1_challenges, r1_main, r4_fri, r4_open,
                                              take_quotients)
    from steadfast.prover.common.spans import NullSpans
    airs, traces, pvs = _mixed_block()
    params = Params(log_blowup=1, num_queries=6, pow_bits=1, log_final_poly_len=1,
                    log_fri_arity=2, log_cap=1, logup_pow_bits=1, deep_pow_bits=1,
                    commit_pow_bits=1)
    st, sp = prepare(traces, airs, pvs, params), NullSpans()
    r1 = r1_main(st, S, sp)
    ch = r1_challenges(st, r1, sp, S.permute)
    deeps, mixed = prove_tables(st, r1, ch, S, sp)
    given = list(deeps)
    records, dqs = take_quotients(given[::-1])                  # any order
    assert all(a is b and a.dq is not None for a, b in zip(given, deeps))
    assert [d.index for d in records] == [0, 1, 2] and all(d.dq is None for d in records)
    fri = r4_fri(st, r1.transcript, records, dqs, S, sp)
    with pytest.raises(KeyError):                               # taken by the FRI
        dqs.take([0])
    for shape in st.shapes:
        want = np.unique(fri.queries >> (fri.heights[0] - shape.log_lde))
        np.testing.assert_array_equal(fri.positions(shape.log_lde), want)
    assert encode_proof(r4_open(st, ch, records, fri, S, sp, mixed)) == prove(traces, airs, pvs,
                                                                              params)
    with pytest.raises(ValueError, match="one R4Deep per table"):
        take_quotients(deeps[:-1] + deeps[:1])


@pytest.mark.parametrize("k,roll", [(1, False), (2, True), (3, True)])
def test_fold_and_input_over_several_ranges(k, roll):
    """Layers long enough for the host pool's ranges (kernels/fri_host.py): the fold equals
    the binary-fold formula applied level by level in numpy, the input the mu combination."""
    import numba
    rng = np.random.default_rng(40 + k)
    h = 15
    v = rng.integers(0, P, size=(1 << h, 4), dtype=np.uint32)
    v[:64] = P - 1
    beta = rng.integers(0, P, size=4, dtype=np.uint32)
    rollin = rng.integers(0, P, size=(1 << (h - k), 4), dtype=np.uint32) if roll else None
    inv2 = np.uint64((P + 1) // 2)
    f, b, hh = v.T.astype(np.uint64), beta.astype(np.uint64).reshape(4, 1), h
    for _ in range(k):
        xs = np.asarray(_points(hh), np.uint64)[0::2]
        inv = np.array([pow(2 * int(x), P - 2, P) for x in xs], np.uint64)
        e0, e1 = f[:, 0::2], f[:, 1::2]
        f = F.ef_add(F.ef_mul_base(F.ef_add(e0, e1), inv2),
                     F.ef_mul(b, F.ef_mul_base(F.ef_sub(e0, e1), inv)))
        b, hh = F.ef_mul(b, b), hh - 1
    if roll:
        f = F.ef_add(f, F.ef_mul(b, rollin.T.astype(np.uint64)))
    for threads in (1, numba.config.NUMBA_NUM_THREADS):
        numba.set_num_threads(threads)
        try:
            np.testing.assert_array_equal(S.fri_fold(v, beta, k, h, rollin), f.T.astype(np.uint32))
            dqs = [v, v[::-1].copy(), rng.integers(0, P, size=v.shape, dtype=np.uint32)]
            m = beta.astype(np.uint64).reshape(4, 1)
            want = F.ef_add(F.ef_add(dqs[0].T.astype(np.uint64),
                                     F.ef_mul(m, dqs[1].T.astype(np.uint64))),
                            F.ef_mul(F.ef_mul(m, m), dqs[2].T.astype(np.uint64)))
            np.testing.assert_array_equal(S.fri_input(dqs, beta), want.T.astype(np.uint32))
        finally:
            numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
