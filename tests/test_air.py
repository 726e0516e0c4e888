"""The symbolic AIR: DSL, degree analysis, programs, evaluators and check mode.

References are independent: galois for field arithmetic, direct per-row Python loops for
the constraint values, and the textbook selector formulas."""
import galois
import numpy as np
import pytest

from steadfast.air import (AirBuilder, AirError, ConstraintViolation, LookupImbalance, check_traces,
                 compile_program, evaluate)
from steadfast.air import examples as ex
from steadfast.air import field as F
from steadfast.air.eval import (coset_points, domain_leaf, numerator_at_point, point_leaf,
                      quotient_on_coset, selectors_on_coset)

P = F.P
GF = galois.GF(P)
rng = np.random.default_rng(7)


def _rand(*shape):
    return rng.integers(0, P, shape, dtype=np.uint64)


# ------------------------------------------------------------------ field (vs galois)

def test_base_and_ef_arithmetic_match_galois():
    a, b = _rand(50), _rand(50)
    assert np.array_equal(F.mul(a, b), (GF(a) * GF(b)).view(np.ndarray).astype(np.uint64))
    assert np.array_equal(F.sub(a, b), (GF(a) - GF(b)).view(np.ndarray).astype(np.uint64))
    assert np.array_equal(F.inv(a[a != 0]), (GF(1) / GF(a[a != 0])).view(np.ndarray).astype(np.uint64))
    # EF: schoolbook product of coefficient lists reduced with X^4 = 11 (Python ints)
    x, y = _rand(4, 6), _rand(4, 6)
    prod = F.ef_mul(x, y)
    inv = F.ef_inv(x)
    for k in range(6):
        full = [0] * 7
        for i in range(4):
            for j in range(4):
                full[i + j] += int(x[i, k]) * int(y[j, k])
        want = [(full[i] + 11 * (full[i + 4] if i + 4 < 7 else 0)) % P for i in range(4)]
        assert [int(v) for v in prod[:, k]] == want
    one = F.ef_mul(x, inv)
    assert np.array_equal(one, F.ef_from_base(np.ones(6, np.uint64)))
    # the single-scalar fast path (Python ints) agrees with the vectorised one, incl. p-1
    x[:, 0] = P - 1
    for k in range(6):
        for shape in ((4, 1), (4,)):
            got = F.ef_mul(x[:, k].reshape(shape), y[:, k].reshape(shape))
            assert got.shape == shape and got.dtype == np.uint64
            assert np.array_equal(got.reshape(4), F.ef_mul(x, y)[:, k])
        assert int(F.pow_(x[0, k:k + 1], P - 2)[0]) == int(F.inv(x[0, k:k + 2])[0])


# ------------------------------------------------------------------ degrees, parts, errors

def test_degrees_and_num_parts():
    fib = ex.fibonacci_air()
    assert fib.max_degree == 2 and fib.num_parts == 1      # first/last-row +1
    cub = ex.cubic_air()
    assert cub.max_degree == 3 and cub.num_parts == 2
    b = AirBuilder("d4")
    x = b.main("x")
    b.when_first_row(x * x * x)                            # 3 + 1 for the first-row condition
    a4 = b.build()
    assert a4.max_degree == 4 and a4.num_parts == 3
    a4.check_parts(2)
    with pytest.raises(AirError, match="num_parts = 3 > 2\\^log_blowup = 2"):
        a4.check_parts(1)
    b = AirBuilder("t")
    x = b.main("x")
    b.when_transition(x.next - x ** 3)                     # transition adds nothing
    assert b.build().max_degree == 3


def test_logup_batching_follows_degree_budget():
    adder = ex.adder_air()                                 # D_user = 2: one interaction per batch
    # one column per batch but the last, plus the accumulator (which holds the last batch)
    assert adder.aux_width == len(adder.interactions)
    assert [c.name for c in adder.constraints[-4:]] == ["logup_h[0]", "logup_h[1]",
                                                        "logup_h[2]", "logup_acc"]
    assert all(c.when == "all" for c in adder.constraints[-4:])
    b = AirBuilder("cpu")
    x, y, z = b.main("x"), b.main("y"), b.main("z")
    b.when_transition(z.next - x * y * z)                  # D_user = 3: pairs fit
    for v in (x, y, z):
        b.send("bus", [v])
    cpu = b.build()
    assert [len(bt) for bt in cpu.lookup_batches] == [2, 1]
    assert cpu.max_degree == 3 and cpu.aux_width == 2


def test_definition_errors():
    b = AirBuilder("e")
    x = b.main("x")
    with pytest.raises(AirError, match="next row"):
        b.assert_zero(x.next - x)
    with pytest.raises(AirError, match="declared twice"):
        b.main("x")
    with pytest.raises(TypeError):
        x.next.next
    with pytest.raises(TypeError):
        x + 1.5
    with pytest.raises(TypeError):
        bool(x)
    with pytest.raises(AirError, match="preprocessed"):
        b2 = AirBuilder("p")
        b2.prep("c")
        b2.main("m")
        b2.build()
    a1 = AirBuilder("a1")
    a1.send("bus", [a1.main("u")])
    a2 = AirBuilder("a2")
    v = a2.main("v")
    a2.receive("bus", [v, v])
    from steadfast.air import check_buses
    with pytest.raises(AirError, match="arity"):
        check_buses([a1.build(), a2.build()])


def test_program_shares_subexpressions_and_fingerprint():
    b = AirBuilder("s")
    x, y = b.main("x"), b.main("y")
    b.assert_zero((x + y) * (x + y) - (y + x))
    a = b.build()
    ops = [op for op, *_ in a.constraint_program.ops]
    assert ops.count("add") == 1                           # x+y and y+x are one node
    assert a.fingerprint() == b.build().fingerprint()
    b.assert_zero(x - 1)
    assert b.build().fingerprint() != a.fingerprint()


# ------------------------------------------------------------------ evaluators

def _naive_fib_values(trace, pv, row):
    n = trace.shape[0]
    a, b = (int(v) for v in trace[row])
    an, bn = (int(v) for v in trace[(row + 1) % n])
    return [(a - pv[0]) % P, (b - pv[1]) % P, (an - b) % P, (bn - a - b) % P, (b - pv[2]) % P]


def test_domain_evaluator_matches_rowwise_reference():
    air = ex.fibonacci_air()
    trace, pv = ex.fibonacci_trace(3, 2, 5)
    trace = trace.copy()
    trace[4, 1] = 12345                                    # make constraints nonzero somewhere
    leaf = domain_leaf(trace.T, None, None, 1, pv, {})
    vals = evaluate(air.user_program, leaf)
    for row in range(8):
        want = _naive_fib_values(trace, pv, row)
        got = [int(np.broadcast_to(v, (8,))[row]) for v in vals]
        assert got == want


def test_selectors_match_definitions():
    log_n, log_m = 3, 5
    sel, inv_zh = selectors_on_coset(log_n, 31, log_m)
    x = GF(coset_points(31, log_m).astype(np.int64))
    w = GF(F.root_of_unity(log_n))
    one = GF(1)
    zh = x ** 8 - one
    assert np.array_equal(sel["first"], (zh / (x - one)).view(np.ndarray).astype(np.uint64))
    assert np.array_equal(sel["last"], (zh / (x - w ** -1)).view(np.ndarray).astype(np.uint64))
    assert np.array_equal(sel["transition"], (x - w ** -1).view(np.ndarray).astype(np.uint64))
    assert np.array_equal(inv_zh, (GF(1) / zh).view(np.ndarray).astype(np.uint64))


def _interp_eval(values, log_n, x_pts):
    """Evaluate the polynomial through values on <w_n> at base points (naive Lagrange
    in Python integers)."""
    n = 1 << log_n
    w = F.root_of_unity(log_n)
    xs = [pow(w, i, P) for i in range(n)]
    out = []
    for x in x_pts:
        x = int(x)
        acc = 0
        for i in range(n):
            num, den = 1, 1
            for j in range(n):
                if j != i:
                    num = num * (x - xs[j]) % P
                    den = den * (xs[i] - xs[j]) % P
            acc += int(values[i]) * num * pow(den, P - 2, P)
        out.append(acc % P)
    return np.array(out, dtype=np.uint64)


def test_quotient_on_coset_equals_point_evaluator():
    """The vectorised coset evaluator and the EF point evaluator agree: evaluating at a
    base-field point x of the coset (embedded in EF) gives N(x)/Z_H(x) both ways."""
    air = ex.cubic_air()
    trace, pv = ex.cubic_trace(3)
    log_n, log_m = 3, 4
    xs = coset_points(31, log_m)
    cols = np.stack([_interp_eval(trace[:, j], log_n, xs) for j in range(trace.shape[1])])
    sel, inv_zh = selectors_on_coset(log_n, 31, log_m)
    alpha = _rand(4, 1)
    q = quotient_on_coset(air, domain_leaf(cols, None, None, 2, pv, {}), alpha, sel, inv_zh)
    w = F.root_of_unity(log_n)
    for k in (0, 5, 11):
        x = int(xs[k])
        xn = x * w % P
        opened = {("main", False): np.stack([F.ef_from_base(np.array([c[k]]))[:, 0] for c in cols]),
                  ("main", True): np.stack([F.ef_from_base(_interp_eval(trace[:, j], log_n, [xn]))[:, 0]
                                            for j in range(trace.shape[1])])}
        num, zh = numerator_at_point(air, point_leaf(opened, pv, {}), alpha,
                                     F.ef(x), log_n)
        assert np.array_equal(F.ef_mul(q[:, k:k + 1], zh), num)


# ------------------------------------------------------------------ check mode

def test_check_mode_names_table_constraint_row():
    airs, traces, pvs = ex.lookup_block(4, 8)
    check_traces(airs, traces, pvs)
    bad = [t.copy() for t in traces]
    row = int(np.nonzero(bad[0][:, 3] == 1)[0][2])
    bad[0][row, 2] += 1                                   # c != a + b on an active row
    with pytest.raises(ConstraintViolation) as e:
        check_traces(airs, bad, pvs)
    assert (e.value.table, e.value.constraint, e.value.row) == ("adder", "sum", row)
    fib = ex.fibonacci_air()
    t, pv = ex.fibonacci_trace(3)
    with pytest.raises(ConstraintViolation, match="'result'"):
        check_traces([fib], [t], [[pv[0], pv[1], pv[2] + 1]])


def test_check_mode_lookup_imbalance():
    airs, traces, pvs = ex.lookup_block(4, 8)
    bad = [t.copy() for t in traces]
    bad[1][7, 1] += 1                                     # RANGE claims one more 7
    with pytest.raises(LookupImbalance) as e:
        check_traces(airs, bad, pvs)
    assert e.value.bus == "byte" and e.value.values == (7,)


def test_shape_checks():
    fib = ex.fibonacci_air()
    t, pv = ex.fibonacci_trace(3)
    with pytest.raises(TypeError, match="uint32"):
        check_traces([fib], [t.astype(np.int64)], [pv])
    with pytest.raises(AirError, match="power of two"):
        check_traces([fib], [t[:6]], [pv])
    with pytest.raises(AirError, match="public values"):
        check_traces([fib], [t], [pv[:2]])


def test_compile_program_text_is_deterministic():
    b = AirBuilder("d")
    x = b.main("x")
    p1 = compile_program([x * x + 1, x ** 5])
    p2 = compile_program([x * x + 1, x ** 5])
    assert p1.text() == p2.text()


def test_scalar_point_evaluator_matches_numpy_interpreter():
    """evaluate_point (Python ints, used at the out-of-domain point) == evaluate (numpy)
    on every constraint of the example AIRs and the 18 AIRs of an RV32IM proof (a guest's
    program, registers and io tables, every chip, BYTES and POSEIDON2), at random EF
    leaves."""
    from steadfast.air.program import POINT_EF_KINDS, evaluate, evaluate_point
    from tests.leaves import random_leaves
    from steadfast.rv32.chips.program import image_of
    from steadfast.rv32.tables import table_airs
    from tests.txblocks import program
    airs = [ex.fibonacci_air(), ex.cubic_air(), ex.adder_air(), ex.range_air(4),
            ex.pairs_air(4), ex.counter_air()]
    airs += table_airs(image_of(program("hello")), b"abc", b"hello from rv32im\ncba", 2)
    r = np.random.default_rng(11)
    for air in airs:
        leaf = random_leaves(r, POINT_EF_KINDS, edge=0.2)
        want = evaluate(air.constraint_program, leaf, POINT_EF_KINDS)
        got = evaluate_point(air.constraint_program, leaf, POINT_EF_KINDS)
        assert len(got) == len(want) > 0
        for k, (g, w) in enumerate(zip(got, want)):
            assert np.array_equal(np.asarray(g, np.uint64).reshape(-1),
                                  np.asarray(w, np.uint64).reshape(-1)), (air.name, k)


def test_check_lookups_matches_a_naive_multiset_count():
    """The sorted-runs bus check agrees with a plain dict count: it raises exactly when
    some tuple's sends - receives is non-zero mod p, and names such a tuple and its net."""
    from steadfast.air.check import check_lookups, interaction_rows
    airs, traces, pvs = ex.lookup_block(4, 8)
    r = np.random.default_rng(5)
    for trial in range(12):
        bad = [t.copy() for t in traces]
        for _ in range(trial % 4):                           # 0..3 perturbed multiplicities
            row = int(r.integers(0, bad[1].shape[0]))
            bad[1][row, 1] = (int(bad[1][row, 1]) + int(r.integers(1, 3))) % P
        if trial == 3:                                       # two changes that cancel
            bad = [t.copy() for t in traces]
            bad[1][2, 1] += 1
            bad[1][2, 1] -= 1
        net: dict = {}
        for air, main, pv in zip(airs, bad, pvs):
            for it, (vals, mult) in zip(air.interactions, interaction_rows(air, main, pv)):
                for key, m in zip(map(tuple, vals.T.astype(np.int64).tolist()), mult.tolist()):
                    k = (it.bus, key)
                    net[k] = (net.get(k, 0) + (m if it.sign > 0 else -m)) % P
        imbalanced = {k: v for k, v in net.items() if v}
        if not imbalanced:
            check_lookups(airs, bad, pvs)
            continue
        with pytest.raises(LookupImbalance) as e:
            check_lookups(airs, bad, pvs)
        assert imbalanced[(e.value.bus, e.value.values)] == e.value.net % P
