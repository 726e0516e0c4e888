"""Completeness of the multi-table STARK on the host path, determinism, parameters."""
import threading

import numba
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from steadfast.air.field import P

from steadfast.air import AirBuilder, AirError, ConstraintViolation
from steadfast.air import examples as ex
from steadfast.prover import HostStages, Params, Spans, prove
import functools

from steadfast.verifier import decode
from steadfast.verifier import verify as _verify

# These tests prove with weak parameters on purpose (few queries, little grinding):
# their verifications say so explicitly by requiring no security minimum.
verify = functools.partial(_verify, min_security_bits=0)
FAST = Params(log_blowup=1, num_queries=8, pow_bits=2)


def _roundtrip(airs, traces, pvs, params=FAST):
    proof = prove(traces, airs, pvs, params)
    res = verify(proof, airs, pvs)
    assert res.public_values == [list(map(int, pv)) for pv in pvs]
    return proof


@pytest.mark.parametrize("log_n", [1, 2, 3, 6])
def test_fibonacci(log_n):
    t, pv = ex.fibonacci_trace(log_n, 3, 4)
    _roundtrip([ex.fibonacci_air()], [t], [pv])


def test_degree3_two_parts():
    air = ex.cubic_air(4)
    assert air.num_parts == 2
    t, pv = ex.cubic_trace(5, 4)
    proof = _roundtrip([air], [t], [pv])
    assert decode(proof).tables[0].ood_parts.shape == (8, 4)


def test_degree4_three_parts_with_blowup4():
    b = AirBuilder("quartic")
    x, y = b.main("x"), b.main("y")
    b.when_transition(y.next - x * x * x * y)             # D = 4 -> 3 parts, M = 4n
    b.when_transition(x.next - x - 1)
    a = b.build()
    n = 16
    x0 = np.arange(1, n + 1, dtype=np.uint64)
    y = np.empty(n, np.uint64)
    y[0] = 5
    for i in range(1, n):
        y[i] = x0[i - 1] ** 3 % ex.P * y[i - 1] % ex.P
    t = np.stack([x0, y], axis=1).astype(np.uint32)
    with pytest.raises(AirError, match="num_parts"):
        prove([t], [a], None, FAST)
    _roundtrip([a], [t], [[]], Params(log_blowup=2, num_queries=6, pow_bits=1))


def test_three_tables_linked_by_logup():
    airs, traces, pvs = ex.lookup_block(5, 6)
    proof = _roundtrip(airs, traces, pvs)
    p = decode(proof)
    assert [tp.log_n for tp in p.tables] == [5, 8, 6]       # three different heights
    # the terminals are nonzero individually and cancel in sum
    assert all(tp.terminal.any() for tp in p.tables)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 6), st.integers(0, 2**32 - 1))
def test_logup_accumulator_is_cyclic(log_n, seed):
    """acc[0] = 0, acc[i+1] - acc[i] = r_i - U on every row, wrapping from the last row
    to row 0, and n U = sum_i r_i (checked with Python integers, coefficientwise)."""
    from steadfast.prover.core.stages import logup_accumulator
    n = 1 << log_n
    r = np.random.default_rng(seed).integers(0, P, size=(4, n), dtype=np.uint64)
    acc, u = logup_accumulator(r)
    assert acc.shape == (4, n) and u.shape == (4,)
    for c in range(4):
        a = [int(v) for v in acc[c]]
        assert a[0] == 0
        for i in range(n):
            assert (a[(i + 1) % n] - a[i] - int(r[c, i]) + int(u[c])) % P == 0
        assert (n * int(u[c]) - sum(int(v) for v in r[c])) % P == 0


def test_public_values():
    t, pv = ex.counter_trace(4, 9, 7)
    _roundtrip([ex.counter_air()], [t], [pv])
    # two tables with public values each, different heights
    t2, pv2 = ex.fibonacci_trace(2, 1, 1)
    _roundtrip([ex.counter_air(), ex.fibonacci_air()], [t, t2], [pv, pv2])


def test_defaults_once():
    t, pv = ex.fibonacci_trace(4)
    proof = prove([t], [ex.fibonacci_air()], [pv])          # 50 queries at blowup 4, 16 bits
    p = decode(proof)
    assert (p.params.log_blowup, p.params.num_queries, p.params.pow_bits) == (2, 50, 16)
    assert p.params.query_bits() == 116
    verify(proof, [ex.fibonacci_air()], [pv])


def test_check_mode_refuses_bad_trace():
    t, pv = ex.fibonacci_trace(3)
    t[5, 0] += 1
    with pytest.raises(ConstraintViolation, match="row 4"):
        prove([t], [ex.fibonacci_air()], [pv], FAST)


def test_proof_bytes_identical_across_runs_and_thread_counts():
    airs, traces, pvs = ex.lookup_block(4, 8)
    airs = airs + [ex.cubic_air()]
    traces = traces + [ex.cubic_trace(4)[0]]
    pvs = pvs + [[]]
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = prove(traces, airs, pvs, FAST)
        numba.set_num_threads(max(1, numba.config.NUMBA_NUM_THREADS))
        many = prove(traces, airs, pvs, FAST)
        again = prove(traces, airs, pvs, FAST, stages=HostStages())
    finally:
        numba.set_num_threads(before)
    assert one == many == again


def _pool_threads(monkeypatch) -> set:
    """Spy on the host kernels' shared thread pool (kernels.host_pool): (kind, name) of the
    threads that ran an NTT task range (kind "ntt": kernels.ntt_host._tasks) or a Poseidon2
    chunk range (kind "poseidon2", the leaf hashes of every commitment:
    kernels.poseidon2._sponge_kernel, or with the 32-bit-lane kernel, the default,
    kernels.poseidon2_lanes._sponge_lanes_kernel).  All are looked up as module globals at
    call time, so wrapping them sees every call, threaded or not."""
    from steadfast.kernels import ntt_host, poseidon2, poseidon2_lanes
    names: set = set()
    for kind, mod, fn in (("ntt", ntt_host, "_tasks"), ("poseidon2", poseidon2, "_sponge_kernel"),
                          ("poseidon2", poseidon2_lanes, "_sponge_lanes_kernel")):
        real = getattr(mod, fn)

        def spy(*args, _real=real, _kind=kind):
            names.add((_kind, threading.current_thread().name))
            return _real(*args)
        monkeypatch.setattr(mod, fn, spy)
    return names


def test_proof_bytes_identical_threaded_host_paths(monkeypatch):
    """Tables large enough that the multi-threaded host paths really run (the NTT splits
    transforms of >= 2^15 words over threads, the Merkle leaf hashing splits >= 8 chunks
    of 64 rows): the adder table is 2^14 rows x 4 columns (LDE 2^15 x 4, plus its LogUp
    aux columns), the cubic one 2^14 x 4 with two quotient parts.  Proved at 1 and at 2
    numba threads, the bytes must be equal -- and the spy checks that the 2-thread proof
    did run both on the shared pool's threads and the 1-thread proof on neither."""
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip(f"numba has {numba.config.NUMBA_NUM_THREADS} thread(s): nothing to "
                    "compare 1 thread against")
    airs, traces, pvs = ex.lookup_block(14, 6)
    assert traces[0].shape == (1 << 14, 4)
    airs = airs + [ex.cubic_air(3)]
    traces = traces + [ex.cubic_trace(14, 3)[0]]
    pvs = pvs + [[]]
    from steadfast.kernels.host_pool import THREAD_NAME_PREFIX
    names = _pool_threads(monkeypatch)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = prove(traces, airs, pvs, FAST)
        single = set(names)
        names.clear()
        numba.set_num_threads(2)
        two = prove(traces, airs, pvs, FAST)
    finally:
        numba.set_num_threads(before)
    assert {n for _, n in single} == {threading.main_thread().name}, single
    for kind in ("ntt", "poseidon2"):
        assert any(k == kind and n.startswith(THREAD_NAME_PREFIX) for k, n in names), names
    assert one == two
    verify(two, airs, pvs)


def test_spans_record_rounds_per_table():
    airs, traces, pvs = ex.lookup_block(4, 8)
    spans = Spans()
    proof = prove(traces, airs, pvs, FAST, spans=spans)
    names = spans.stats.names()
    for r in ("r1_main", "r1_pow", "grind", "r1_aux", "r2_quotient", "r3_ood", "r4_deep",
              "r4_fri", "r4_pow", "r4_open", "table"):
        assert r in names
    tables = {t for _, t, _ in spans.stats.as_rows() if t}
    assert tables == {a.name for a in airs}
    assert spans.stats.counters["proof_bytes"] == len(proof)


def test_bad_arguments():
    t, pv = ex.fibonacci_trace(3)
    with pytest.raises(ValueError, match="tables for"):
        prove([t, t], [ex.fibonacci_air()], [pv], FAST)
    with pytest.raises(ValueError, match="log_blowup"):
        prove([t], [ex.fibonacci_air()], [pv], Params(log_blowup=0))
    with pytest.raises(TypeError):
        prove([t.astype(np.float64)], [ex.fibonacci_air()], [pv], FAST)


def test_soundness_estimates():
    from steadfast.verifier.protocol import johnson_queries
    assert Params().query_bits() == 116
    assert Params(log_blowup=2, num_queries=50, pow_bits=20).query_bits() == 120
    # sqrt(1/2) + 2^-5 per query at blowup 2: (116 - 16) / 0.4376 -> 229
    assert johnson_queries(1, 116, 16) == 229
    assert johnson_queries(2, 116, 16) == 110
    assert johnson_queries(3, 116, 16) < johnson_queries(2, 116, 16)


def test_preprocessed_columns_local_and_next_row():
    """A ROM-like table: fixed (pc, inc) columns, part of the statement; the witness
    accumulates inc along the rows and must equal pc where flagged."""
    n = 16
    pc = np.arange(n, dtype=np.uint32)
    inc = (np.arange(n) % 3).astype(np.uint32)
    b = AirBuilder("rom")
    ppc, pinc = b.prep("pc"), b.prep("inc")
    x, y = b.main("x"), b.main("y")
    b.when_first_row(x - pinc, name="x0")
    b.when_transition(x.next - x - pinc.next, name="acc")       # next row of a prep column
    b.assert_zero(y - ppc * pinc, name="y")
    rom = b.build(preprocessed=np.stack([pc, inc], axis=1))
    assert rom.uses_next_prep and rom.uses_next_main
    xs = np.cumsum(inc.astype(np.int64)).astype(np.uint32)
    t = np.stack([xs, pc * inc], axis=1).astype(np.uint32)
    proof = _roundtrip([rom], [t], [[]])
    # the statement includes the preprocessed values: another ROM does not verify
    other = AirBuilder("rom")
    ppc2, pinc2 = other.prep("pc"), other.prep("inc")
    x2, y2 = other.main("x"), other.main("y")
    other.when_first_row(x2 - pinc2, name="x0")
    other.when_transition(x2.next - x2 - pinc2.next, name="acc")
    other.assert_zero(y2 - ppc2 * pinc2, name="y")
    inc2 = inc.copy()
    inc2[5] += 1
    rom2 = other.build(preprocessed=np.stack([pc, inc2], axis=1))
    from steadfast.verifier import VerificationError
    with pytest.raises(VerificationError):
        verify(proof, [rom2], [[]])


def _spec_heights(params, log_ns):
    """The v3 FRI layer heights, step by step from the spec (independent of
    verifier.protocol.fri_layer_heights)."""
    table_h = [ln + params.log_blowup for ln in log_ns]
    h_final = min(params.log_final_poly_len, min(log_ns)) + params.log_blowup
    hs = [max(table_h)]
    while hs[-1] > h_final:
        cand = [hs[-1] - params.log_fri_arity, h_final]
        lower = [h for h in table_h if h < hs[-1]]
        if lower:
            cand.append(max(lower))
        hs.append(max(cand))
    return hs


def _exact_bits(params, tables):
    """Independent reference for verifier.security (v3): the same terms as exact rationals
    (fractions.Fraction over |EF| = p^4) -- per table alpha, ood, deep; once the FRI
    queries, fri_mu (tables sharing a height), fri_fold (a_i * 2^h_i per layer) and the
    LogUp term -- and floor(-log2) of the sum."""
    from fractions import Fraction
    ef = Fraction(2013265921) ** 4
    total = Fraction(1, 2 ** (params.log_blowup * params.num_queries + params.pow_bits))
    frac, arity = 0, 0
    for t in tables:
        n = 2 ** t["log_n"]
        big = n * 2 ** params.log_blowup
        total += Fraction(t["constraints"] - 1) / ef
        total += Fraction(t["max_degree"] * n) / ef / 2 ** params.commit_pow_bits
        total += Fraction((t["deep_columns"] - 1) * big) / ef / 2 ** params.deep_pow_bits
        frac += n * t["interactions"]
        arity = max(arity, t["max_arity"])
    heights = [t["log_n"] + params.log_blowup for t in tables]
    for h in set(heights):
        total += Fraction((heights.count(h) - 1) * 2 ** h) / ef / 2 ** params.commit_pow_bits
    hs = _spec_heights(params, [t["log_n"] for t in tables])
    for i in range(len(hs) - 1):
        total += Fraction(2 ** (hs[i] - hs[i + 1]) * 2 ** hs[i]) / ef / 2 ** params.commit_pow_bits
    total += Fraction(frac * (arity + 1)) / ef / 2 ** params.logup_pow_bits
    bits = 0
    while Fraction(1, 2 ** (bits + 1)) >= total:        # largest b with total <= 2^-b
        bits += 1
    return bits


def test_fri_layer_heights_by_hand():
    from steadfast.verifier.protocol import fri_layer_heights
    # arity 4, blowup 2, final 2^2: tables at LDE heights 20, 18, 11, 5 (h_final = 5)
    p = Params(log_blowup=1, log_fri_arity=2, log_final_poly_len=2)
    assert fri_layer_heights(p, [18, 16, 9, 3]) == [19, 17, 15, 13, 11, 10, 8, 6, 4, 3]
    assert fri_layer_heights(Params(log_blowup=1, log_fri_arity=3, log_final_poly_len=5),
                             [18, 16, 9, 6]) == [19, 17, 14, 11, 10, 7, 6]
    assert fri_layer_heights(Params(log_blowup=1, log_final_poly_len=4), [3, 3]) == [4]  # r = 0
    assert fri_layer_heights(Params(log_blowup=1, log_fri_arity=1, log_final_poly_len=0),
                             [2]) == [3, 2, 1]


@pytest.mark.parametrize("arity", [1, 2, 3, 4])
@pytest.mark.parametrize("final", [0, 2, 5])
def test_fri_layer_heights_against_the_spec(arity, final):
    from steadfast.verifier.protocol import fri_layer_heights
    rng = np.random.default_rng(arity * 10 + final)
    for _ in range(30):
        lb = int(rng.integers(1, 4))
        log_ns = [int(v) for v in rng.integers(1, 25 - lb, int(rng.integers(1, 6)))]
        p = Params(log_blowup=lb, log_fri_arity=arity, log_final_poly_len=final)
        hs = fri_layer_heights(p, log_ns)
        assert hs == _spec_heights(p, log_ns)
        # every table height is a layer height; each step folds by 2..2^arity
        assert {ln + lb for ln in log_ns} <= set(hs)
        assert all(1 <= a - b <= arity for a, b in zip(hs, hs[1:]))


@pytest.mark.parametrize("params", [Params(), Params(num_queries=8, pow_bits=2),
                                    Params(log_blowup=2, num_queries=50, pow_bits=20,
                                           logup_pow_bits=0, deep_pow_bits=0,
                                           commit_pow_bits=0, log_fri_arity=3, log_cap=4),
                                    Params(log_blowup=3, num_queries=34, log_fri_arity=1,
                                           log_final_poly_len=0),
                                    Params(num_queries=2, pow_bits=0)])
def test_security_figure_against_exact_rationals(params):
    """The reported figure is floor(-log2(sum of every term over every table)), checked
    against an exact-rational recomputation, on the LogUp example (two tables with
    interactions) at several heights; the figure never exceeds the weakest term."""
    from steadfast.verifier.security import air_facts, proof_security
    airs = [ex.fibonacci_air()] + list(ex.lookup_block()[0])
    assert sum(len(a.interactions) for a in airs) >= 2
    for log_ns in ([3] * len(airs), [10] * len(airs), [20] * len(airs), [24] * len(airs),
                   [24, 20, 20, 3], [3, 10, 17, 24], [5, 5, 9, 1]):
        log_ns = log_ns[:len(airs)]
        rep = proof_security(params, airs, log_ns)
        ref = _exact_bits(params, [air_facts(a, ln, params) for a, ln in zip(airs, log_ns)])
        assert rep.bits == ref, (rep.describe(), ref)
        assert rep.bits <= min(rep.terms.values())
    # the query term counts once (v3: one FRI): 2 queries at blowup 2 are 2^-2 -> 1 bit
    weak = proof_security(Params(log_blowup=1, num_queries=2, pow_bits=0), airs,
                          [3] * len(airs))
    assert weak.bits == 1 and weak.limiting == "fri_queries"
    assert proof_security(Params(log_blowup=1, num_queries=1, pow_bits=0), airs,
                          [3] * len(airs)).bits == 0
