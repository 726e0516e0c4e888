"""The verifier's fast paths against the formulas they replaced: the lane-major Montgomery
Poseidon2 (vs the scalar SPEC formula on Python ints), the transcript's block absorption
(vs element-by-element observes), and the compiled DEEP / FRI / barycentric helpers (vs
the numpy formulas of air.field)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from steadfast.air import field as F
from steadfast.verifier import poseidon2 as vp
from steadfast.verifier.composition import _barycentric
from steadfast.verifier.field import barycentric_at, ef_col, inv2
from steadfast.verifier.join import (_INVW, _coset_points, _deep_at_rows, _final_kernel,
                                     _layer_kernel)
from steadfast.verifier.protocol import TableShape, deep_groups
from steadfast.verifier.transcript import Transcript
from tests.kat import KAT_IN, KAT_OUT

P = vp.P


# ---------------------------------------------------------------- scalar reference
RCI = [[int(v) for v in r] for r in vp._RC_INIT]
RCP = [int(v) for v in vp._RC_PART]
RCF = [[int(v) for v in r] for r in vp._RC_FINAL]
V16 = [int(v) for v in vp._V16]


def _ext(s):
    y = []
    for b in range(4):
        x0, x1, x2, x3 = s[4 * b:4 * b + 4]
        y += [2 * x0 + 3 * x1 + x2 + x3, x0 + 2 * x1 + 3 * x2 + x3,
              x0 + x1 + 2 * x2 + 3 * x3, 3 * x0 + x1 + x2 + 2 * x3]
    t = [y[i] + y[4 + i] + y[8 + i] + y[12 + i] for i in range(4)]
    return [(y[i] + t[i % 4]) % P for i in range(16)]


def permute_ref(state):
    """The scalar permutation (the old kernel's formula) on Python ints."""
    s = _ext([int(x) for x in state])
    for rc in RCI:
        s = _ext([pow((x + c) % P, 7, P) for x, c in zip(s, rc)])
    for c in RCP:
        s[0] = pow((s[0] + c) % P, 7, P)
        total = sum(s)
        s = [(total + V16[i] * s[i]) % P for i in range(16)]
    for rc in RCF:
        s = _ext([pow((x + c) % P, 7, P) for x, c in zip(s, rc)])
    return s


def sponge_ref(row):
    s = [0] * 16
    for b0 in range(0, len(row), 8):
        block = [int(v) for v in row[b0:b0 + 8]]
        s[:len(block)] = block
        s = permute_ref(s)
    return s[:8]


near_top = st.one_of(st.integers(0, P - 1), st.integers(P - 4, P - 1), st.integers(0, 3))
states = st.lists(near_top, min_size=16, max_size=16)


# ---------------------------------------------------------------- permutation
def test_known_answer():
    assert permute_ref(KAT_IN) == KAT_OUT
    assert vp.permute(np.array(KAT_IN, np.uint32)).tolist() == KAT_OUT
    assert vp.duplex_blocks(np.array(KAT_IN, np.uint32),
                             np.zeros(0, np.uint32)).tolist() == KAT_OUT


@settings(max_examples=40, deadline=None)
@given(st.lists(states, min_size=1, max_size=9))
def test_batched_permutation_matches_scalar_formula(batch):
    got = vp.permute(np.array(batch, dtype=np.uint32))
    assert got.tolist() == [permute_ref(s) for s in batch]


def test_permutation_extremes_and_chunking():
    rng = np.random.default_rng(5)
    s = rng.integers(0, P, (300, 16), dtype=np.uint32)     # > one 256-state chunk
    s[:4] = P - 1
    s[4] = 0
    s[5, ::2] = P - 1
    got = vp.permute(s)
    for r in list(range(8)) + [255, 256, 299]:
        assert got[r].tolist() == permute_ref(s[r])
    # non-canonical lanes (< 2^32) act modulo p, as in the scalar kernel
    big = rng.integers(P, 1 << 32, (3, 16), dtype=np.uint64).astype(np.uint32)
    assert vp.permute(big).tolist() == [permute_ref([int(v) % P for v in r]) for r in big]


@pytest.mark.parametrize("n, w", [(1, 1), (3, 8), (5, 9), (2, 17), (260, 3)])
def test_hash_rows_matches_sponge(n, w):
    rows = np.random.default_rng(n * 31 + w).integers(0, P, (n, w), dtype=np.uint32)
    rows[0, 0] = P - 1
    got = vp.hash_rows(rows)
    for r in sorted({0, n - 1, min(n - 1, 256)}):
        assert got[r].tolist() == sponge_ref(rows[r])


def test_montgomery_helpers_at_their_bounds():
    for x in [0, 1, P - 1, P, (1 << 32) - 1]:
        m = vp._to_mont(np.uint64(x))
        assert int(m) == (x << 32) % P and int(vp._from_mont(m)) == x % P
    for y in [0, P - 1, P, 2 * P, 35 * P - 1, (1 << 37) - 1]:
        assert int(vp._red37(np.uint64(y))) == y % P
    r_inv = pow(1 << 32, P - 2, P)
    for a, b in [(P - 1, P - 1), (0, P - 1), (12345, 67890)]:
        assert int(vp._mmul(np.uint64(a), np.uint64(b))) == a * b * r_inv % P


# ---------------------------------------------------------------- transcript
@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.tuples(st.just("o"), st.lists(st.integers(0, P - 1), max_size=20)),
                          st.tuples(st.just("s"), st.integers(1, 10))), max_size=8))
def test_block_absorption_matches_element_by_element(ops):
    fast, slow = Transcript(), Transcript()
    for kind, arg in ops:
        if kind == "o":
            fast._observe_many(list(arg))
            for x in arg:
                slow._observe(x)
        else:
            assert [fast._sample() for _ in range(arg)] == [slow._sample() for _ in range(arg)]
        assert fast.state.tolist() == slow.state.tolist()
        assert fast.inbuf == slow.inbuf and fast.outbuf == slow.outbuf


# ---------------------------------------------------------------- DEEP / FRI / barycentric
def _rand_ef(rng, shape=()):
    return rng.integers(0, P, (4,) + shape).astype(np.uint64)


def _deep_old(sh, tp, rows, x, z, lam):
    """The numpy formula _deep_at_rows replaced (one EF division per group)."""
    zf = ef_col(z).reshape(4, 1)
    points = {False: zf, True: F.ef_mul_base(zf, F.root_of_unity(sh.log_n))}
    ood = {("main", False): tp.ood_main, ("main", True): tp.ood_main_next,
           ("aux", False): tp.ood_aux, ("aux", True): tp.ood_aux_next,
           ("parts", False): tp.ood_parts}
    lamf = ef_col(lam).reshape(4, 1)
    total = np.zeros((4, x.shape[0]), dtype=np.uint64)
    k = 0
    for mat, nxt in deep_groups(sh):
        vals = rows[mat]
        c = vals.shape[1]
        lp = F.ef_mul(F.ef_powers(lamf, c), F.ef_pow(lamf, k))
        k += c
        comb = (np.asarray(vals, np.uint64)[None, :, :] * lp[:, None, :]) % np.uint64(P)
        comb = comb.sum(axis=2) % np.uint64(P)
        cst = F.ef_mul(lp, ef_col(ood[(mat, nxt)])).sum(axis=1, keepdims=True) % np.uint64(P)
        den = F.ef_sub(F.ef_from_base(x), points[nxt])
        total = F.ef_add(total, F.ef_mul(F.ef_sub(comb, cst), F.ef_inv(den)))
    return total


class _TP:
    pass


@pytest.mark.parametrize("nxt_main, aux", [(False, 0), (True, 2), (True, 0), (False, 1)])
def test_deep_matches_numpy_formula(nxt_main, aux):
    rng = np.random.default_rng(int(nxt_main) * 10 + aux)
    q, w, parts = 13, 7, 3
    sh = TableShape("t", 5, 1, w, 0, aux, parts, 0, nxt_main, False)
    u32 = lambda *s: rng.integers(0, P, s, dtype=np.uint32)  # noqa: E731
    tp = _TP()
    tp.ood_main, tp.ood_main_next = u32(w, 4), (u32(w, 4) if nxt_main else u32(0, 4))
    tp.ood_aux, tp.ood_aux_next = u32(4 * aux, 4), u32(4 * aux, 4)
    tp.ood_parts = u32(4 * parts, 4)
    rows = {"main": u32(q, w), "parts": u32(q, 4 * parts), "aux": u32(q, 4 * aux)}
    tp.main_rows, tp.parts_rows, tp.aux_rows = rows["main"], rows["parts"], rows["aux"]
    z, lam = u32(4), u32(4)
    x = rng.integers(1, P, q).astype(np.uint64)
    x[0] = z[0]                                 # x - z vanishes where z is in the base field
    for zz in (z, np.array([z[0], 0, 0, 0], np.uint32)):
        assert np.array_equal(_deep_at_rows(sh, tp, x, zz, lam),
                              _deep_old(sh, tp, rows, x, zz, lam))


def _point(p, h):
    """x_p = g w_(2^h)^bitrev_h(p), from the spec (Python ints)."""
    rev = int(format(p, f"0{h}b")[::-1], 2) if h else 0
    return 31 * pow(F.root_of_unity(h), rev, P) % P


def _fold_ref(values, beta, k, h):
    """The spec's fold of a whole layer (dict position -> EF column (4, 1)) by 2^k: k
    binary folds f'(u) = (f(2u) + f(2u+1))/2 + b (f(2u) - f(2u+1)) / (2 x_2u), b = beta^(2^j)."""
    b = beta.reshape(4, 1)
    for _ in range(k):
        out = {}
        for u in range(len(values) // 2):
            e0, e1 = values[2 * u], values[2 * u + 1]
            inv = pow(2 * _point(2 * u, h), P - 2, P)
            out[u] = F.ef_add(F.ef_mul_base(F.ef_add(e0, e1), inv2),
                              F.ef_mul(b, F.ef_mul_base(F.ef_sub(e0, e1), inv)))
        values, b, h = out, F.ef_mul(b, b), h - 1
    return values


@pytest.mark.parametrize("k, h, q", [(1, 1, 1), (1, 5, 7), (2, 6, 9), (3, 7, 12), (4, 8, 20),
                                     (4, 4, 3)])
def test_layer_kernel_matches_the_spec_fold(k, h, q):
    """The batched leaf rebuild and fold against a whole-layer fold written from the spec:
    every touched leaf's committed row, and its folded value at the next height."""
    rng = np.random.default_rng(k * 100 + h)
    layer = {p: _rand_ef(rng, (1,)) for p in range(1 << h)}
    beta = _rand_ef(rng)
    folded = _fold_ref(dict(layer), beta, k, h)
    pos = np.unique(rng.integers(0, 1 << h, q))
    vals = np.concatenate([layer[int(p)] for p in pos], axis=1)
    a = 1 << k
    leaves = np.unique(pos >> k)
    others = [layer[p] for l in leaves for p in range(l * a, l * a + a) if p not in set(pos.tolist())]
    proof_vals = (np.concatenate(others, axis=1).T.astype(np.uint32) if others
                  else np.zeros((0, 4), np.uint32))
    ids, rows, out = _layer_kernel(pos.astype(np.int64), np.ascontiguousarray(vals),
                                   np.ascontiguousarray(proof_vals), k, h,
                                   np.uint64(F.root_of_unity(h)), beta.astype(np.uint64), _INVW)
    assert ids.tolist() == leaves.tolist()
    for j, l in enumerate(leaves):
        want = np.concatenate([layer[p].reshape(4) for p in range(l * a, l * a + a)])
        assert rows[j].tolist() == want.tolist()
        assert out[:, j].tolist() == folded[int(l)].reshape(4).tolist()


def test_final_kernel_and_coset_points():
    rng = np.random.default_rng(3)
    h = 5
    pos = np.array([0, 3, 17, 31], np.int64)
    assert _coset_points(pos, h, np.uint64(F.root_of_unity(h))).tolist() == \
        [_point(int(p), h) for p in pos]
    coeffs = rng.integers(0, P, (4, 4), dtype=np.uint32)          # L = 4, (L, 4)
    vals = np.zeros((4, pos.size), np.uint64)
    for r, p in enumerate(pos):
        x = _point(int(p), h)
        for c in range(4):
            vals[c, r] = sum(int(coeffs[j, c]) * pow(x, j, P) for j in range(4)) % P
    w = np.uint64(F.root_of_unity(h))
    assert _final_kernel(pos, vals, coeffs, h, w) == -1
    vals[2, 2] = (vals[2, 2] + 1) % P
    assert _final_kernel(pos, vals, coeffs, h, w) == 2


@pytest.mark.parametrize("log_n, k", [(1, 1), (4, 3), (10, 2)])
def test_barycentric_matches_field_module(log_n, k):
    rng = np.random.default_rng(log_n)
    cols = rng.integers(0, P, (1 << log_n, k), dtype=np.uint32)
    for z in (_rand_ef(rng, (1,)), np.array([[7], [0], [0], [0]], np.uint64)):
        assert np.array_equal(_barycentric(cols, z, log_n), barycentric_at(cols, z, log_n))
    # z in the domain: the zero denominator takes the fallback, same values
    w = F.root_of_unity(log_n)
    z = np.array([[pow(w, 3 % (1 << log_n), P)], [0], [0], [0]], np.uint64)
    assert np.array_equal(_barycentric(cols, z, log_n), barycentric_at(cols, z, log_n))


@pytest.mark.parametrize("a", [0, 1, 5])
def test_combine_ef_columns_vectorised(a):
    from steadfast.verifier.field import ef_basis_combine
    from steadfast.verifier.composition import _combine_ef_columns

    def naive(vals):                # one EF value per 4 coefficient columns, in turn
        out = np.empty((vals.shape[0] // 4, 4), dtype=np.uint64)
        for k in range(out.shape[0]):
            out[k] = ef_basis_combine([ef_col(vals[4 * k + c]).reshape(4, 1)
                                       for c in range(4)]).reshape(4)
        return out
    vals = np.random.default_rng(a).integers(0, P, (4 * a, 4), dtype=np.uint32)
    if a:
        vals[0] = P - 1
    assert np.array_equal(_combine_ef_columns(vals), naive(vals))


def _composition_old(air, sh, tp, pv, chal, alpha, z):
    """The formula _composition_values replaced: air.eval.numerator_at_point on a
    point_leaf (typed values, numpy folding), Q(z) = sum_i z^(i n) q_i(z) in numpy."""
    from steadfast.air import numerator_at_point, point_leaf
    from steadfast.verifier.composition import _combine_ef_columns
    zf = ef_col(z).reshape(4, 1)
    opened = {("main", False): tp.ood_main, ("main", True): tp.ood_main_next}
    if sh.prep_width:
        opened[("prep", False)] = barycentric_at(air.preprocessed, zf, sh.log_n)
        opened[("prep", True)] = barycentric_at(
            air.preprocessed, F.ef_mul_base(zf, F.root_of_unity(sh.log_n)), sh.log_n)
    if sh.aux_cols:
        opened[("aux", False)] = _combine_ef_columns(tp.ood_aux)
        opened[("aux", True)] = _combine_ef_columns(tp.ood_aux_next)
    term = tp.terminal if sh.aux_cols else np.zeros(4, np.uint32)
    num, zh = numerator_at_point(air, point_leaf(opened, [int(v) for v in pv], chal, term),
                                 ef_col(np.asarray(alpha)), zf, sh.log_n)
    zn = F.ef_pow(zf, sh.n)
    qz = np.zeros((4, 1), dtype=np.uint64)
    zpow = F.ef_from_base(np.ones(1, np.uint64))
    parts = _combine_ef_columns(tp.ood_parts)
    for i in range(sh.num_parts):
        qz = F.ef_add(qz, F.ef_mul(zpow, ef_col(parts[i]).reshape(4, 1)))
        zpow = F.ef_mul(zpow, zn)
    return num.reshape(4), zh.reshape(4), F.ef_mul(zh, qz).reshape(4)


def test_composition_kernel_matches_numerator_at_point():
    """The compiled composition check (constraint program run as EF values, folded with
    the selectors at z) == air.eval.numerator_at_point and the numpy Q(z), on the example
    AIRs and the 18 AIRs of an RV32IM proof (a guest's program, registers and io tables,
    every chip, BYTES and POSEIDON2) at random opened values (and a base-field z); a
    changed opened value changes N(z)."""
    from steadfast.air import CHALLENGE_NAMES, examples as ex
    from steadfast.rv32.chips.program import image_of
    from steadfast.rv32.tables import table_airs
    from steadfast.verifier.composition import _composition_values
    from tests.txblocks import program
    airs = [ex.fibonacci_air(), ex.cubic_air(), ex.adder_air(), ex.range_air(4),
            ex.pairs_air(4), ex.counter_air()]
    airs += table_airs(image_of(program("hello")), b"abc", b"hello from rv32im\ncba", 2)
    rng = np.random.default_rng(5)
    u32 = lambda *s: rng.integers(0, P, s, dtype=np.uint32)  # noqa: E731
    for air in airs:
        sh = _shape_for(air, 4 if air.fixed_height is None else air.fixed_height.bit_length() - 1)
        tp = _TP()
        tp.ood_main = u32(sh.main_width, 4)
        tp.ood_main_next = u32(sh.main_width if sh.uses_next_main else 0, 4)
        tp.ood_aux, tp.ood_aux_next = u32(sh.aux_width, 4), u32(sh.aux_width, 4)
        tp.ood_parts = u32(sh.parts_width, 4)
        tp.terminal = u32(4) if sh.aux_cols else np.zeros(0, np.uint32)
        tp.ood_main[0] = P - 1
        pv = [int(v) for v in rng.integers(0, P, sh.num_public)]
        chal = {nm: u32(4).astype(np.uint64) for nm in CHALLENGE_NAMES}
        alpha = u32(4)
        for z in (u32(4), np.array([rng.integers(2, P), 0, 0, 0], np.uint32)):
            got = _composition_values(air, sh, tp, pv, chal, alpha, z)
            want = _composition_old(air, sh, tp, pv, chal, alpha, z)
            for g, w in zip(got, want):
                assert np.array_equal(np.asarray(g, np.uint64), np.asarray(w, np.uint64)), air.name
        tp.ood_main = tp.ood_main.copy()
        tp.ood_main[0, 1] ^= 1
        assert not np.array_equal(_composition_values(air, sh, tp, pv, chal, alpha, z)[0],
                                  got[0]), air.name


def _shape_for(air, log_n):
    from steadfast.verifier.protocol import table_shape

    class _Par:                      # what table_shape reads
        log_blowup = 1
    try:
        return table_shape(air, log_n, _Par())
    except ValueError:               # an AIR of higher degree needs a larger blowup
        _Par.log_blowup = 2
        return table_shape(air, log_n, _Par())
