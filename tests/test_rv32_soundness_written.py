"""Written values: a second pass over every class of value a chip writes to ``rv32_mem``
(issue #40), each with a malicious prover that writes a NON-CANONICAL ALIAS of the honest
value -- the same field element lo + 2^16 hi (or the same combination the next reader
uses), with a limb moved out of [0, 2^16) or a byte out of [0, 256).

Issue #40 was such a bug: P2CALL wrote its output words with unchecked limbs, so
(lo - 1, hi - 0x7800 mod p) (2^16 * 0x7800 = p - 1) passed for the lane lo + 2^16 hi, was
stored, loaded by LW and used as a 32-bit integer it is not.  The rule (docs/rv32.md,
rv32/chips/common.py): every limb a chip WRITES is range-checked or made of checked bytes.

How each forgery is built, so that it isolates the check it is about:

* the writing row is changed *consistently* where its own constraints allow (carries,
  bytes, sign bits, negations moved along with the limb), so that where the chip is
  sound only a range / byte lookup (or the program bus, or the IO bus) can refuse it --
  where no consistent change exists the test says so and names the constraint;
* :meth:`Alias.heal_memory` then carries the written tuple through the offline memory
  argument: the next access of the address (a later write's witnessed old value, a
  read -- which passes it on --, or the boundary's final value) receives the alias, so
  ``rv32_mem`` balances and cannot be what refuses it;
* :meth:`Alias.rebalance` counts BYTES' multiplicities of the tuples the table holds and
  records the ones it does not (``bad``): those are then the only unbalanced lookups, and
  the test names them -- the exact lookup that stands between the alias and acceptance.

Buses are checked in name order (air/check.py) and ``rv32_range16`` comes last, so a
LookupImbalance on it means every constraint and every other bus accepted the alias.
Every test runs at both slot objectives (as tests/test_rv32_soundness.py does), so the
lie is refused in any slot of a row.
"""
from __future__ import annotations

import functools
from collections import Counter

import numpy as np
import pytest

from steadfast import rv32
from steadfast.air import LookupImbalance, check_traces
from steadfast.air.check import interaction_rows
from steadfast.prover.core.prove import prove
from steadfast.rv32.chips import bytes as bytes_chip
from steadfast.rv32.chips.common import AND8, MEM, PAIR8, RANGE16
from steadfast.rv32.tables import INDEX
from steadfast.rv32.traces import _lookup_counts, build_traces
from steadfast.verifier.errors import VerificationError
from steadfast.verifier.verify import verify

import rv32_samples as S
import test_rv32_soundness as T
from test_rv32_soundness import FAST, Forgery

P = 2013265921
TWO16 = 1 << 16
INV16 = P - 0x7800            # 2^-16 mod p: 2^16 * 0x7800 = p - 1


def p_alias(lo, hi):
    """(lo - 1, hi + 2^-16): the same field element lo + 2^16 hi (issue #40's form)."""
    return (lo - 1) % P, (hi + INV16) % P


def beyond16(*limbs):
    """The range16 tuples of ``limbs`` that BYTES does not hold."""
    return [(v % P,) for v in limbs if not 0 <= v % P < TWO16]


def carry_alias(lo, hi, t=1):
    """(lo + 2^16 t, hi - t): the same field element *and* the same integer."""
    return (lo + TWO16 * t) % P, (hi - t) % P


# read(0) of more bytes than the input has: n = avail, a witness (av) the chip
# range-checks, unlike ALL_CLASSES' read, where n = a2 comes from the memory argument
SHORT_READ = """
    li a7, 63
    li a0, 0
    li a1, 0x20000
    li a2, 100
    ecall
    li a0, 0
    li a7, 93
    ecall
"""


@functools.lru_cache(maxsize=None)
def _sample(name: str, objective: str):
    if name == "all":
        prog, ex, tr = S.all_classes()
    else:
        prog = S.program(SHORT_READ)
        ex = rv32.execute(prog, S.ALL_INPUT, record=True)
        tr = None
    if tr is None or objective != "size":
        tr = build_traces(prog, ex, max_cycles=1000, slot_objective=objective)
    return prog, ex, tr


@pytest.fixture(autouse=True, params=["size", "cells"])
def slot_objective(request):
    """Every forgery at the default slots and at the fewest-cells slots (Forgery reads
    test_rv32_soundness.OBJECTIVE)."""
    T.OBJECTIVE = request.param
    yield request.param
    T.OBJECTIVE = "size"


class Alias(Forgery):
    """:class:`test_rv32_soundness.Forgery` with the memory argument carried along and
    exact BYTES multiplicities (module docstring).  The honest traces are built once per
    (sample, slot objective)."""

    def __init__(self, sample: str = "all"):
        # Forgery.__init__ with the honest traces cached: it builds the "cells" traces
        # again for every forgery (about a second each)
        self.prog, self.ex, tr = _sample(sample, T.OBJECTIVE)
        self.airs = list(tr.airs)
        self.traces = [t.copy() for t in tr.traces]
        self.pvs = [list(p) for p in tr.table_public_values]
        self.slots = dict(tr.slots)
        self.bad: dict = {}
        self.impossible = False
        self.healed: list = []

    def item(self, table, flag, **where):
        """The first item of ``table`` with ``flag`` = 1 and the given column values."""
        ok = lambda i: all(self.get(table, i, c) == v % P for c, v in where.items())  # noqa
        return self.rows(table, flag, ok)[0]

    def pair(self, table, item, lo, hi):
        return self.get(table, item, lo), self.get(table, item, hi)

    def set_pair(self, table, item, names, values):
        for n, v in zip(names, values):
            self.set(table, item, n, v)

    # ---------------------------------------------------------------- rv32_mem

    def _mem_entries(self):
        out = []
        for t, (air, tr, pv) in enumerate(zip(self.airs, self.traces, self.pvs)):
            its = [(i, it) for i, it in enumerate(air.interactions) if it.bus == MEM]
            if not its:
                continue
            rows = interaction_rows(air, tr, pv)
            for i, it in its:
                vals, mult = rows[i]
                for r in np.flatnonzero(mult):
                    out.append((t, it, int(r), tuple(int(v) for v in vals[:, r]),
                                it.sign * int(mult[r])))
        return out

    def heal_memory(self):
        """Carry every changed write to its consumer: the access that received the old
        tuple (space, addr, old, ts) now receives the new one.  A read passes the value on
        (its send changes too: the next round carries that one); a write's witnessed old
        value or a boundary's final value ends the walk."""
        self.healed = []
        for _ in range(16):
            entries = self._mem_entries()
            net = Counter()
            for *_, key, m in entries:
                net[key] += m
            net = {k: v % P for k, v in net.items() if v % P}
            if not net:
                return self
            sent = {(k[0], k[1], k[4]): k for k, v in net.items() if v == 1}
            recv = {(k[0], k[1], k[4]): k for k, v in net.items() if v == P - 1}
            assert len(sent) + len(recv) == len(net) and sent.keys() == recv.keys(), \
                f"not a changed value: {net}"
            for key, old in recv.items():
                new = sent[key]
                hits = [(t, it, r) for t, it, r, k, m in entries if k == old and m < 0]
                assert len(hits) == 1, (old, hits)
                t, it, r = hits[0]
                for j in (2, 3):
                    e = it.values[j]
                    if e.op == "main" and not e.payload[1]:
                        self.traces[t][r, e.payload[0]] = new[j]
                    else:
                        assert e.op == "const" and int(e.payload) == new[j], \
                            f"{self.airs[t].name} receives {old} through an expression"
                self.healed.append((self.airs[t].name, r, old, new))
        raise AssertionError("the memory argument did not heal")

    # ---------------------------------------------------------------- BYTES

    def rebalance(self):
        """BYTES' multiplicities of the tampered traces.  Where a tuple is not in the
        table (Forgery.rebalance would keep the old multiplicities), count the ones that
        are, and record the others in ``bad`` (bus -> sorted tuples): then exactly those
        lookups are unbalanced."""
        self.bad = {}
        try:
            counts = _lookup_counts(self.airs, self.traces, self.pvs)
            self.impossible = False
        except ValueError:                     # Forgery.rebalance's case
            self.impossible = True
            counts = self._counts_in_table()
        self.traces[INDEX["bytes"]] = bytes_chip.bytes_trace(counts)
        return self

    def _counts_in_table(self):
        counts = {bus: np.zeros(bytes_chip.SIZE, np.int64) for bus in bytes_chip.BUSES}
        bad: dict = {}
        for air, tr, pv in zip(self.airs, self.traces, self.pvs):
            its = [(i, it) for i, it in enumerate(air.interactions)
                   if it.bus in counts and it.sign > 0]
            if not its:
                continue
            rows = interaction_rows(air, tr, pv)
            for i, it in its:
                vals, mult = rows[i]
                sel = np.flatnonzero(mult)
                v = vals[:, sel].astype(np.int64)
                if it.bus == RANGE16:
                    ok = v[0] < bytes_chip.SIZE
                    idx = v[0]
                else:
                    ok = (v[0] < 256) & (v[1] < 256)
                    if it.bus == AND8:
                        ok &= v[2] == (v[0] & v[1])
                    idx = v[0] + 256 * v[1]
                np.add.at(counts[it.bus], idx[ok], mult[sel][ok].astype(np.int64))
                for r in np.flatnonzero(~ok):
                    bad.setdefault(it.bus, []).append(tuple(int(x) for x in v[:, r]))
        self.bad = {bus: sorted(ts) for bus, ts in bad.items()}
        return counts

    def refused_by_lookup(self, bus, tuples):
        """Refused on ``bus``, whose only unbalanced tuples are ``tuples`` (the lookups
        the alias cannot pass): every constraint and every bus before it accepted it."""
        assert self.impossible, "every lookup of the alias is in the table"
        assert self.bad == {bus: sorted(tuple(x % P for x in t) for t in tuples)}, self.bad
        e = self.refused(bus=bus)
        assert e.values in self.bad[bus]
        return e


# ------------------------------------------------------------------ helpers' sanity

def test_honest_traces_heal_to_themselves():
    f = Alias().heal_memory().rebalance()
    assert f.healed == [] and not f.impossible and f.bad == {}
    check_traces(f.airs, f.traces, f.pvs)


def test_heal_carries_a_write_to_its_consumer():
    """Without the heal the memory argument refuses a changed write; with it the alias
    reaches the next access (a write's old value or the boundary) and the memory argument
    balances -- what the tests below rely on to isolate the lookup."""
    f = Alias()
    r = f.item("mul", "f_mulhu")
    lo, hi = carry_alias(*f.pair("mul", r, "c_lo", "c_hi"))
    f.set_pair("mul", r, ("c_lo", "c_hi"), (lo, hi))
    f.set_pair("mul", r, ("res_lo", "res_hi"), (lo, hi))
    f.add("mul", r, "e0", 1)
    f.rebalance().refused(bus=MEM)
    f.heal_memory().rebalance()
    assert [h[0] for h in f.healed] == ["rv32_registers"]
    with pytest.raises(LookupImbalance) as e:
        check_traces(f.airs, f.traces, f.pvs)
    assert e.value.bus == RANGE16


# ------------------------------------------------------------------ loads

LOADS = ["f_lw", "f_lh", "f_lb", "f_lbu", "f_lhu"]


@pytest.mark.parametrize("alias", [p_alias, carry_alias], ids=["p", "carry"])
@pytest.mark.parametrize("flag", LOADS)
def test_load_result_limb_alias(flag, alias):
    """LW/LH/LB/LBU/LHU writing an alias of rd's value: every load's result limbs are
    pinned limb by limb (c_lo = w_lo, h, bt + 0xFF00 sg or bt; c_hi = w_hi, 0xFFFF sg or
    0) to limbs read from memory or pair8-checked bytes, so no consistent row exists: the
    c_lo constraint refuses (the byte and sign forms that *are* consistent follow)."""
    f = Alias()
    r = f.rows("load", flag)[0]
    f.set_pair("load", r, ("c_lo", "c_hi"), alias(*f.pair("load", r, "c_lo", "c_hi")))
    f.heal_memory().rebalance().refused(constraint="c_lo")


def _set_load_result(f, r):
    """c_lo, c_hi, sv of load item r from its bytes, o0 and sg (the chip's formulas)."""
    g = lambda n: f.get("load", r, n)  # noqa
    bt = g("x1") if g("o0") else g("x0")
    h = g("x0") + 256 * g("x1")
    sg = g("sg")
    if g("f_lb"):
        c_lo, c_hi, sv = bt + 0xFF00 * sg, 0xFFFF * sg, 256 * (2 * bt - 256 * sg)
    elif g("f_lbu"):
        c_lo, c_hi, sv = bt, 0, 0
    elif g("f_lh"):
        c_lo, c_hi, sv = h, 0xFFFF * sg, 2 * h - TWO16 * sg
    else:
        raise AssertionError("a load with bytes-made results only")
    f.set_pair("load", r, ("c_lo", "c_hi", "sv"), (c_lo, c_hi, sv))
    return sv % P


@pytest.mark.parametrize("flag", ["f_lb", "f_lh"])
def test_load_sign_fill_forged(flag):
    """LB/LH with the sign bit flipped (rd's high bits filled the other way, sv and the
    result recomputed: every constraint holds): only range16(sv) pins sg."""
    f = Alias()
    r = f.rows("load", flag)[0]
    f.set("load", r, "sg", 1 - f.get("load", r, "sg"))
    sv = _set_load_result(f, r)
    assert sv >= TWO16
    f.heal_memory().rebalance().refused_by_lookup(RANGE16, [(sv,)])


@pytest.mark.parametrize("flag", ["f_lb", "f_lbu"])
def test_load_byte_alias(flag):
    """LB/LBU of a half split as (x0 + 256, x1 - 1) -- the same half h, so half_bytes
    holds -- selecting a byte that is not the byte of memory (result recomputed, sv in
    range for the item chosen): only the pair8 lookup of (x0, x1) refuses."""
    f = Alias()
    r = f.rows("load", flag)[0]
    x0, x1 = f.pair("load", r, "x0", "x1")
    assert x1 >= 1
    f.set_pair("load", r, ("x0", "x1"), (x0 + 256, x1 - 1))
    sv = _set_load_result(f, r)
    assert sv < TWO16
    f.heal_memory().rebalance().refused_by_lookup(PAIR8, [(x0 + 256, x1 - 1)])


# ------------------------------------------------------------------ MUL

def forge_mul_high(f, flag):
    """MULH/MULHSU/MULHU writing res = (res_lo + 2^16, res_hi - 1) with e0 + 1 (e0 stays
    in {0, 1, 2}, so high_lo and high_hi still hold); returns the lookups it fails."""
    r = f.rows("mul", flag)[0]
    e0 = f.get("mul", r, "e0")
    t = 1 if e0 < 2 else -1
    lo, hi = carry_alias(*f.pair("mul", r, "res_lo", "res_hi"), t)
    for names in (("res_lo", "res_hi"), ("c_lo", "c_hi")):
        f.set_pair("mul", r, names, (lo, hi))
    f.set("mul", r, "e0", e0 + t)
    f.heal_memory().rebalance()
    return beyond16(lo, hi)


@pytest.mark.parametrize("flag", ["f_mulh", "f_mulhsu", "f_mulhu"])
def test_mul_high_word_alias(flag):
    """The high word of MULH/MULHSU/MULHU as an alias: every constraint holds, only
    range16(res_lo) refuses."""
    f = Alias()
    f.refused_by_lookup(RANGE16, forge_mul_high(f, flag))


def test_mul_low_word_alias():
    """MUL's low word from product bytes (p0, p1 + 256, p2 - 1, p3) with carry cr1 - 1:
    the same 64-bit product, rd = (c_lo + 2^16, c_hi - 1): only pair8(p0, p1) refuses."""
    f = Alias()
    r = f.rows("mul", "f_mul")[0]
    g = lambda n: f.get("mul", r, n)  # noqa
    assert g("cr[1]") >= 1 and g("p[2]") >= 1
    p0, p1 = g("p[0]"), g("p[1]") + 256
    f.set("mul", r, "p[1]", p1)
    f.add("mul", r, "p[2]", -1)
    f.add("mul", r, "cr[1]", -1)
    f.set_pair("mul", r, ("c_lo", "c_hi"), carry_alias(g("c_lo"), g("c_hi")))
    f.heal_memory().rebalance().refused_by_lookup(PAIR8, [(p0, p1)])


# ------------------------------------------------------------------ DIV

def _neg_alias(f, r, name):
    """The negation gadget N = -v mod 2^32 with N's limbs moved by 2^16 and its carry
    k0 flipped (v + N = 2^32 [v != 0] still holds limb by limb); returns the limbs."""
    lo, hi = f.pair("div", r, f"{name}_lo", f"{name}_hi")
    t = -1 if f.get("div", r, f"{name}_k0") else 1
    lo, hi = carry_alias(lo, hi, t)
    f.set_pair("div", r, (f"{name}_lo", f"{name}_hi"), (lo, hi))
    f.add("div", r, f"{name}_k0", t)
    return lo, hi


def test_div_quotient_alias():
    """DIV -7 / 5 (signs differ: q = -Q, the negation gadget's limbs): q = an alias of
    -1 with nq's carry flipped -- every constraint holds; range16 on nq's two limbs is
    what refuses."""
    f = Alias()
    r = f.item("div", "f_div", x=1, bz=0)
    lo, hi = _neg_alias(f, r, "nq")
    for names in (("q_lo", "q_hi"), ("c_lo", "c_hi")):
        f.set_pair("div", r, names, (lo, hi))
    f.heal_memory().rebalance().refused_by_lookup(RANGE16, beyond16(lo, hi))


def test_rem_remainder_alias():
    """REM -7 % 5 (r = -R through the negation gadget): r an alias of -2: range16 on
    nr's limbs refuses."""
    f = Alias()
    r = f.item("div", "f_rem", sa=1)
    lo, hi = _neg_alias(f, r, "nr")
    f.set_pair("div", r, ("c_lo", "c_hi"), (lo, hi))
    f.heal_memory().rebalance().refused_by_lookup(RANGE16, beyond16(lo, hi))


def test_divu_quotient_alias():
    """DIVU (q = Q, made of bytes): Q's bytes (q0, q1 + 256, q2 - 1, q3) -- the same
    integer, so with |b| a byte the product rows hold with carry pc1 + |b| --, q = (Q_lo +
    2^16, Q_hi - 1) and nq moved along: refused first by pair8(q0, q1) (and range16 on nq:
    nothing but lookups stands in the way)."""
    f = Alias()
    r = f.item("div", "f_divu", bz=0)
    g = lambda n: f.get("div", r, n)  # noqa
    assert g("bb[1]") == g("bb[2]") == g("bb[3]") == 0 and g("q[2]") >= 1
    q0, q1 = g("q[0]"), g("q[1]") + 256
    f.set("div", r, "q[1]", q1)
    f.add("div", r, "q[2]", -1)
    f.add("div", r, "pc[1]", g("bb[0]"))
    lo, hi = carry_alias(g("q_lo"), g("q_hi"))
    for names in (("q_lo", "q_hi"), ("c_lo", "c_hi")):
        f.set_pair("div", r, names, (lo, hi))
    # N(Q) for Q's new limbs: nq's low limb takes the 2^16, its carry stays
    assert g("nq_k0") == 1
    nlo, nhi = carry_alias(g("nq_lo"), g("nq_hi"), -1)
    f.set_pair("div", r, ("nq_lo", "nq_hi"), (nlo, nhi))
    f.heal_memory().rebalance()
    assert f.impossible and f.bad == {PAIR8: [(q0, q1)], RANGE16: beyond16(nlo, nhi)}
    f.refused(bus=PAIR8)


def test_remu_remainder_alias():
    """REMU (r = R, range-checked limbs): R = (R_lo + 2^16, R_hi - 1) with the carries of
    P + R = |a| and of R < |b| moved (m0 + 1, lk0 - 1) and nr moved along: every
    constraint holds; range16 on R's and nr's limbs refuses."""
    f = Alias()
    r = f.item("div", "f_remu", bz=0)
    g = lambda n: f.get("div", r, n)  # noqa
    assert g("m0") == 0 and g("lk0") == 1 and g("nr_k0") == 1
    lo, hi = carry_alias(g("R_lo"), g("R_hi"))
    for names in (("R_lo", "R_hi"), ("c_lo", "c_hi")):
        f.set_pair("div", r, names, (lo, hi))
    f.add("div", r, "m0", 1)
    f.add("div", r, "lk0", -1)
    nlo, nhi = carry_alias(g("nr_lo"), g("nr_hi"), -1)
    f.set_pair("div", r, ("nr_lo", "nr_hi"), (nlo, nhi))
    f.heal_memory().rebalance().refused_by_lookup(RANGE16, beyond16(lo, hi, nlo, nhi))


def test_div_by_zero_quotient_alias():
    """DIV by zero: q is the constant 2^32 - 1 limb by limb (q_lo = 0xFFFF bz): an alias
    breaks q_lo."""
    f = Alias()
    r = f.item("div", "f_div", bz=1)
    lo, hi = p_alias(*f.pair("div", r, "q_lo", "q_hi"))
    for names in (("q_lo", "q_hi"), ("c_lo", "c_hi")):
        f.set_pair("div", r, names, (lo, hi))
    f.heal_memory().rebalance().refused(constraint="q_lo")


# ------------------------------------------------------------------ ECALL

KINDS = ["k_exit", "k_read", "k_rbad", "k_w1", "k_w2", "k_wbad", "k_p2"]


@pytest.mark.parametrize("alias", [p_alias, carry_alias], ids=["p", "carry"])
@pytest.mark.parametrize("kind", KINDS)
def test_ecall_result_alias(kind, alias):
    """Every ECALL's a0 (exit: a0 unchanged; read / write: the count n; the bad fds:
    -EBADF; poseidon2: 0) is res, pinned limb by limb (res_lo = k_exit a0_lo + io n_lo +
    bad EBADF_lo): an alias of it is refused by res_lo."""
    f = Alias()
    r = f.rows("ecall", kind)[0]
    f.set_pair("ecall", r, ("res_lo", "res_hi"), alias(*f.pair("ecall", r, "res_lo", "res_hi")))
    f.heal_memory().rebalance().refused(constraint="res_lo")


@pytest.mark.parametrize("alias", [p_alias, carry_alias], ids=["p", "carry"])
@pytest.mark.parametrize("kind,constraint", [("k_read", "read_n0"), ("k_w1", "write_n0"),
                                             ("k_w2", "write_n0")])
def test_ecall_count_alias(kind, constraint, alias):
    """The count n as an alias, a0 = res following it: N = n_lo + 2^16 n_hi is unchanged,
    so the cursor register (33, 34, 35: cur + N in its lo slot, 0 in hi), the IOWORD chain
    and the output limit see the honest count and only the limbs in a0 are forged.  n is
    pinned limb by limb to a2 (read short of the input, write) or av: read_n0 / write_n0
    refuse."""
    f = Alias()
    r = f.rows("ecall", kind)[0]
    lo, hi = alias(*f.pair("ecall", r, "n_lo", "n_hi"))
    for names in (("n_lo", "n_hi"), ("res_lo", "res_hi")):
        f.set_pair("ecall", r, names, (lo, hi))
    f.heal_memory()
    assert [h[0] for h in f.healed] != [] and all(h[2][1] == 10 for h in f.healed)  # a0
    f.rebalance().refused(constraint=constraint)


def forge_read_of_the_rest(f):
    """read(0) of 100 bytes from an 11-byte input: n = av (avail = input_len - cursor),
    written to a0.  av = (av_lo + 2^16, av_hi - 1) keeps avail; mk0 + 1 keeps the min
    adder; n and res follow, N and the cursor are unchanged."""
    r = f.item("ecall", "k_read", mk1=0)
    g = lambda n: f.get("ecall", r, n)  # noqa
    assert g("mk0") == 0 and g("n_lo") == g("av_lo")
    lo, hi = carry_alias(g("av_lo"), g("av_hi"))
    for names in (("av_lo", "av_hi"), ("n_lo", "n_hi"), ("res_lo", "res_hi")):
        f.set_pair("ecall", r, names, (lo, hi))
    f.add("ecall", r, "mk0", 1)
    f.heal_memory().rebalance()
    return beyond16(lo, hi, 32 * hi)      # range16(av_lo), range16(av_hi), range16(32 av_hi)


def test_read_count_alias_when_the_input_runs_out():
    """The read count in a0 where it is the ECALL's own witness (av): every constraint
    holds; only av's range lookups refuse."""
    f = Alias("short_read")
    f.refused_by_lookup(RANGE16, forge_read_of_the_rest(f))


@pytest.mark.parametrize("kind,cursor,constraint", [
    ("k_read", 33, "read_n0"),
    ("k_w1", 34, "output_len"),        # REGISTERS (checked first): fd 1's final count
    ("k_w2", 35, "write_n0"),
])
def test_cursor_is_one_field_element_of_checked_parts(kind, cursor, constraint):
    """The cursors 33..35 are written as (cur + N, 0): hi is the constant 0 and cur + N
    one field element -- there is no second limb pair to alias, and N's limbs are the
    count's (pinned above).  Moving the count itself (n_lo + 1: the cursor one further,
    a0 following) is a wrong count, refused by the count's constraint (for fd 1 first by
    REGISTERS' output_len, which reads the final cursor)."""
    f = Alias()
    ecall = f.airs[INDEX["ecall"]]
    cur = [it for it in ecall.interactions if it.bus == MEM and it.sign > 0
           and it.values[3].op == "const"]
    assert len(cur) == 1 and int(cur[0].values[3].payload) == 0
    r = f.rows("ecall", kind)[0]
    for n in ("n_lo", "res_lo"):
        f.add("ecall", r, n, 1)
    f.heal_memory()
    assert {h[2][1] for h in f.healed} == {10, cursor}     # a0 and the cursor
    f.rebalance().refused(constraint=constraint)


# ------------------------------------------------------------------ SRA

def _shift_result(f, r):
    """c[0..3] of shift item r from its columns (the c{j} constraints of a right shift)."""
    g = lambda n: f.get("shift", r, n)  # noqa
    e = g("e")
    u3 = g("hi[3]") + e * (256 - g("m"))
    f.set("shift", r, "u3", u3)
    ur = [g("hi[0]") + g("lo[1]"), g("hi[1]") + g("lo[2]"), g("hi[2]") + g("lo[3]"), u3]
    for j in range(4):
        c = sum(g(f"g[{k}]") * (ur[j + k] if j + k < 4 else 255 * e) for k in range(4))
        f.set("shift", r, f"c[{j}]", c)


@pytest.mark.parametrize("which", [0, 1], ids=["sra", "srai"])
def test_sra_sign_fill_forged(which):
    """SRA / SRAI of a negative rs1 filled with zeros (sg = e = 0, u3 and the result
    bytes recomputed: every constraint holds, rd gets the SRL result): only the pair8
    lookup (2 a[3] - 256 sg, 0) pins the sign."""
    f = Alias()
    r = f.rows("shift", "f_sra", lambda i: f.get("shift", i, "sg") == 1)[which]
    a3 = f.get("shift", r, "a[3]")
    f.set("shift", r, "sg", 0)
    f.set("shift", r, "e", 0)
    _shift_result(f, r)
    f.heal_memory().rebalance().refused_by_lookup(PAIR8, [(2 * a3, 0)])


# ------------------------------------------------------------------ JUMP

def forge_link(f, which, alias):
    """JAL / JALR / LUI / AUIPC writing an alias of its v (PROGRAM's decoding).  JAL's
    link ra is read by the JALR that returns, which passes it on to the boundary; with
    the carry form its target adder takes the carry (k0 + 1), so the return still lands
    and every constraint holds."""
    rd = {"jal": 1, "lui": 29, "auipc": 30}
    r = (f.item("jump", "real", rs1=1) if which == "jalr"
         else f.item("jump", "real", rd=rd[which], rs1=0))
    f.set_pair("jump", r, ("v_lo", "v_hi"), alias(*f.pair("jump", r, "v_lo", "v_hi")))
    f.heal_memory()
    if which == "jal":
        assert [h[0] for h in f.healed] == ["rv32_jump", "rv32_registers"]
        ret = f.item("jump", "real", rs1=1)
        if f.get("jump", ret, "a_lo") >= TWO16:
            assert f.get("jump", ret, "k0") == 0
            f.set("jump", ret, "k0", 1)
    return f.rebalance()


@pytest.mark.parametrize("alias", [p_alias, carry_alias], ids=["p", "carry"])
@pytest.mark.parametrize("which", ["jal", "jalr", "lui", "auipc"])
def test_link_value_alias(which, alias):
    """The value a JUMP row writes is sent on the program bus, and PROGRAM's preprocessed
    decoding holds the canonical limbs: the alias is refused on rv32_program, and nowhere
    before it (memory balances, every constraint holds) -- but for JAL's link in the
    (lo - 1, hi - 0x7800) form, which the returning JALR's target adder cannot take
    (lo - 1 sets bit 1 of the target): target_lo refuses first."""
    f = forge_link(Alias(), which, alias)
    if which == "jal" and alias is p_alias:
        f.refused(constraint="target_lo")
    else:
        f.refused(bus="rv32_program")


# ------------------------------------------------------------------ IOWORD

def test_read_byte_alias():
    """read(0) writing the word (a0 + 256) + 256 (a1 - 1) -- the same word in memory, so
    the memory argument is untouched -- but the bytes it claims to have read are not
    bytes: IO's preprocessed rows (the verifier's input) hold only bytes, rv32_io
    refuses."""
    f = Alias()
    r = f.item("ioword", "k_in", **{"f[0]": 1, "f[1]": 1})
    a0, a1 = f.pair("ioword", r, "a[0]", "a[1]")
    assert a1 >= 1
    f.set_pair("ioword", r, ("a[0]", "a[1]"), (a0 + 256, a1 - 1))
    f.heal_memory()
    assert f.healed == []
    f.rebalance().refused(bus="rv32_io")


def test_read_kept_byte_alias():
    """A byte read(0) does not move (f_0 = 0: the word's old byte) written as
    (a0 + 256, a1 - 1), the same word: keep0 ties a_0 to b_0, a pair8-checked byte of the
    word before, and refuses first."""
    f = Alias()
    r = f.item("ioword", "k_in", **{"f[0]": 0, "f[1]": 1})
    a0, a1 = f.pair("ioword", r, "a[0]", "a[1]")
    assert a1 >= 1
    f.set_pair("ioword", r, ("a[0]", "a[1]"), (a0 + 256, a1 - 1))
    f.heal_memory()
    assert f.healed == []
    f.rebalance().refused(constraint="keep0")


def test_io_input_rows_are_bytes():
    """The IO table's input rows, which every read byte must match, are the verifier's:
    preprocessed from the input bytes (each below 256), in order."""
    f = Alias()
    io = f.airs[INDEX["io"]]
    prep = np.asarray(io.preprocessed)
    n = len(S.ALL_INPUT)
    assert list(prep[:n, 2]) == list(S.ALL_INPUT) and np.all(prep[:, 2] < 256)


# ------------------------------------------------------------------ P2CALL

def forge_p2_output(f, k, alias):
    """SYS_POSEIDON2's output word k as an alias of its lane (beta = 1: the canonical
    check's (1 - beta) lo = 0 holds).  The permutation bus sees only lo + 2^16 hi, which
    is unchanged; the word goes to memory (its final value)."""
    r = f.rows("p2call", "real")[0]
    lo, hi = alias(*f.pair("p2call", r, f"out{k}_lo", f"out{k}_hi"))
    f.set_pair("p2call", r, (f"out{k}_lo", f"out{k}_hi", f"out{k}_beta"), (lo, hi, 1))
    f.heal_memory()
    assert [h[0] for h in f.healed] == ["rv32_memory"]
    with pytest.raises(ValueError):           # Forgery.rebalance: no BYTES row fits
        _lookup_counts(f.airs, f.traces, f.pvs)
    f.rebalance()
    # the canonical check range16(0x7800 - hi - beta) is in the table: the lookups that
    # refuse are exactly _output_limbs' (issue #40's fix)
    assert 0 <= (0x7800 - hi - 1) % P < TWO16
    return beyond16(lo, hi)


@pytest.mark.parametrize("alias", [p_alias, carry_alias], ids=["p", "carry"])
@pytest.mark.parametrize("k", [0, 7])
def test_poseidon2_output_alias(k, alias):
    f = Alias()
    f.refused_by_lookup(RANGE16, forge_p2_output(f, k, alias))


# ------------------------------------------------------------------ proofs

PROOF_FORGERIES = {
    "p2call": lambda f: forge_p2_output(f, 0, p_alias),
    "mulhu": lambda f: forge_mul_high(f, "f_mulhu"),
    "read": forge_read_of_the_rest,
    "jal": lambda f: forge_link(f, "jal", carry_alias),
}


@pytest.mark.parametrize("kind", sorted(PROOF_FORGERIES))
def test_proof_of_an_alias_does_not_verify(kind):
    """A proof built on the aliased traces (check mode off) does not verify."""
    f = Alias("short_read" if kind == "read" else "all")
    PROOF_FORGERIES[kind](f)
    f.refused()
    proof = prove(f.traces, f.airs, f.pvs, FAST, check=False)
    with pytest.raises(VerificationError):
        verify(proof, f.airs, f.pvs, min_security_bits=0)
