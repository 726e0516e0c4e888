"""The compiled host quotient (kernels/constraint_host.py) against the numpy interpreter
(HostStages.quotient with compiled=False: air.program.evaluate per chunk), bit for bit.

AIRs: the air/examples ones (first/last/transition selectors, public values, degree 3 in
two parts, LogUp with preprocessed columns and several batches: aux columns read at the
next row on "all" rows, the terminal), a degree-4 AIR (three parts, M = 4n), an AIR
without constraints, and the 18 RV32IM tables on a real small program's traces.  Block sizes
straddle the quotient domain (1, 3, 7, 64 points per block against M = 16 .. 2^17)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from steadfast.air import AirBuilder
from steadfast.air import examples as ex
from steadfast.air import field as AF
from steadfast.kernels import constraint_host as CH
from steadfast.kernels.ntt_host import lde_columns
from steadfast.prover.core.stages import Committed, HostStages
from steadfast.verifier.proof_format import Params
from steadfast.verifier.protocol import SHIFT, table_shape

P = AF.P
HOST = HostStages()


def rnd(rng, *shape):
    return rng.integers(0, P, shape, dtype=np.uint64).astype(np.uint32)


def com(cols):
    return None if cols is None else Committed(cols, None, None, None)


def _quartic():
    b = AirBuilder("quartic")
    x, y = b.main("x"), b.main("y")
    b.when_transition(y.next - x * x * x * y)            # degree 5 with the selector: 3 parts
    b.when_transition(x.next - x - 1)
    b.when_first_row(x - b.pv("x0"))
    b.when_last_row(y - b.pv("y_last") * x + 7)
    b.assert_zero(x * (x - 1) * 0 + y - y)                # constant-folding-free zero
    return b.build()


def _empty():
    b = AirBuilder("unconstrained")
    b.main("x")
    return b.build()


AIRS = {"fibonacci": ex.fibonacci_air, "cubic": ex.cubic_air, "adder": ex.adder_air,
        "range": lambda: ex.range_air(8), "pairs": lambda: ex.pairs_air(4),
        "quartic": _quartic, "empty": _empty}


def _log_n(air, default=4):
    return default if air.fixed_height is None else air.fixed_height.bit_length() - 1


def both(air, shape, main, prep, aux, pv, chal, alpha, term, block=None):
    """(numpy reference, compiled) for the same inputs (natural LDE columns)."""
    want = HOST.quotient(air, shape, com(main), prep, com(aux), pv, chal, alpha, term,
                         compiled=False)
    if block is None:
        got = HOST.quotient(air, shape, com(main), prep, com(aux), pv, chal, alpha, term,
                            compiled=True)
    else:
        got = CH.quotient_host(air, shape, main, prep, aux, pv, chal, alpha, term, SHIFT,
                               block=block)
    return want, got


def random_inputs(air, log_n, log_blowup, rng):
    log_blowup = max(log_blowup, (air.num_parts - 1).bit_length())
    shape = table_shape(air, log_n, Params(log_blowup=log_blowup, num_queries=2, pow_bits=0))
    N = 1 << shape.log_lde
    main = rnd(rng, air.main_width, N)
    prep = rnd(rng, air.prep_width, N) if air.prep_width else None
    aux = rnd(rng, 4 * air.aux_width, N) if air.aux_width else None
    term = rnd(rng, 4) if air.aux_width else None
    chal = {"logup_beta": rnd(rng, 4), "logup_gamma": rnd(rng, 4)}
    return shape, main, prep, aux, list(rnd(rng, air.num_public)), chal, rnd(rng, 4), term


@pytest.mark.parametrize("name", sorted(AIRS))
@pytest.mark.parametrize("log_blowup,block", [(1, None), (2, 7)])
def test_example_airs_match_interpreter(name, log_blowup, block):
    air = AIRS[name]()
    rng = np.random.default_rng(len(name) + log_blowup)
    args = random_inputs(air, _log_n(air), log_blowup, rng)
    want, got = both(air, *args, block=block)
    assert want.shape == (4, 1 << args[0].log_quotient) and got.dtype == np.uint32
    assert np.array_equal(got, want)


def test_generic_over_leaves_and_conditions():
    """The test AIRs cover every leaf kind (next-row main/prep/aux, pv, chal, term, const),
    every row condition and base/EF operand mixes of every op."""
    progs = [AIRS[n]().constraint_program for n in AIRS]
    kinds = {op for p in progs for op, *_ in p.ops}
    assert {"main", "prep", "aux", "pv", "chal", "term", "const", "add", "sub", "mul",
            "neg"} <= kinds
    assert any(nx for p in progs for _, nx in p.leaves("aux"))
    assert any(nx for p in progs for _, nx in p.leaves("prep")) or \
        any(nx for p in progs for _, nx in p.leaves("main"))
    whens = {c.when for n in AIRS for c in AIRS[n]().constraints}
    assert whens == {"all", "first", "last", "transition"}
    codes = {int(c) for n in AIRS for c in CH.encode(AIRS[n]()).code[:, 0]}
    assert len(codes) >= 14, sorted(codes)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), name=st.sampled_from(sorted(AIRS)),
       log_n=st.integers(1, 5), block=st.sampled_from([1, 3, 16, 64, 256]))
def test_property_random_traces_and_challenges(seed, name, log_n, block):
    air = AIRS[name]()
    if air.fixed_height is not None:
        log_n = _log_n(air)
    rng = np.random.default_rng(seed)
    args = random_inputs(air, log_n, 1 + seed % 2, rng)
    want, got = both(air, *args, block=block)
    assert np.array_equal(got, want)


def test_mutations_are_seen():
    """The comparison can fail: another alpha, terminal or next-row value changes Q."""
    air = ex.adder_air()
    rng = np.random.default_rng(5)
    shape, main, prep, aux, pv, chal, alpha, term = random_inputs(air, 4, 1, rng)
    base = CH.quotient_host(air, shape, main, prep, aux, pv, chal, alpha, term, SHIFT)
    alpha2 = alpha.copy()
    alpha2[1] = (alpha2[1] + 1) % P
    term2 = term.copy()
    term2[0] = (term2[0] + 1) % P
    aux2 = aux.copy()
    stride = 1 << (shape.log_lde - shape.log_quotient)      # quotient point j: LDE j * stride
    aux2[-1, 5 * stride] = (aux2[-1, 5 * stride] + 1) % P   # the accumulator's last column
    for args in [(main, prep, aux, pv, chal, alpha2, term), (main, prep, aux, pv, chal, alpha, term2),
                 (main, prep, aux2, pv, chal, alpha, term)]:
        assert not np.array_equal(CH.quotient_host(air, shape, *args, SHIFT), base)


@pytest.mark.parametrize("log_blowup", [1, 2])
def test_rv32_tables_on_a_small_program(log_blowup):
    """The 18 RV32IM tables of a real execution (tests/rv32_samples.py's all-classes
    program: every instruction chip, memory, io and a Poseidon2 call): traces, LogUp aux
    trace and LDEs as a proof builds them, at log_blowup 1 (the chips' LogUp at degree 3,
    2 parts) and 2 (degree 5, 4 parts: the quotient domain is the whole LDE domain)."""
    from rv32_samples import all_classes
    from steadfast.rv32.tables import SLOTTED
    from steadfast.rv32.traces import build_traces
    prog, ex, _ = all_classes()
    # k = 1 everywhere: the chooser's k = 2..4 rows at this size only widen the compile
    tr = build_traces(prog, ex, max_cycles=1000, log_blowup=log_blowup,
                      slots={name: 1 for name in SLOTTED})
    by_name = dict(zip(tr.names, tr.airs))
    assert by_name["alu"].num_parts == (2 if log_blowup == 1 else 4)
    params = Params(log_blowup=log_blowup, num_queries=2, pow_bits=0)
    rng = np.random.default_rng(12)
    seen = []
    for air, trace, pv in zip(tr.airs, tr.traces, tr.table_public_values):
        trace = np.asarray(trace, dtype=np.uint32)
        shape = table_shape(air, trace.shape[0].bit_length() - 1, params)
        main = lde_columns(np.ascontiguousarray(trace.T), shape.log_blowup, SHIFT)
        prep = HOST.prep_lde(air, shape)
        chal = {"logup_beta": rnd(rng, 4), "logup_gamma": rnd(rng, 4)}
        aux = term = None
        if air.interactions:
            aux_t, term = aux_both(air, shape, trace, pv, chal)
            aux = lde_columns(np.ascontiguousarray(aux_t.T), shape.log_blowup, SHIFT)
        want, got = both(air, shape, main, prep, aux, list(pv), chal, rnd(rng, 4), term)
        assert np.array_equal(got, want), air.name
        seen.append(air.name)
    assert len(seen) == 18


def aux_build_with(mode, *args):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(CH.ENV, mode)
        return HOST.aux_build(*args)


def aux_both(air, shape, trace, pv, chal):
    """HostStages.aux_build with the compiled h columns and with the numpy loop: equal."""
    aux_c, term_c = aux_build_with("compiled", air, shape, trace, pv, chal)
    aux_n, term_n = aux_build_with("numpy", air, shape, trace, pv, chal)
    assert np.array_equal(aux_c, aux_n) and np.array_equal(term_c, term_n), air.name
    return aux_c, term_c


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), name=st.sampled_from(["adder", "range", "pairs"]),
       log_n=st.integers(1, 5))
def test_logup_h_columns_match_numpy(seed, name, log_n):
    air = AIRS[name]()
    if air.fixed_height is not None:
        log_n = _log_n(air)
    rng = np.random.default_rng(seed)
    shape = table_shape(air, log_n, Params(log_blowup=1, num_queries=2, pow_bits=0))
    trace = rnd(rng, shape.n, air.main_width)
    chal = {"logup_beta": rnd(rng, 4), "logup_gamma": rnd(rng, 4)}
    aux_both(air, shape, trace, list(rnd(rng, air.num_public)), chal)


def test_logup_vanishing_denominator():
    air = ex.adder_air()
    shape = table_shape(air, 3, Params(log_blowup=1, num_queries=2, pow_bits=0))
    trace = np.zeros((8, air.main_width), np.uint32)
    # beta = 0: d = gamma - bus_id on every row; gamma = the first bus id -> d = 0
    chal = {"logup_beta": np.zeros(4, np.uint32),
            "logup_gamma": np.array([air.interactions[0].bus_id, 0, 0, 0], np.uint32)}
    with pytest.raises(ValueError, match="vanished"):
        CH.logup_h_host(air, trace, [], chal)
    with pytest.raises(ValueError, match="main"):
        CH.logup_h_host(air, trace[:, :1], [], chal)


def test_env_switch_and_errors(monkeypatch):
    monkeypatch.delenv(CH.ENV, raising=False)
    assert CH.compiled_quotient_enabled()
    monkeypatch.setenv(CH.ENV, "numpy")
    assert not CH.compiled_quotient_enabled()
    monkeypatch.setenv(CH.ENV, "fast")
    with pytest.raises(ValueError, match=CH.ENV):
        CH.compiled_quotient_enabled()
    air = ex.fibonacci_air()
    rng = np.random.default_rng(1)
    shape, main, prep, aux, pv, chal, alpha, term = random_inputs(air, 3, 1, rng)
    with pytest.raises(ValueError, match="main_lde"):
        CH.quotient_host(air, shape, main[:1], None, None, pv, chal, alpha, None, SHIFT)
    with pytest.raises(ValueError, match="public values"):
        CH.quotient_host(air, shape, main, None, None, pv[:1], chal, alpha, None, SHIFT)
    with pytest.raises(ValueError, match="alpha"):
        CH.quotient_host(air, shape, main, None, None, pv, chal, [P, 0, 0, 0], None, SHIFT)
    lair = ex.adder_air()
    shape, main, prep, aux, pv, chal, alpha, term = random_inputs(lair, 3, 1, rng)
    with pytest.raises(ValueError, match="aux_lde and terminal"):
        CH.quotient_host(lair, shape, main, prep, None, pv, chal, alpha, None, SHIFT)
    with pytest.raises(ValueError, match="logup_gamma"):
        CH.quotient_host(lair, shape, main, prep, aux, pv, {"logup_beta": chal["logup_beta"]},
                         alpha, term, SHIFT)


def test_destination_never_aliases_an_operand():
    """The encoder never writes an instruction's result into one of its operands' slots
    (the block loops then never overlap, which keeps LLVM's vectorised loop: an aliasing
    destination made its runtime overlap check fail and the op ran scalar, ~3x slower for
    the RV32 tables); checked on every RV32IM table's constraint and interaction programs
    and the examples'."""
    from rv32_samples import all_classes
    from steadfast.rv32.tables import SLOTTED
    from steadfast.rv32.traces import build_traces
    prog, ex_, _ = all_classes()
    tr = build_traces(prog, ex_, max_cycles=1000, log_blowup=1,
                      slots={name: 1 for name in SLOTTED})
    airs = list(tr.airs) + [ex.fibonacci_air()] + list(ex.lookup_block()[0])
    interior = {CH.ADD_BB, CH.ADD_EB, CH.ADD_EE, CH.SUB_BB, CH.SUB_EB, CH.SUB_BE, CH.SUB_EE,
                CH.MUL_BB, CH.MUL_EB, CH.MUL_EE, CH.NEG_B, CH.NEG_E}
    checked = 0
    for air in airs:
        encs = [CH.encode(air)]
        if air.interactions:
            encs.append(CH._encode(air, air.interaction_program, CH.STORE))
        for enc in encs:
            for op, a, b, d in enc.code.tolist():
                if op in interior:
                    assert d != a and (op in (CH.NEG_B, CH.NEG_E) or d != b), (air.name, op)
                    checked += 1
    assert checked > 1000


def test_opcode_names_name_the_opcodes_in_order():
    from steadfast.kernels import constraint_host as CH
    assert len(set(CH.OPCODE_NAMES)) == len(CH.OPCODE_NAMES) == CH.STORE + 1
    assert [getattr(CH, n) for n in CH.OPCODE_NAMES] == list(range(len(CH.OPCODE_NAMES)))


@pytest.mark.parametrize("name,log_blowup,stride", [
    ("quartic", 2, 1), ("quartic", 3, 2), ("quartic", 4, 4), ("adder", 1, 2), ("adder", 2, 4),
    ("pairs", 1, 2), ("pairs", 2, 4), ("cubic", 4, 8), ("range", 3, 8)])
def test_a_whole_lde_read_at_its_stride(name, log_blowup, stride):
    """quotient_host reads LDE columns on the whole LDE domain at the quotient domain's
    stride (points i * N/M), with the next row's wrap at M: equal to the same columns
    copied onto the quotient domain, and to the numpy interpreter."""
    import dataclasses
    air = AIRS[name]()
    rng = np.random.default_rng(log_blowup)
    shape, main, prep, aux, pv, chal, alpha, term = random_inputs(air, _log_n(air, 7),
                                                                   log_blowup, rng)
    assert 1 << (shape.log_lde - shape.log_quotient) == stride
    qshape = dataclasses.replace(shape, log_blowup=shape.log_quotient - shape.log_n)
    cut = [None if x is None else np.ascontiguousarray(x[:, ::stride]) for x in (main, prep, aux)]
    copied = CH.quotient_host(air, qshape, *cut, pv, chal, alpha, term, SHIFT)
    for block in (None, 7, 40):
        kw = {} if block is None else {"block": block}
        got = CH.quotient_host(air, shape, main, prep, aux, pv, chal, alpha, term, SHIFT, **kw)
        assert np.array_equal(got, copied), block
    want, _ = both(air, shape, main, prep, aux, pv, chal, alpha, term)
    assert np.array_equal(copied, want)
