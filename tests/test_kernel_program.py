"""The quotient kernels' program (air.kernel_program.kernel_program): the AIR's user constraints
and its LogUp constraints with each batch's fractions added one at a time
(air.kernel_program.logup_kernel_exprs) -- the same polynomials as the AIR's constraint program,
so the same value at every point (the quotient and the proof bytes cannot change), with
fewer extension-field products.  The AIR's program, constraints and fingerprint are not
touched.  tests/test_constraint_host.py checks the compiled quotient, which runs this
program, against the numpy interpreter of the AIR's own program."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from steadfast.air import examples as ex
from steadfast.air.builder import Interaction, _derive_logup
from steadfast.air.kernel_program import kernel_program, logup_kernel_exprs
from steadfast.air.expr import column, const
from steadfast.air.field import P
from steadfast.air.program import compile_program, evaluate_point
from tests.leaves import random_leaves

BASE_KINDS = ("aux", "chal", "term")             # the kernel's points: main/prep base
POINT_KINDS = ("main", "prep", "aux", "chal", "term")   # the out-of-domain point: all EF


def _values(program, seed, ef_kinds):
    return [np.asarray(v, np.uint64).reshape(-1)
            for v in evaluate_point(program, random_leaves(np.random.default_rng(seed), ef_kinds), ef_kinds)]


def _ext_products(program) -> int:
    return sum(1 for op, a, b, _ in program.ops
               if op == "mul" and a >= 0 and b >= 0 and program.is_ef[a] and program.is_ef[b])


def _rv32_airs():
    from steadfast.rv32.chips.program import image_of
    from steadfast.rv32.tables import table_airs
    from tests.txblocks import program
    out = []
    for lb in (1, 2):
        out += table_airs(image_of(program("hello")), b"abc", b"hello from rv32im\ncba", lb)
    return out


def test_the_same_values_as_the_air_program():
    """Every RV32 table (both LogUp degree caps) and the example AIRs, at random points
    with base and with extension-field trace values: equal outputs, in order."""
    airs = [ex.fibonacci_air(), ex.cubic_air(), ex.range_air(4), ex.pairs_air(4)]
    airs += ex.lookup_block(4, 6)[0] + _rv32_airs()
    changed = 0
    for air in airs:
        prog = kernel_program(air)
        assert len(prog.outputs) == len(air.constraint_program.outputs) == len(air.constraints)
        changed += prog is not air.constraint_program
        for seed, kinds in ((1, BASE_KINDS), (2, BASE_KINDS), (3, POINT_KINDS)):
            got, want = _values(prog, seed, kinds), _values(air.constraint_program, seed, kinds)
            for k, (g, w) in enumerate(zip(got, want)):
                assert np.array_equal(g, w), (air.name, k, air.constraints[k].name)
    assert changed > 10


def test_fewer_extension_products_on_the_wide_tables():
    by_name = {a.name: a for a in _rv32_airs()}
    for name in ("rv32_alu", "rv32_bitwise", "rv32_shift", "rv32_load", "rv32_mul"):
        air = by_name[name]
        old, new = _ext_products(air.constraint_program), _ext_products(kernel_program(air))
        assert new <= 0.7 * old, (name, old, new)


def test_no_interactions_no_change():
    air = ex.fibonacci_air()
    assert kernel_program(air) is air.constraint_program


@st.composite
def _interactions(draw):
    width = draw(st.integers(1, 4))
    cols = [column("main", j) for j in range(width)]
    expr = st.sampled_from(cols + [cols[0] * cols[-1], cols[0] + const(3),
                                   const(draw(st.integers(0, P - 1)))])
    out = []
    for i in range(draw(st.integers(1, 7))):
        values = tuple(draw(st.lists(expr, min_size=1, max_size=4)))
        mult = draw(st.sampled_from([const(1), cols[0], cols[-1] * const(5), const(P - 1)]))
        out.append(Interaction(f"bus{draw(st.integers(0, 3))}", values, mult,
                               draw(st.sampled_from([1, -1]))))
    return out


@settings(max_examples=60, deadline=None)
@given(_interactions(), st.integers(2, 9), st.integers(0, 2 ** 32))
def test_random_batches_the_same_polynomials(inters, target, seed):
    """Random interactions (arities 1-4, degrees 0-2, signs, repeated buses) batched at a
    random degree budget: each LogUp constraint in the kernel's form has the AIR's value."""
    single = max(max(v.degree for v in it.values) for it in inters)
    target = max(target, 2 * single + 1)
    batches, cons = _derive_logup(inters, target)
    fast = logup_kernel_exprs(batches)
    assert len(fast) == len(cons) == len(batches)
    want = compile_program([c.expr for c in cons])
    got = compile_program(fast)
    for kinds in (BASE_KINDS, POINT_KINDS):
        for g, w in zip(_values(got, seed, kinds), _values(want, seed, kinds)):
            assert np.array_equal(g, w)
