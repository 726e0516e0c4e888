"""Air.in_namespace: a re-tagged AIR equals the AIR built afresh inside the namespace.

A block's transactions take their statement-independent tables from one build outside
any namespace, re-tagged (rv32/tables.static_air); the proof and its verification depend
on every field of those AIRs, so each is compared with a fresh build, for every table
a transaction holds, each slot count of its menu and both LogUp caps."""
import pytest

from steadfast.air.builder import (AirBuilder, bus_id, bus_namespace, gc_paused,
                                   outside_bus_namespace)
from steadfast.air.expr import const
from steadfast.air.program import compile_program
from steadfast.rv32 import tables
from steadfast.rv32.block import SHARED_BUSES

# a transaction's statement-independent tables, and the shared ones (build_traces builds
# every table in the transaction's namespace)
STATIC = [n for n in tables.TABLES if n not in ("program", "registers", "io")]
CASES = [(name, lb, k) for lb in (1, 2) for name in STATIC for k in tables.slot_menu(name)]


def _same(a, b):
    assert a.name == b.name
    assert a.constraint_program == b.constraint_program
    assert a.interaction_program == b.interaction_program
    assert a.fingerprint() == b.fingerprint()
    for f in ("main_names", "prep_names", "public_names", "main_width", "aux_width",
              "num_parts", "max_degree", "logup_target", "uses_next_main", "uses_next_prep"):
        assert getattr(a, f) == getattr(b, f), f
    assert [(i.bus, i.sign, len(i.values)) for i in a.interactions] == \
        [(i.bus, i.sign, len(i.values)) for i in b.interactions]
    assert [[i.bus for i in batch] for batch in a.lookup_batches] == \
        [[i.bus for i in batch] for batch in b.lookup_batches]
    assert [(c.when, c.name, c.degree) for c in a.constraints] == \
        [(c.when, c.name, c.degree) for c in b.constraints]
    # the constraint expressions themselves (air.check reads them) compile to the program
    assert compile_program([c.expr for c in a.constraints]) == a.constraint_program


@pytest.mark.parametrize("name,lb,k", CASES)
def test_retag_equals_a_fresh_build(name, lb, k):
    with outside_bus_namespace():
        base = tables._build(name, lb, k)
    got = base.in_namespace("tx7/", SHARED_BUSES)
    assert got is not None
    with bus_namespace("tx7/", SHARED_BUSES), gc_paused():
        fresh = tables._build(name, lb, k)
    _same(got, fresh)
    assert base.name == fresh.name[len("tx7/"):]        # the base is untouched
    assert base.fingerprint() != got.fingerprint()


def test_static_air_in_a_namespace_is_the_retagged_one():
    with bus_namespace("tx3/", SHARED_BUSES):
        air = tables.static_air("alu", 2, 1)
        assert tables.static_air("alu", 2, 1) is air                 # cached
    assert air.name.startswith("tx3/")
    assert any(i.bus.startswith("tx3/") for i in air.interactions)
    assert all(not i.bus.startswith("tx3/") for i in air.interactions if i.bus in SHARED_BUSES)
    with bus_namespace("tx3/", SHARED_BUSES), gc_paused():
        _same(air, tables._build("alu", 2, 1))


def _toy(extra_const=None, value_const=None):
    b = AirBuilder("toy")
    x = b.main("x")
    y = b.main("y")
    b.assert_zero(x * (x - 1))
    if extra_const is not None:
        b.assert_zero(y - const(extra_const))
    b.send("bus_a", [x, y] if value_const is None else [x, y + const(value_const)])
    b.receive("bus_s", [y], x)
    return b


def test_declines_where_a_tag_is_another_constant():
    with outside_bus_namespace():
        plain = _toy().build()
        # a user constant equal to the old tag: re-tagging would change it too
        clash_old = _toy(bus_id("bus_a")).build()
        # a user constant equal to the new tag: the fresh build would share its leaf
        clash_new = _toy(bus_id("ns/bus_a")).build()
    assert plain.in_namespace("ns/", ["bus_s"]) is not None
    assert clash_old.in_namespace("ns/", ["bus_s"]) is None
    assert clash_new.in_namespace("ns/", ["bus_s"]) is None
    with outside_bus_namespace():
        # a constant inside an interaction's values (it sits in the LogUp constraint)
        clash_value = _toy(value_const=bus_id("bus_a")).build()
        plain_value = _toy(value_const=7).build()
    assert clash_value.in_namespace("ns/", ["bus_s"]) is None
    with bus_namespace("ns/", ["bus_s"]):
        fresh_value = _toy(value_const=7).build()
    _same(plain_value.in_namespace("ns/", ["bus_s"]), fresh_value)
    with bus_namespace("ns/", ["bus_s"]):
        fresh = _toy().build()
    _same(plain.in_namespace("ns/", ["bus_s"]), fresh)


def test_declines_an_air_with_attributes_set_after_its_build():
    with outside_bus_namespace():
        air = _toy().build()
    air.extra = lambda: None
    assert air.in_namespace("ns/") is None


def test_a_memoised_builder_gets_its_own_cache():
    """POSEIDON2's device_split (functools.cache): the re-tagged AIR's is a cache of its
    own over the same function, bound to the new namespace as a fresh build's is there;
    what it builds does not depend on the caller's namespace, and the slot AIR (shared by
    every namespace, no buses) is never named after one -- a call from inside a namespace
    once named the process-wide slot kernel 'tx2/poseidon2_slot' for every later proof."""
    with outside_bus_namespace():
        base = tables._build("poseidon2", 2, 1)
    got = base.in_namespace("tx2/", SHARED_BUSES)
    assert got.device_split is not base.device_split
    assert got.device_split.__wrapped__.fn is base.device_split.__wrapped__.fn
    with bus_namespace("tx5/", SHARED_BUSES):
        mine = got.device_split()
    with bus_namespace("tx2/", SHARED_BUSES):
        fresh = tables._build("poseidon2", 2, 1).device_split()
    theirs = base.device_split()
    assert mine is got.device_split()
    assert mine[3].name == fresh[3].name == "tx2/poseidon2_logup"
    assert theirs[3].name == "poseidon2_logup"
    assert mine[0].name == fresh[0].name == theirs[0].name == "poseidon2_slot"
    _same(mine[3], fresh[3])
    _same(mine[0], fresh[0])


def test_retagged_logup_constraints_are_plain_constraints_when_read():
    """The re-tagged AIR's LogUp constraints (derived on first read of ``expr``) equal,
    hash and pickle as the fresh build's plain ones; reading ``when`` derives nothing."""
    import pickle

    from steadfast.air.builder import Constraint, _DerivedConstraint
    with outside_bus_namespace():
        base = tables._build("alu", 2, 1)
    got = base.in_namespace("tx5/", SHARED_BUSES)
    with bus_namespace("tx5/", SHARED_BUSES), gc_paused():
        fresh = tables._build("alu", 2, 1)
    lazy = [c for c in got.constraints if isinstance(c, _DerivedConstraint)]
    n_user = len(base.user_constraints)
    assert len(lazy) == len(got.constraints) - n_user > 0
    assert [c.when for c in lazy] == [c.when for c in fresh.constraints[n_user:]]
    assert all("expr" not in c.__dict__ for c in lazy)          # nothing derived yet
    for mine, theirs in zip(lazy, fresh.constraints[n_user:]):
        # (expressions compare by identity, as in a dataclass Constraint)
        plain = mine.plain()
        assert type(plain) is Constraint and "expr" in mine.__dict__
        assert mine == plain and plain == mine and hash(mine) == hash(plain)
        assert (plain.when, plain.name) == (theirs.when, theirs.name)
        assert compile_program([plain.expr]) == compile_program([theirs.expr])
        back = pickle.loads(pickle.dumps(mine))
        assert type(back) is Constraint and (back.when, back.name) == (mine.when, mine.name)
        assert compile_program([back.expr]) == compile_program([theirs.expr])
    # another namespace's constraint differs (its bus tags)
    other = base.in_namespace("tx6/", SHARED_BUSES).constraints[n_user]
    assert other != lazy[0] and other.when == lazy[0].when
    assert compile_program([other.expr]) != compile_program([lazy[0].expr])


@pytest.mark.parametrize("name", ["alu", "load", "shift"])
def test_retagged_program_text_is_a_fresh_texts(name):
    """A re-tagged constraint program copies its base's text lines but the changed
    constants (Program.with_payloads): the text equals that of the same instructions
    made afresh, and the base's own (cached) text is untouched."""
    from steadfast.air.program import Program
    with outside_bus_namespace():
        base = tables._build(name, 2, 1)
    before = base.constraint_program.text()
    got = base.in_namespace("tx5/", SHARED_BUSES).constraint_program
    fresh = Program(got.ops, got.is_ef, got.outputs, got.last_use)     # no cached lines
    assert got.text() == fresh.text()
    assert got.text() != before
    assert base.constraint_program.text() == before
    assert Program(base.constraint_program.ops, base.constraint_program.is_ef,
                   base.constraint_program.outputs,
                   base.constraint_program.last_use).text() == before


def test_with_payloads_replaces_only_that_kind():
    from steadfast.air.program import Program
    from steadfast.air.expr import column
    x = column("main", 0)
    prog = compile_program([x * const(5) + const(7), x - const(5)])
    got = prog.with_payloads("const", {5: 9, 11: 12})
    want = compile_program([x * const(9) + const(7), x - const(9)])
    assert got == want and got.text() == want.text()
    assert prog.with_payloads("main", {5: 9}) == prog       # no main leaf has payload 5
    empty = Program((), (), (), ())
    assert empty.text() == "out:" and empty.with_payloads("const", {1: 2}).text() == "out:"
