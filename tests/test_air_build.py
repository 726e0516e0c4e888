"""AIR construction is fast and changes nothing: the compiled programs (instructions, EF
flags, outputs, last uses, text) and the fingerprints of every RV32IM table's AIR (every
slot count of every menu; the statement-dependent program, registers and io tables of a
guest; a table under a block transaction's bus namespace) and every example AIR are those
of the plain reference compiler
(:func:`air.program.compile_program_reference`, a transcription over ``walk``), and the
per-node bookkeeping (degree, is_ef, uses_next) is a naive recursive recomputation's.
Random expression DAGs (shared nodes, commutative operand orders, ``neg``, deep chains)
pin the compiler beyond the AIRs we have today."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from steadfast.air import AirBuilder, AirError
from steadfast.air import builder as air_builder
from steadfast.air import examples as ex
from steadfast.air.builder import bus_namespace
from steadfast.air.expr import Expr, column, const, lift, walk
from steadfast.air.field import P
from steadfast.air.program import compile_program, compile_program_reference
from steadfast.rv32 import block as rblock
from steadfast.rv32 import tables as rt
from steadfast.rv32.chips.io import build_io
from steadfast.rv32.chips.poseidon2 import build_poseidon2
from steadfast.rv32.chips.program import build_program, image_of
from steadfast.rv32.chips.registers import build_registers

from tests.txblocks import program

LB = 2                                  # the default log_blowup (LogUp degree cap 3)


def _rv32_builders():
    """Every RV32 table's builder, called afresh (rv32.tables.static_air caches; these
    must build again under the reference compiler)."""
    image = image_of(program("hello"))
    out = [("program", lambda: build_program(image, LB)),
           ("registers", lambda: build_registers(image.entry_w, LB)),
           ("io", lambda: build_io(b"abc", b"hello from rv32im\ncba", LB))]
    for name in rt.TABLES:
        if name in ("program", "registers", "io"):
            continue
        for k in rt.slot_menu(name):
            if name == "poseidon2":
                build = (lambda k=k: build_poseidon2(k, LB))
            elif name in rt.SLOTTED:
                build = (lambda name=name, k=k: rt._BUILDERS[name](LB, k))
            else:
                build = (lambda name=name: rt._BUILDERS[name](LB))
            out.append((name if name not in rt.SLOTTED else f"{name}{k}", build))

    def namespaced():                   # transaction 1's memory table in a block proof
        with bus_namespace(rblock.tx_prefix(1), rblock.SHARED_BUSES):
            return rt._BUILDERS["memory"](LB)
    out.append(("memory_tx1", namespaced))
    out.append(("alu2_blowup1", lambda: rt._BUILDERS["alu"](1, 2)))
    return out


BUILDERS = _rv32_builders() + [
    ("fibonacci", ex.fibonacci_air), ("cubic", ex.cubic_air), ("adder", ex.adder_air),
    ("range_ex", ex.range_air), ("pairs", lambda: ex.pairs_air(4)), ("counter", ex.counter_air)]


def _programs(air):
    return (air.constraint_program, air.user_program, air.interaction_program)


def _roots(air):
    inter = []
    for it in air.interactions:
        inter.extend(it.values)
        inter.append(it.multiplicity)
    return ([c.expr for c in air.constraints], [c.expr for c in air.user_constraints], inter)


@pytest.mark.parametrize("name,build", BUILDERS, ids=[n for n, _ in BUILDERS])
def test_air_programs_and_fingerprint_match_reference_compiler(name, build, monkeypatch):
    fast = build()
    # the same definition built with the reference compiler in Air
    monkeypatch.setattr(air_builder, "compile_program", compile_program_reference)
    ref = build()
    monkeypatch.undo()
    for pf, pr, roots in zip(_programs(fast), _programs(ref), _roots(fast)):
        assert pf == pr                     # ops, is_ef, outputs, last_use
        assert pf.text() == pr.text()
        assert pf == compile_program_reference(roots)
    assert fast.fingerprint() == ref.fingerprint()
    assert (fast.max_degree, fast.num_parts, fast.aux_width) == (ref.max_degree, ref.num_parts,
                                                                   ref.aux_width)
    assert [(c.name, c.when, c.degree) for c in fast.constraints] == \
        [(c.name, c.when, c.degree) for c in ref.constraints]
    assert (fast.uses_next_main, fast.uses_next_prep) == (ref.uses_next_main, ref.uses_next_prep)


def test_slotted_poseidon2_program_is_bigger_than_one_slot():
    # a guard that the comparison above sees the k copies (not one slot built k times)
    one, three = build_poseidon2(1, LB), build_poseidon2(3, LB)
    assert len(three.user_constraints) == 3 * len(one.user_constraints)
    assert three.fingerprint() != one.fingerprint()
    assert len(three.constraint_program.ops) > 2 * len(one.constraint_program.ops)


# ------------------------------------------------------------------ naive references

def _naive_meta(e: Expr):
    """(degree, is_ef, uses_next) by plain recursion over the tree (small trees only)."""
    if not e.args:
        col = e.op in ("main", "prep", "aux")
        return (1 if col else 0, e.op in ("aux", "chal", "term"), col and bool(e.payload[1]))
    metas = [_naive_meta(a) for a in e.args]
    deg = sum(m[0] for m in metas) if e.op == "mul" else max(m[0] for m in metas)
    return deg, any(m[1] for m in metas), any(m[2] for m in metas)


LEAVES = st.one_of(
    st.integers(-3, P + 3).map(const),
    st.tuples(st.sampled_from(["main", "prep", "aux"]), st.integers(0, 3), st.booleans()).map(
        lambda t: Expr(t[0], (), (t[1], t[2]), None)),
    st.integers(0, 2).map(lambda i: Expr("pv", (), i, None)),
    st.sampled_from(["logup_beta", "logup_gamma"]).map(lambda c: Expr("chal", (), c, c)),
    st.just(None).map(lambda _: Expr("term", (), None, "terminal")),
)


@st.composite
def dags(draw):
    """A list of roots over a pool of nodes that grows by combining earlier nodes (so
    sub-expressions are shared by identity, and rebuilt equal ones are not)."""
    pool = draw(st.lists(LEAVES, min_size=1, max_size=6))
    for _ in range(draw(st.integers(0, 40))):
        op = draw(st.sampled_from(["add", "sub", "mul", "neg", "copy"]))
        x = pool[draw(st.integers(0, len(pool) - 1))]
        y = pool[draw(st.integers(0, len(pool) - 1))]
        if op == "neg":
            pool.append(-x)
        elif op == "copy":                  # a structurally equal, distinct node
            pool.append(Expr(x.op, x.args, x.payload, x.name))
        else:
            pool.append(Expr(op, (x, y)))
    idx = draw(st.lists(st.integers(0, len(pool) - 1), min_size=1, max_size=8))
    return [pool[i] for i in idx]


@settings(max_examples=150, deadline=None)
@given(dags())
def test_compile_program_matches_reference_on_random_dags(roots):
    fast, ref = compile_program(roots), compile_program_reference(roots)
    assert fast == ref
    assert fast.text() == ref.text()


@settings(max_examples=100, deadline=None)
@given(dags())
def test_node_bookkeeping_matches_naive_recursion(roots):
    for node in walk(roots):
        assert (node.degree, node.is_ef, node.uses_next) == _naive_meta(node)
        assert type(node.is_ef) is bool and type(node.uses_next) is bool


def test_commutative_operands_share_one_instruction():
    x, y = column("main", 0), column("main", 1)
    prog = compile_program([x * y - y * x, (x + y) * (y + x)])
    assert prog == compile_program_reference([x * y - y * x, (x + y) * (y + x)])
    ops = [op for op, *_ in prog.ops]
    assert ops.count("mul") == 2 and ops.count("add") == 1     # x*y, (x+y)^2 ; x+y


def test_deep_chain_compiles_without_recursion():
    x = column("main", 0)
    total = x
    for i in range(20000):                  # far beyond the recursion limit
        total = total + (x * i if i % 3 else const(i))
    roots = [total, total - x, -total]
    assert compile_program(roots) == compile_program_reference(roots)


def test_empty_and_repeated_roots():
    assert compile_program([]) == compile_program_reference([])
    x = column("main", 0)
    e = x * x + 1
    assert compile_program([e, e, x]) == compile_program_reference([e, e, x])


def test_lift_keeps_its_coercions():
    assert lift(-1).payload == P - 1
    assert lift(np.int64(P + 5)).payload == 5
    assert lift(np.uint32(7)).payload == 7
    with pytest.raises(TypeError):
        lift(True)
    with pytest.raises(TypeError):
        lift(1.5)


def test_builder_duplicate_names_are_refused():
    b = AirBuilder("t")
    x = b.main("x")
    b.prep("p")
    with pytest.raises(AirError, match="declared twice"):
        b.main("x")
    with pytest.raises(AirError, match="declared twice"):
        b.main("p")
    with pytest.raises(AirError, match="declared twice"):
        b.prep("x")
    b.assert_zero(x, name="c")
    with pytest.raises(AirError, match="used twice"):
        b.assert_bool(x, name="c")
    b.assert_zero(x * x)                    # default names stay distinct
    b.assert_zero(x * x * x)
    assert len(b.build(preprocessed=np.zeros((2, 1), dtype=np.uint32)).constraints) == 3


def test_gc_paused_nests_and_restores():
    import gc
    from steadfast.air.builder import gc_paused
    was = gc.isenabled()
    try:
        gc.enable()
        with gc_paused():
            assert not gc.isenabled()
            with gc_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()       # the inner exit leaves it paused
        assert gc.isenabled()
        with pytest.raises(RuntimeError):
            with gc_paused():
                raise RuntimeError("boom")
        assert gc.isenabled()               # restored on an exception too
        gc.disable()                        # disabled by the application: stays disabled
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
