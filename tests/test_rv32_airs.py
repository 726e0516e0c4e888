"""The RV32IM tables in check mode (air.check_traces) on real executions: every
instruction class, the guest programs, random programs; the traces against the machine's
final state; the cells budget (docs/rv32.md "Tables (AIRs)")."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from steadfast import rv32
from steadfast.air import check_traces
from steadfast.rv32 import isa
from steadfast.rv32.chips.common import SINK
from steadfast.rv32.tables import INDEX, TABLES
from steadfast.rv32.traces import build_traces

import rv32_samples as S

ROOT = Path(__file__).resolve().parents[1]


def test_all_classes_check_mode():
    prog, ex, tr = S.all_classes()
    assert ex.exit_code == 7 and ex.output == b"ell"
    check_traces(tr.airs, tr.traces, tr.table_public_values)
    executed = {isa.decode(int(w)).op for w in ex.record.insn}
    every = set(isa.OPS.values()) - {isa.INVALID}          # (20 would be "SUBI": not an op)
    assert executed == every, sorted(every - executed)
    for name in ("alu", "bitwise", "shift", "branch", "load", "store", "jump", "mul", "div",
                 "ecall", "ioword", "p2call", "poseidon2"):
        assert tr.real_rows[name] > 0, name
    assert sum(tr.real_rows[n] for n in ("alu", "bitwise", "shift", "branch", "load", "store",
                                         "jump", "mul", "div", "ecall")) == ex.cycles
    for air, t in zip(tr.airs, tr.traces):
        assert t.dtype == np.uint32 and t.shape[1] == air.main_width


def test_traces_end_in_the_machine_state():
    """REGISTERS' final column is the machine's final register file and MEMORY's final
    values are its final memory (the boundary holds the real state, not just a balance)."""
    prog, ex, tr = S.all_classes()
    regs = tr.traces[INDEX["registers"]].astype(np.int64)
    names = tr.airs[INDEX["registers"]].main_names
    lo, hi = regs[:32, names.index("f_lo")], regs[:32, names.index("f_hi")]
    assert np.array_equal(lo + (hi << 16), ex.regs.astype(np.int64))
    mem = tr.traces[INDEX["memory"]].astype(np.int64)
    mn = tr.airs[INDEX["memory"]].main_names
    real = mem[:, mn.index("real")] == 1
    wa = mem[real, mn.index("wl")] + (mem[real, mn.index("wh")] << 16)
    final = mem[real, mn.index("f_lo")] + (mem[real, mn.index("f_hi")] << 16)
    for a, v in zip(wa, final):
        assert ex.memory.load_word(int(a) * 4) == v
    assert np.all(np.diff(wa) > 0)


GUEST_CASES = [("hello", "world"), ("sort", "extremes"), ("merkle", "n2"),
               ("transfer", "statuses"), ("bench", "mix"), ("sha256", "abc")]


@pytest.mark.parametrize("guest,case", GUEST_CASES)
def test_guest_check_mode(guest, case):
    prog = rv32.load_elf(ROOT / "guests" / "bin" / f"{guest}.elf")
    data = (ROOT / "guests" / "inputs" / guest / f"{case}.in").read_bytes()
    ex = rv32.execute(prog, data, record=True)
    tr = build_traces(prog, ex, max_cycles=1 << 20)
    check_traces(tr.airs, tr.traces, tr.table_public_values)
    assert tr.table_public_values[INDEX["registers"]][0] == ex.exit_code


def test_cells_per_cycle_budget():
    """The bench mix at 2^16 cycles commits well under 250 cells a cycle."""
    sys.path.insert(0, str(ROOT / "guests"))
    import models
    prog = rv32.load_elf(ROOT / "guests" / "bin" / "bench.elf")
    data, cycles = models.bench_input(1 << 16)
    ex = rv32.execute(prog, data, max_cycles=1 << 20, record=True)
    tr = build_traces(prog, ex, max_cycles=1 << 20)
    assert ex.cycles == cycles
    assert tr.cells_per_cycle() < 250, tr.report()
    cells = tr.cells()
    assert set(cells) == set(TABLES)


def test_build_traces_refuses_a_false_limit_or_no_record():
    prog, ex, tr = S.all_classes()
    with pytest.raises(ValueError):
        build_traces(prog, ex, max_cycles=ex.cycles - 1)   # the exit's limit check fails
    build_traces(prog, ex, max_cycles=ex.cycles)            # exactly at the limit: fine
    plain = rv32.execute(prog, S.ALL_INPUT)
    with pytest.raises(ValueError):
        build_traces(prog, plain, max_cycles=1000)


def test_zero_register_and_sink():
    """Writes to x0 go to the sink (register 32); x0 stays 0 and reads of it give 0."""
    prog, ex, tr = S.traced("""
        addi x0, x0, 5
        add a0, x0, x0
        lui x0, 7
        jal x0, 8
        nop
        li a7, 93
        ecall
    """)
    check_traces(tr.airs, tr.traces, tr.table_public_values)
    regs = tr.traces[INDEX["registers"]].astype(np.int64)
    assert regs[0, 0] == 0 and regs[0, 1] == 0
    assert regs[SINK, 2] > 0                  # the sink was written (at the JAL's ts)
    assert ex.exit_code == 0


_R_OPS = ["add", "sub", "sll", "slt", "sltu", "xor", "srl", "sra", "or", "and", "mul",
          "mulh", "mulhsu", "mulhu", "div", "divu", "rem", "remu"]
_I_OPS = ["addi", "slti", "sltiu", "xori", "ori", "andi"]
_SH_OPS = ["slli", "srli", "srai"]
_VALUES = st.one_of(st.integers(0, 0xFFFF_FFFF), st.sampled_from(
    [0, 1, 2, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF, 0xFFFF_FFFE, 0x8000_0001, 0xFFFF, 0x10000]))


@st.composite
def _programs(draw):
    lines = []
    for r in range(5, 12):
        lines.append(f"li x{r}, {draw(_VALUES)}")
    lines.append("li x4, 0x40000")
    for _ in range(draw(st.integers(5, 25))):
        kind = draw(st.sampled_from(["r", "i", "sh", "mem", "br"]))
        rd, a, b = (draw(st.integers(5, 11)) for _ in range(3))
        if kind == "r":
            lines.append(f"{draw(st.sampled_from(_R_OPS))} x{rd}, x{a}, x{b}")
        elif kind == "i":
            lines.append(f"{draw(st.sampled_from(_I_OPS))} x{rd}, x{a}, {draw(st.integers(-2048, 2047))}")
        elif kind == "sh":
            lines.append(f"{draw(st.sampled_from(_SH_OPS))} x{rd}, x{a}, {draw(st.integers(0, 31))}")
        elif kind == "mem":
            op, size = draw(st.sampled_from([("sw", 4), ("sh", 2), ("sb", 1), ("lw", 4),
                                             ("lh", 2), ("lhu", 2), ("lb", 1), ("lbu", 1)]))
            off = draw(st.integers(0, 15)) * size
            lines.append(f"{op} x{rd if op[0] == 'l' else a}, {off}(x4)")
        else:
            op = draw(st.sampled_from(["beq", "bne", "blt", "bge", "bltu", "bgeu"]))
            lines.append(f"{op} x{a}, x{b}, 8")
            lines.append(f"addi x{rd}, x{rd}, 1")
    lines += ["li a7, 93", "ecall"]
    return "\n".join(lines)


@settings(max_examples=12, deadline=None)
@given(_programs())
def test_random_programs_check_mode(src):
    prog, ex, tr = S.traced(src)
    check_traces(tr.airs, tr.traces, tr.table_public_values)


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_every_slot_count(k):
    """Each k of the slot menu (chips/slots.py) on every instruction chip: check mode
    passes, and the k is read back off the widths."""
    from steadfast.rv32.tables import SLOTTED, slots_from_widths
    prog, ex, _ = S.all_classes()
    forced = {name: k for name in SLOTTED if name != "poseidon2"}
    tr = build_traces(prog, ex, max_cycles=1000, slots=forced)
    check_traces(tr.airs, tr.traces, tr.table_public_values)
    got = slots_from_widths([t.shape[1] for t in tr.traces], 2)
    assert {n: got[n] for n in forced} == forced


def test_slot_cells_do_not_depend_on_the_bus_namespace():
    """choose_slots reads a table's committed cells a row once per (table, LogUp degree
    cap, k): the same AIR in two bus namespaces (a block's transactions) has the same
    widths and parts, and the choice is the same under either."""
    from steadfast.air.builder import bus_namespace
    from steadfast.rv32.tables import (INDEX, SLOTTED, TABLES, cells_per_row, choose_slots,
                                       slots_from_widths, static_air)
    for lb in (1, 2):
        for name in ("alu", "load", "div"):
            for k in SLOTTED[name]:
                with bus_namespace("t7."):
                    a = static_air(name, lb, k)
                with bus_namespace("t8.", shared=("bytes",)):
                    b = static_air(name, lb, k)
                assert a is not b and a.name != b.name
                assert cells_per_row(a) == cells_per_row(b) == cells_per_row(static_air(name, lb, k))
            with bus_namespace("t9."):
                inside = [choose_slots(name, n, lb, obj) for n in (5, 3000) for obj in ("size", "cells")]
            assert inside == [choose_slots(name, n, lb, obj) for n in (5, 3000) for obj in ("size", "cells")]
        # the main width increases with k (slots_from_widths searches the menu upwards)
        for name in SLOTTED:
            ws = [static_air(name, lb, k).main_width for k in sorted(SLOTTED[name])]
            assert all(a < b for a, b in zip(ws, ws[1:])), (name, ws)
        # a proof's widths give back its slots in any namespace
        for k in SLOTTED["alu"]:
            widths = [0] * len(TABLES)
            for name in SLOTTED:
                widths[INDEX[name]] = static_air(name, lb, SLOTTED[name][0]).main_width
            with bus_namespace("t10."):
                widths[INDEX["alu"]] = static_air("alu", lb, k).main_width
            assert slots_from_widths(widths, lb)["alu"] == k


def test_slot_objective():
    """choose_slots: "size" (the default) takes the k with the smallest opening
    (k = 1 for a large table: a slot widens every opened row k times and saves only
    log2 k tree levels); "cells" the fewest committed cells; anything else is refused."""
    from steadfast.rv32.tables import choose_slots, opening_bytes, static_air
    from steadfast.rv32.chips.common import pow2_rows
    items = 300_000
    assert choose_slots("alu", items, 2) == 1
    assert choose_slots("poseidon2", 6_000, 2) == 1
    k = choose_slots("alu", items, 2, "cells")
    assert k == 3
    size = [opening_bytes(static_air("alu", 2, j), pow2_rows(-(-items // j)), 2)
            for j in (1, k)]
    assert size[0] < size[1]
    with pytest.raises(ValueError, match="objective"):
        choose_slots("alu", items, 2, "speed")
    prog, ex, _ = S.all_classes()
    tr = build_traces(prog, ex, max_cycles=1000, slot_objective="cells")
    check_traces(tr.airs, tr.traces, tr.table_public_values)


def test_pinned_slot_shapes():
    """rv32/slot_shapes.py's pinned (main width, cells per row) of every slotted table at
    every k and both LogUp caps is what building its AIR gives (regenerate the table with
    ``python -m steadfast.rv32.tables`` when a chip changes)."""
    from steadfast.rv32 import slot_shapes, tables
    assert tables.measured_slot_shapes() == slot_shapes.SHAPES
