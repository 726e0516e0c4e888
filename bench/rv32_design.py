"""The RV32IM table split, measured: committed cells per row of the AIRs the proof uses
(rv32/tables.py) against AIRs of the alternatives, built from the same gadgets
(rv32/chips/common.py) so that only the split differs.

    .venv/bin/python bench/rv32_design.py [--log-blowup 2]
    .venv/bin/python bench/rv32_design.py --unions 20     # proof-size model of table unions

Alternatives:

* **cpu+chips** (SP1's split): one CPU row per cycle carrying every class's adapter --
  pc, clk, the decoded fields, three register accesses, one memory access (the address
  adder, word before/after), the branch/jump next-pc logic, a selector per chip -- and
  sending (op, a, b, c) to a core chip that holds only the arithmetic.  Measured here:
  that CPU AIR (with slots 1: it has transition constraints) and the ALU core AIR.
* **sorted memory log** (:func:`sorted_log_air`): every access as a row (address, time,
  value, is_write, is_real, 2 gap limbs), sorted by (address, time), k accesses per row
  chained like consecutive rows; per access that AIR with one more limb column (a 32-bit
  word is 2 limbs).
* **byte limbs**: the ALU with 4-byte operands (4 carries, pair8 checks) instead of
  16-bit limbs.
* **table unions** (``--unions LOG``): the tables' opened rows + multiproof nodes
  (rv32.tables ``opening_bytes``, the proof-size model) for the bench mix at 2^LOG cycles,
  now and with same-height chips side by side in one table (each member's columns and
  buses, one LogUp running sum and one set of quotient parts; sound by the slots
  argument) -- docs/rv32.md "Proof size".
"""
from __future__ import annotations

import argparse
import sys

from steadfast.air import AirBuilder


def cells(air) -> int:
    return air.main_width + 4 * air.aux_width + 4 * air.num_parts


def cpu_air(log_blowup: int):
    """The CPU row of a CPU-table design (every adapter's columns in one row)."""
    from steadfast.rv32.chips.common import (MEMORY, REG, TWO16, access, fetch, range16, read,
                                             ts_of, write)
    b = AirBuilder("cpu_alternative")
    c = {n: b.main(n) for n in ("pcw", "clk", "rd", "rs1", "rs2", "imm_lo", "imm_hi", "v_lo",
                                "v_hi", "tgt", "op", "taken")}
    sel = b.main_cols("sel", 10)                  # alu bitwise shift branch load store jump mul div ecall
    real = sel[0]
    for s in sel[1:]:
        real = real + s
    a, r, out = ((b.main(f"{x}_lo"), b.main(f"{x}_hi")) for x in ("a", "r", "c"))
    fetch(b, real, c["pcw"], c["op"], c["rd"], c["rs1"], c["rs2"], (c["imm_lo"], c["imm_hi"]),
          (c["v_lo"], c["v_hi"]), c["tgt"])
    clk = c["clk"]
    read(b, "r1", REG, c["rs1"], a, ts_of(clk, 1), real)
    read(b, "r2", REG, c["rs2"], r, ts_of(clk, 2), real)
    write(b, "rd", REG, c["rd"], out, ts_of(clk, 3), real)
    mem = sel[4] + sel[5]
    wl, o0, o1, s_hi, k0, k1 = (b.main(n) for n in ("wl", "o0", "o1", "s_hi", "k0", "k1"))
    b.assert_zero(mem * (a[0] + c["imm_lo"] - 4 * wl - o0 - 2 * o1 - TWO16 * k0), name="addr_lo")
    b.assert_zero(mem * (a[1] + c["imm_hi"] + k0 - s_hi - TWO16 * k1), name="addr_hi")
    range16(b, wl, mem)
    range16(b, 4 * wl, mem)
    range16(b, s_hi, mem)
    w = (b.main("w_lo"), b.main("w_hi"))
    n = (b.main("n_lo"), b.main("n_hi"))
    access(b, "mem", MEMORY, wl + (1 << 14) * s_hi, w, n, ts_of(clk, 2), mem)
    b.when_transition(c["pcw"].next - c["pcw"] - 1 - c["taken"] * (c["tgt"] - c["pcw"] - 1),
                      name="next_pc")
    b.when_transition(clk.next - clk - 1, name="clk_step")
    b.send("core", [c["op"], a[0], a[1], r[0] + c["imm_lo"], r[1] + c["imm_hi"], out[0],
                    out[1], c["taken"]], multiplicity=real - sel[6])
    return b.build(log_blowup=log_blowup)


def alu_core_air(log_blowup: int):
    """The ALU's arithmetic alone, fed by the CPU over a bus (the CPU-table design)."""
    from steadfast.rv32.chips.common import TWO16, range16
    b = AirBuilder("alu_core_alternative")
    f = b.main_cols("f", 4)
    a, bv, out, u = ((b.main(f"{x}_lo"), b.main(f"{x}_hi")) for x in ("a", "b", "c", "u"))
    k0, k1, sa, sb = (b.main(n) for n in ("k0", "k1", "sa", "sb"))
    real = f[0] + f[1] + f[2] + f[3]
    b.assert_zero(f[0] * (a[0] + bv[0] - u[0] - TWO16 * k0), name="lo")
    b.assert_zero(f[0] * (a[1] + bv[1] + k0 - u[1] - TWO16 * k1), name="hi")
    range16(b, u[0], real)
    range16(b, u[1], real)
    range16(b, 2 * a[1] - TWO16 * sa, f[2])
    range16(b, 2 * bv[1] - TWO16 * sb, f[2])
    b.receive("core", [f[0] + 2 * f[1] + 4 * f[2] + 5 * f[3], a[0], a[1], bv[0], bv[1], out[0],
                       out[1], 0], multiplicity=real)
    return b.build(log_blowup=log_blowup)


def byte_alu_air(log_blowup: int):
    """ADD on 4-byte limbs with the same adapter (bytes checked by pair8)."""
    from steadfast.rv32.chips.alu import _adapter
    from steadfast.rv32.chips.common import PAIR8, REG, read, ts_of, write
    b = AirBuilder("alu_bytes_alternative")
    c, fl, real = _adapter(b, {1: "f_add", 2: "f_sub", 4: "f_slt", 5: "f_sltu"})
    a, r, out = (b.main_cols(x, 4) for x in ("a", "r", "c"))
    kk = b.main_cols("k", 4)
    sa, sb = b.main("sa"), b.main("sb")
    clk = c["clk"]
    limbs = lambda x: (x[0] + 256 * x[1], x[2] + 256 * x[3])  # noqa: E731
    read(b, "r1", REG, c["rs1"], limbs(a), ts_of(clk, 1), real)
    read(b, "r2", REG, c["rs2"], limbs(r), ts_of(clk, 2), real)
    write(b, "rd", REG, c["rd"], limbs(out), ts_of(clk, 3), real)
    carry = 0
    for i in range(4):
        b.assert_zero(real * (a[i] + r[i] + carry - out[i] - 256 * kk[i]), name=f"add{i}")
        carry = kk[i]
    for x in (out,):
        b.send(PAIR8, [x[0], x[1]], multiplicity=real)
        b.send(PAIR8, [x[2], x[3]], multiplicity=real)
    b.send(PAIR8, [2 * a[3] - 256 * sa, 2 * r[3] - 256 * sb], multiplicity=real)
    return b.build(log_blowup=log_blowup)


def sorted_log_air(k: int, log_blowup: int):
    """The sorted memory log with k accesses per row: per access addr, time, value,
    is_write, is_real, gap_lo, gap_hi; each consecutive pair of accesses (slot j -> j + 1
    in a row, the last slot -> slot 0 of the next row) steps the address by 0 or 1, keeps
    the time gap in range when the address repeats and a read's value equal to the
    previous access's; one receive and three 16-bit range lookups per access."""
    b = AirBuilder("sorted_log", public=["memory_size"])
    names = ("addr", "time", "value", "is_write", "is_real", "gap_lo", "gap_hi")
    S = [{g: b.main(g if k == 1 else f"{g}@{j}") for g in names} for j in range(k)]
    msize = b.pv("memory_size")
    for s in S:
        b.assert_bool(s["is_real"])
        b.assert_bool(s["is_write"])
    b.when_first_row(S[0]["is_real"] - 1)
    b.when_first_row(S[0]["addr"])

    def pair(prev, cur, add):
        d = cur["addr"] - prev["addr"]
        add((1 - prev["is_real"]) * cur["is_real"])
        add(d * (1 - d))
        add(cur["is_real"] * (cur["gap_lo"] + (1 << 16) * cur["gap_hi"]
                              - (1 - d) * (cur["time"] - prev["time"] - 1)))
        add((1 - d) * (1 - cur["is_write"]) * (cur["value"] - prev["value"]))
        add((prev["is_real"] - cur["is_real"]) * (prev["addr"] - msize + 1))

    for j in range(k - 1):
        pair(S[j], S[j + 1], b.assert_zero)
    pair(S[k - 1], {g: e.next for g, e in S[0].items()}, b.when_transition)
    b.when_last_row(S[k - 1]["is_real"] * (S[k - 1]["addr"] - msize + 1))
    for s in S:
        b.receive("memory", [s["addr"], s["time"], s["value"], s["is_write"]],
                  multiplicity=s["is_real"])
        for v in (s["gap_lo"], s["gap_hi"], s["gap_hi"] * (1 << 8)):
            b.send("range16", [v], multiplicity=s["is_real"])
    return b.build(log_blowup=log_blowup)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--log-blowup", type=int, default=2)
    ap.add_argument("--unions", type=int, metavar="LOG", help="model table unions at 2^LOG cycles")
    args = ap.parse_args(argv)
    lb = args.log_blowup
    if args.unions:
        return unions(args.unions, lb)
    from steadfast.rv32.tables import SLOTTED, static_air
    print(f"committed cells per row at log_blowup {lb} (main + 4 aux + 4 parts)")
    print("\nthe proof's chips (k = 1; per item at k = 4):")
    for name in SLOTTED:
        if name == "poseidon2":
            continue
        a1, a4 = static_air(name, lb, 1), static_air(name, lb, 4)
        print(f"  {name:<8} {cells(a1):>4}   ({a1.main_width} main, {a1.aux_width} aux, "
              f"{a1.num_parts} parts; {cells(a4) / 4:.1f} at k = 4)")
    cpu, core = cpu_air(lb), alu_core_air(lb)
    print(f"\ncpu+chips: CPU row {cells(cpu)} ({cpu.main_width} main, {cpu.aux_width} aux, "
          f"{cpu.num_parts} parts) + ALU core {cells(core)} = {cells(cpu) + cells(core)} per "
          f"ALU cycle (the chip design: {cells(static_air('alu', lb, 1))}, "
          f"{cells(static_air('alu', lb, 4)) / 4:.1f} at k = 4)")
    for k in (1, 4, 9):
        m = sorted_log_air(k, lb)
        print(f"sorted memory log, k = {k}: {(cells(m) + k) / k:.1f} cells per access "
              f"(+1 limb column) against 7 per read / 9 per write here (3 + 5 columns, 4 "
              f"lookups)")
    ba = byte_alu_air(lb)
    print(f"byte limbs: ALU {cells(ba)} ({ba.main_width} main) against "
          f"{cells(static_air('alu', lb, 1))} with 16-bit limbs")
    return 0


UNION_PLANS = (
    (("alu", "branch"), ("bitwise", "shift"), ("load", "store", "mul", "div")),
    (("alu", "branch", "jump"), ("bitwise", "shift"), ("load", "store", "mul", "div"),
     ("ecall", "p2call", "ioword")),
    (("alu", "branch", "jump"), ("bitwise", "shift", "load", "store", "mul", "div"),
     ("ecall", "p2call", "ioword")),
)


def unions(log_cycles: int, lb: int) -> int:
    """The proof-size model (rows + nodes of every table) now and for UNION_PLANS."""
    from pathlib import Path
    from types import SimpleNamespace
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "guests"))
    import models
    from steadfast import rv32
    from steadfast.rv32.tables import TABLES, opening_bytes
    prog = rv32.load_elf(root / "guests" / "bin" / "bench.elf")
    data, _ = models.bench_input(1 << log_cycles, 8, 4, 2, 1)
    ex = rv32.execute(prog, data, max_cycles=rv32.MAX_CYCLES_CEILING, record=True)
    tr = rv32.build_traces(prog, ex, max_cycles=rv32.MAX_CYCLES_CEILING, log_blowup=lb)
    shape = {n: (t.shape[0], a.main_width, a.aux_width, a.num_parts)
             for n, a, t in zip(TABLES, tr.airs, tr.traces)}

    def kb(shapes):
        return sum(opening_bytes(SimpleNamespace(main_width=m, aux_width=a, num_parts=p), n, lb)
                   for n, m, a, p in shapes) / 1024

    print(f"2^{log_cycles} cycles ({ex.cycles:,}), slots {tr.slots}: tables' rows + nodes "
          f"(model) {kb(shape.values()):.0f} KB, {len(shape)} tables")
    for plan in UNION_PLANS:
        merged = [n for g in plan for n in g]
        out = [v for n, v in shape.items() if n not in merged]
        for g in plan:
            ms = [shape[n] for n in g]
            out.append((max(m[0] for m in ms), sum(m[1] for m in ms),
                        sum(m[2] - 1 for m in ms) + 1, max(m[3] for m in ms)))
        print(f"  {' | '.join('+'.join(g) for g in plan)}: {kb(out):.0f} KB, {len(out)} tables")
    return 0


if __name__ == "__main__":
    sys.exit(main())
