"""The written-values inventory (docs/rv32.md "Written values: the inventory"): a mechanical
check of the rule that every limb a chip *writes* to the memory argument is a canonical
integer below 2^16, derived from the AIRs alone.

For every AIR of an RV32 proof (the 18 tables; the slotted ones at k = 1 and k = 2) each
send on ``rv32_mem`` gives two targets, its lo and hi values (positions 2 and 3), to be
shown in [0, 2^16) on every row where the send's multiplicity is nonzero.  Also covered:
``rv32_io`` sends (IOWORD), position 2, a byte; ``rv32_exit`` (ECALL's exit code), a byte;
``rv32_p2call`` positions 1 and 2 and ``rv32_iochain`` position 2 as sent by ECALL (the
word addresses that start a POSEIDON2 call and an IOWORD chain), below 2^30.  Not covered
locally: IOWORD's own ``rv32_iochain`` send (wa + 1; the chain starts below 2^30 at the
ECALL and MEMORY has no row at or above 2^30, so an access past it cannot balance).

The analysis (sound: a bound it reports holds on every row that satisfies the AIR, given
the premises below) works on polynomial expansions mod p of the AIR's expressions:

* a *domain* per variable: an integer interval [L, U] inside (-p/2, p/2) with a congruence
  (value = r mod g), meaning "the field value's signed representative lies in it";
* sources of domains: ``assert_bool`` columns ([0, 1]); preprocessed columns (their range
  over the preprocessed matrix, or for the statement's tables the declared range, checked
  against a sample statement); public values (unknown); and the tuples of the row's
  interactions whose multiplicity is the constant 1 in the current case: lookups into
  fixed tables (``rv32_range16``, ``rv32_pair8``, ``rv32_and8`` -> BYTES,
  ``rv32_program`` -> PROGRAM, ``rv32_image`` <- PROGRAM, ``rv32_io`` -> IO: the sent value
  equals a value the table holds) and the values *received* on ``rv32_mem`` (the previous
  value of an access: valid by induction, every value in memory was checked when it was
  written -- exactly what this test checks for the sends);
* propagation: a user constraint (``when = "all"``) in which a variable v appears only in
  the linear monomial c v gives v = -R / c: with c = +-1 (or R exact) the domain of -R / c;
  otherwise the domain of v must already be known and, when c v and -R lie in a window
  narrower than p, the integer division (with the congruence) refines it.  Domains of R:
  interval arithmetic with congruences, exact enumeration of parts over boolean variables,
  and the exact range of c_x x + c_y y + c_z z over BYTES' AND table for an active and8
  tuple (x, y, z); a target that is a looked-up or received expression plus a constant
  takes that fact's range;
* case splits: one-hot flag groups (flags whose sum is asserted boolean, pairs with
  x y = 0, and "sum = 1" constraints), then boolean-valued variables (including derived
  ones such as IOWORD's f_j or DIV's x), chosen breadth-first from the target through the
  constraints; a case whose constraints contradict the domains is vacuous.

Premises: "No count wraps mod p" (every sender's multiplicity is 0 or 1 and the counts are
below p, so a tuple sent with a nonzero multiplicity is in the table: re-derived below from
the AIRs, ``test_no_count_wraps``), and the induction over memory: every rv32_mem send's
limbs bounded, except the cursor registers 33..35, whose lo slot is one field element (a
byte count) by design (``EXEMPT``): the receive of that access is not used as a fact, and
``test_cursor_addresses_are_separate`` checks that no other register access can reach
addresses 33..35 (instruction chips address registers through PROGRAM's rd / rs1 / rs2,
at most 32; ECALL's other registers are constants).

The analysis is tests/written_values/ (algebra, model, search, analysis);
``test_no_count_wraps`` is tests/test_rv32_no_count_wraps.py.  Regenerate the docs table:
``python tests/test_rv32_written_values.py`` (prints markdown), or
``python -m pytest tests/test_rv32_written_values.py -s`` (prints the inventory).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from steadfast.air import AirBuilder
from steadfast.rv32 import tables as T
from steadfast.rv32.chips import common as C

sys.path.insert(0, str(Path(__file__).resolve().parent))
from written_values.algebra import PREP0, p_add, p_const, p_vars  # noqa: E402
from written_values.analysis import (analyse, components, fixed_ranges,  # noqa: E402
                                     inventory_rows, markdown, proof_airs, read_accesses,
                                     reports, summarize, unbounded)
from written_values.model import _EXEMPT_ACC, DECLARED, Inter, Model, Target, _base  # noqa: E402
from written_values.search import Component, solve  # noqa: E402


@pytest.mark.parametrize("k", [1, 2])
def test_every_written_value_is_bounded(k):
    bad = unbounded(k)
    assert not bad, "\n".join(f"{a} {acc}.{limb}: {why}" for a, acc, limb, why in bad)
    reps = reports(k)
    assert len(reps) == 18
    n = sum(len(r.results) for r in reps)
    names = {_base(r.air) for r in reps if r.results}
    assert {"rv32_alu", "rv32_bitwise", "rv32_shift", "rv32_load", "rv32_store", "rv32_jump",
            "rv32_mul", "rv32_div", "rv32_ecall", "rv32_ioword", "rv32_p2call", "rv32_memory",
            "rv32_registers", "rv32_branch"} <= names
    if k == 1:
        print(f"\n{n} written values in {len(names)} tables, all bounded:")
        for chip, t, s in inventory_rows(1):
            print(f"  {chip} {t.access}.{t.limb} = {t.expr}: "
                  f"{s if t.exempt is None else 'EXEMPT (' + t.exempt + ')'}")
        print("  reads:", read_accesses(1))


def test_slots_agree():
    """k = 2: each slotted table has every k = 1 target once per slot, with its verdict."""
    one, count1, count2 = {}, {}, {}
    for rep in reports(1):
        for r in rep.results:
            key = (_base(r.target.air), r.target.access, r.target.limb, r.target.expr)
            one[key] = r.ok
            count1[key] = count1.get(key, 0) + 1
    for rep in reports(2):
        for r in rep.results:
            t = r.target
            key = (_base(t.air), t.access.split("@")[0], t.limb, re.sub(r"@\d", "", t.expr))
            assert one[key] == r.ok, t
            count2[key] = count2.get(key, 0) + 1
    assert set(count2) == set(count1)
    for key, n in count2.items():
        assert n == count1[key] * (2 if key[0][5:] in T.SLOTTED else 1), key


def test_exempt_cursor_is_not_a_limb():
    """The exemption is needed (the analysis cannot bound the cursor as a limb) and is the
    only one; its hi slot is bounded (0)."""
    rep = {r.target.access + "." + r.target.limb: r
           for a in reports(1) if _base(a.air) == "rv32_ecall" for r in a.results}
    assert not rep["cur.lo"].ok and rep["cur.lo"].target.exempt
    assert rep["cur.hi"].ok


def test_expected_sources():
    """Spot checks of the inventory: the reason found is the intended one."""
    inv = {(chip, t.access, t.limb): s for chip, t, s in inventory_rows(1)}
    assert "u_lo: range16" in inv[("rv32_alu", "rd", "lo")]
    assert "k1: bool" in inv[("rv32_alu", "rd", "lo")]
    assert "out3_hi: range16" in inv[("rv32_p2call", "out3", "hi")]
    assert "v_lo: program" in inv[("rv32_jump", "rd", "lo")]
    assert "and8" in inv[("rv32_bitwise", "rd", "lo")]
    assert "pair8" in inv[("rv32_shift", "rd", "hi")]
    assert "image" in inv[("rv32_memory", "init", "lo")]
    assert "code: pair8" in inv[("rv32_ecall", "rv32_exit", "code")]


def _p2call_without_output_limbs(monkeypatch):
    from steadfast.rv32.chips import precompile
    monkeypatch.setattr(precompile, "_output_limbs", lambda b, lo, hi, real: None)
    return precompile.build_p2call(2)


def test_catches_issue_40(monkeypatch):
    """Without _output_limbs (the #40 bug) every output limb of P2CALL is unbounded: lo
    only by (1 - beta) lo = 0, hi only by range16(0x7800 - hi - beta)."""
    ranges = fixed_ranges(proof_airs(1))      # before the patch: static_air caches p2call
    air = _p2call_without_output_limbs(monkeypatch)
    res = {(r.target.access, r.target.limb): r for r in analyse(air, ranges)}
    from steadfast.rv32.chips.precompile import N_IN, N_OUT
    for k in range(N_OUT):
        for limb in ("lo", "hi"):
            r = res[(f"out{k}", limb)]
            assert not r.ok, (k, limb)
            assert r.target.expr == f"out{k}_{limb}"
    for k in range(N_IN):
        assert res[(f"in{k}", "lo")].ok and res[(f"in{k}", "hi")].ok
    # with the fix, the same analysis bounds them
    from steadfast.rv32.chips.precompile import build_p2call
    monkeypatch.undo()
    fixed = {(r.target.access, r.target.limb): r for r in analyse(build_p2call(2), ranges)}
    assert all(r.ok for r in fixed.values())


def _tiny(body):
    """A one-access chip: real, x, y (and body's extra columns) writing (lo, hi) = body()."""
    b = AirBuilder("tiny")
    real, addr, clk = b.main("real"), b.main("addr"), b.main("clk")
    b.assert_bool(real, name="real_bool")
    lo, hi = body(b, real)
    C.write(b, "w", C.MEMORY, addr, (lo, hi), C.ts_of(clk, 3), real)
    return b.build(log_blowup=2)


def _verdicts(air):
    ranges = fixed_ranges(proof_airs(1))
    return {r.target.limb: r.ok for r in analyse(air, ranges)}


def test_negative_unchecked_column():
    def body(b, real):
        x, y = b.main("x"), b.main("y")
        C.range16(b, y, real)
        return x, y
    assert _verdicts(_tiny(body)) == {"lo": False, "hi": True}


def test_negative_hi_minus_beta():
    """range16(0x7800 - hi - beta) alone: hi could be p - t (issue #40's pattern); with
    range16(hi) too it is bounded."""
    def body(b, real, checked=False):
        lo, hi, beta = b.main("lo"), b.main("hi"), b.main("beta")
        b.assert_bool(beta, name="beta_bool")
        b.assert_zero((1 - beta) * lo, name="canonical")
        C.range16(b, 0x7800 - hi - beta, real)
        C.range16(b, lo, real)
        if checked:
            C.range16(b, hi, real)
        return lo, hi
    assert _verdicts(_tiny(body)) == {"lo": True, "hi": False}
    assert _verdicts(_tiny(lambda b, r: body(b, r, True))) == {"lo": True, "hi": True}


def test_negative_scaled_and_selected():
    """4 x with range16(4 x) is no limb bound on x; 2 x with x a limb is no limb; a
    selection s ? x : y is bounded only when s is boolean; a range check under another
    flag than the write's does not count."""
    def scaled(b, real):
        x, y = b.main("x"), b.main("y")
        C.range16(b, 4 * x, real)
        C.range16(b, y, real)
        return x, 2 * y
    assert _verdicts(_tiny(scaled)) == {"lo": False, "hi": False}

    def selected(b, real, boolean):
        s, x, y, z = b.main("s"), b.main("x"), b.main("y"), b.main("z")
        if boolean:
            b.assert_bool(s, name="s_bool")
        C.range16(b, x, real)
        C.range16(b, y, real)
        b.assert_zero(z - x - s * (y - x), name="select")
        return z, 0
    assert _verdicts(_tiny(lambda b, r: selected(b, r, True))) == {"lo": True, "hi": True}
    assert _verdicts(_tiny(lambda b, r: selected(b, r, False))) == {"lo": False, "hi": True}

    def other_flag(b, real):
        f, g, x = b.main("f"), b.main("g"), b.main("x")
        for name, v in (("f", f), ("g", g)):
            b.assert_bool(v, name=f"{name}_bool")
        b.assert_bool(f + g, name="one")
        b.assert_zero(real - f - g, name="real")
        C.range16(b, x, f)
        return x, 0
    assert _verdicts(_tiny(other_flag)) == {"lo": False, "hi": True}


def test_declared_prep_ranges():
    """The statement tables' preprocessed values lie in their DECLARED ranges (a sample
    statement; the declared ranges are how chips/program.py and chips/io.py build them)."""
    airs = {_base(a.name): a for a in proof_airs(1)}
    for (bus, j), (lo, hi) in DECLARED.items():
        air = airs["rv32_io" if bus == C.IO else "rv32_program"]
        model = Model(air, {})
        it = next(i for i in model.inters if i.bus == bus)
        (m, c), = it.values[j].items()
        assert c == 1 and len(m) == 1 and m[0] >= PREP0
        col = air.preprocessed[:, m[0] - PREP0].astype(np.int64)
        assert lo <= col.min() and col.max() <= hi, (bus, j)


def test_cursor_addresses_are_separate():
    """The exempt cursor tuples (registers 33..35) never meet another access: every other
    register access's address is below 33 (constants, PROGRAM's rd / rs1 / rs2) and the
    cursor access's is in [33, 36)."""
    airs = proof_airs(1)
    ranges = fixed_ranges(airs)
    for air in airs:
        if _base(air.name) in ("rv32_registers",):
            continue                      # the boundary: one tuple per register, 0..35
        model = Model(air, ranges)
        comps = components(model)
        for it in model.inters:
            if it.bus != C.MEM or p_const(it.values[0]) != C.REG:
                continue
            cursor = (_base(air.name), it.access) in _EXEMPT_ACC
            lo, hi = (33, 36) if cursor else (0, 33)
            t = Target(air.name, it.idx, 1, hi, it.access, "addr", model.fmt(it.values[1]))
            cols = p_vars(it.mult).union(*map(p_vars, it.values))
            comp = Component(model, set().union(*[c for c in comps if c & cols]))
            r = solve(comp, t)
            assert r.ok, (air.name, it.access, r.failure)
            if cursor:
                # and at least 33 wherever the access is made
                t2 = Target(air.name, it.idx, 1, 3, it.access, "addr", "")
                shifted = Inter(it.idx, it.bus, it.sign,
                                [it.values[0], p_add(it.values[1], {(): 33}, -1)] + it.values[2:],
                                it.mult)
                comp.by_idx[it.idx] = shifted
                assert solve(comp, t2).ok
                comp.by_idx[it.idx] = it


def test_docs_inventory_is_current():
    """docs/rv32.md holds this test's table (python tests/test_rv32_written_values.py)."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "rv32.md").read_text()
    assert "### Written values: the inventory" in doc
    assert markdown(1) in doc, "regenerate the table: python tests/test_rv32_written_values.py"



def test_segment_boundary_tables_write_bounded_values():
    """A segment proof's boundary tables (chips/segment.py: PAGEMEM, SEGREGS) send only
    verifier-built words on rv32_mem: the analysis bounds every one of them."""
    import test_rv32_segments as TS
    from steadfast.rv32.chips.program import image_of
    from steadfast.rv32.segments import run_segments, segment_airs
    prog = TS.program(300)
    seg = list(run_segments(prog, TS.INPUT, 1 << 20, TS.SEG))[1]
    ranges = fixed_ranges(proof_airs(1))
    for a in segment_airs(image_of(prog), TS.INPUT, seg, 2):
        if a.name in ("rv32_pagemem", "rv32_segregs"):
            res = analyse(a, ranges)
            assert res and all(r.ok for r in res), (a.name, [summarize(r) for r in res])


if __name__ == "__main__":
    print(markdown(1))
