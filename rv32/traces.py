"""Every table's trace of an execution, from its record (rv32/record.py) and program.

``build_traces(program, execution, max_cycles, log_blowup)`` -> :class:`Rv32Traces`
(AIRs, traces, per-table public values in proof order, and the committed cells of each
table).  The steps:

1. decode: each cycle's PROGRAM row (its pc's image word, whose decoding the chips use),
   checked against the record's instruction word;
2. the chips: each cycle goes to the chip of its op, which computes its columns with
   whole-array numpy arithmetic and registers its memory-argument accesses; the ECALLs
   also produce the IOWORD and P2CALL rows; rd values are checked against the record;
3. the memory argument (chips/rows.py ``Accesses``): one sort gives every access its
   previous value and timestamp, and every address its final state -- the MEMORY and
   REGISTERS boundaries;
4. the multiplicities: PROGRAM's (executions per pc), IO's (input bytes read), BYTES'
   (every lookup of every table, evaluated from the AIRs' own interaction expressions on
   the traces, so they agree with the AIRs by construction), POSEIDON2's permutations.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..air import compile_program, evaluate
from ..air.eval import domain_leaf
from ..kernels.ntt_host import transpose
from ..verifier.poseidon2 import permute

from . import abi, isa
from .chips import bytes as bytes_chip
from .chips.alu import ALU_OPS, BITWISE_OPS, alu_rows, bitwise_rows
from .chips.branch import BRANCH_OPS, branch_rows
from .chips.common import MEMORY, OP_JUMP, REG, SINK, pow2_rows
from .chips.ecall import ecall_rows
from .chips.io import io_trace, ioword_rows
from .chips.jump import jump_rows
from .chips.loadstore import LOAD_OPS, STORE_OPS, load_rows, store_rows
from .chips.memory import memory_rows
from .chips.muldiv import DIV_OPS, MUL_OPS, div_rows, mul_rows
from .chips.poseidon2_trace import poseidon2_trace
from .chips.precompile import p2call_rows
from .chips.program import image_of, program_trace
from .chips.registers import ROWS as REG_ROWS, register_init, registers_rows
from .chips.rows import Accesses, Rows
from .chips.shift import SHIFT_OPS, shift_rows
from .statement import public_values
from .tables import (INDEX, SLOTTED, SPLITTABLE, TABLES, choose_slots, choose_split,
                     piece_name, piece_public_values, slot_mode, table_names, table_airs)

DEFAULT_LOG_BLOWUP = 2
_OPS = {"alu": ALU_OPS, "bitwise": BITWISE_OPS, "shift": SHIFT_OPS, "branch": BRANCH_OPS,
        "load": LOAD_OPS, "store": STORE_OPS, "jump": (OP_JUMP,), "mul": MUL_OPS,
        "div": DIV_OPS, "ecall": (isa.ECALL,)}
_ROWS = {"alu": alu_rows, "bitwise": bitwise_rows, "shift": shift_rows, "branch": branch_rows,
         "load": load_rows, "store": store_rows, "jump": jump_rows, "mul": mul_rows,
         "div": div_rows}


def committed_cells(air, rows: int) -> int:
    """rows x (main + 4 aux EF columns + 4 quotient parts): what a table commits per
    unit of blowup."""
    return rows * (air.main_width + 4 * air.aux_width + 4 * air.num_parts)


@dataclass
class Rv32Traces:
    """AIRs, traces and public values of one execution's proof, in proof order."""
    airs: list
    traces: list
    table_public_values: list
    cycles: int
    real_rows: dict = field(default_factory=dict)
    slots: dict = field(default_factory=dict)
    p2_states: np.ndarray | None = field(default=None, repr=False)   # POSEIDON2's inputs
    lookup_counts: dict | None = field(default=None, repr=False)     # BYTES' per bus
    split: tuple = ()                       # the chips with a second table (tables.py)

    @property
    def names(self) -> list:
        """The tables in proof order: TABLES, then the split chips' pieces."""
        return list(table_names(self.split))

    def __iter__(self):
        """``airs, traces, table_public_values = build_traces(...)``."""
        return iter((self.airs, self.traces, self.table_public_values))

    def cells(self) -> dict:
        """Committed cells per table (rows x (main + 4 aux + 4 parts))."""
        return {name: committed_cells(air, t.shape[0])
                for name, air, t in zip(self.names, self.airs, self.traces)}

    def cells_per_cycle(self) -> float:
        return sum(self.cells().values()) / max(1, self.cycles)

    def report(self) -> str:
        """One line per table: rows (real), width, aux, parts, cells, cells per cycle."""
        lines = [f"{'table':<10} {'rows':>9} {'k':>2} {'items':>9} {'main':>5} {'aux':>4} "
                 f"{'parts':>5} {'cells':>12} {'per cycle':>9}"]
        cells = self.cells()
        for name, air, t in zip(self.names, self.airs, self.traces):
            lines.append(f"{name:<10} {t.shape[0]:>9,} {self.slots.get(name, 1):>2} "
                         f"{self.real_rows.get(name, 0):>9,} "
                         f"{air.main_width:>5} {air.aux_width:>4} {air.num_parts:>5} "
                         f"{cells[name]:>12,} {cells[name] / max(1, self.cycles):>9.1f}")
        total = sum(cells.values())
        lines.append(f"{'total':<10} {'':>9} {'':>2} {'':>9} {'':>5} {'':>4} {'':>5} {total:>12,} "
                     f"{total / max(1, self.cycles):>9.1f}   ({self.cycles:,} cycles)")
        return "\n".join(lines)


class _Ctx:
    """Per-cycle arrays (int64): pcw, the decoded fields, operands, memory words."""

    def __init__(self, image, rec):
        self.rec = rec
        pc = rec.pc.astype(np.int64)
        if np.any(pc & 3):
            raise ValueError("a cycle's pc is not 4-aligned")
        self.pcw = pc >> 2
        row = image.index(self.pcw)
        ok = (row < image.wa.size)
        ok[ok] = image.wa[row[ok]] == self.pcw[ok]
        if not np.all(ok) or not np.array_equal(image.word[row], rec.insn):
            raise ValueError("the record's instructions are not the program's words")
        d = image.dec[row]
        self.op, self.rd, self.rs1, self.rs2, self.imm, self.v, self.tgt = (d[:, j]
                                                                           for j in range(7))
        self.a = rec.rs1_val.astype(np.int64)
        self.r = rec.rs2_val.astype(np.int64)
        self.mem_before = rec.mem_before.astype(np.int64)
        self.mem_after = rec.mem_after.astype(np.int64)


def _chip_of(op: np.ndarray) -> dict:
    out = {}
    for name, ops in _OPS.items():
        out[name] = np.flatnonzero(np.isin(op, ops))
    if sum(v.size for v in out.values()) != op.size:
        raise ValueError("a cycle executes an instruction no chip runs (op 0)")
    return out


def _lookup_counts(airs, traces, pvs) -> dict:
    """BYTES' multiplicities: every table's sends on its three buses, evaluated from the
    AIRs' interaction expressions on the traces."""
    counts = {bus: np.zeros(bytes_chip.SIZE, np.int64) for bus in bytes_chip.BUSES}
    # every send's BYTES row and multiplicity, per bus, added once at the end (exact int64
    # sums): a 2^16-entry bincount per sending interaction had cost ~0.05 ms of fixed work
    # each -- ~0.25 s of a 30-transaction block's traces (4,810 such interactions)
    sent: dict = {bus: ([], []) for bus in counts}
    for air, trace, pv in zip(airs, traces, pvs):
        its = [it for it in air.interactions if it.bus in counts and it.sign > 0]
        if not its:
            continue
        prog = _lookup_program(air, its)
        prep = None if air.preprocessed is None else air.preprocessed.T
        cols = transpose(trace)             # contiguous columns: the programs read them whole
        vals = evaluate(prog, domain_leaf(cols, prep, None, 1, [int(v) for v in pv], {}))
        pos = 0
        n = trace.shape[0]
        for it in its:
            k = len(it.values)
            v = [np.broadcast_to(np.asarray(x, np.int64), (n,)) for x in vals[pos:pos + k]]
            m = np.broadcast_to(np.asarray(vals[pos + k], np.int64), (n,))
            pos += k + 1
            sel = np.flatnonzero(m)
            if sel.size:
                sent[it.bus][0].append(bytes_chip.row_of(it.bus, [x[sel] for x in v]))
                sent[it.bus][1].append(m[sel])
    for bus, (rows, mult) in sent.items():
        if rows:
            np.add.at(counts[bus], np.concatenate(rows), np.concatenate(mult))
    return counts


_LOOKUP_PROGRAMS: dict = {}


def _lookup_program(air, its):
    key = id(air)
    hit = _LOOKUP_PROGRAMS.get(key)
    if hit is None or hit[0] is not air:
        roots = []
        for it in its:
            roots.extend(it.values)
            roots.append(it.multiplicity)
        hit = _LOOKUP_PROGRAMS[key] = (air, compile_program(roots))
    return hit[1]


def build_traces(program, execution, max_cycles: int = abi.DEFAULT_MAX_CYCLES,
                 log_blowup: int = DEFAULT_LOG_BLOWUP, image=None,
                 slots: dict | None = None, slot_objective: str = "size",
                 segment=None) -> Rv32Traces:
    """AIRs, traces and public values for a proof that ``program`` run on the execution's
    input with limit ``max_cycles`` exits with its exit code and output (module
    docstring).  ``image``: :func:`chips.program.image_of` of the program, if at hand;
    ``slots``: table -> k to force a slotted table's k (tables.SLOTTED; the others get
    :func:`tables.choose_slots`' k for ``slot_objective``: "size", the smallest proof,
    or "cells", the fewest committed cells; "split" takes the smallest proof's k and puts
    a chip whose items fill at most half of the power of two past its full one in two
    tables, :func:`tables.choose_split`, docs/rv32.md "Split chips"; a program's
    proof, a segment's or a block's transaction: rv32/block.py moves the pieces after
    the block's shared tables).  ``segment``: a
    :class:`rv32.segments.Segment` whose local execution this is -- the tables of that
    segment's proof (its boundary tables, docs/rv32.md "Long programs: segments")."""
    if segment is not None:
        execution = segment.execution
    rec = execution.record
    if rec is None:
        raise ValueError("build_traces needs an execution run with record=True")
    image = image_of(program) if image is None else image
    ctx = _Ctx(image, rec)
    cycles = rec.cycles
    if segment is None:
        acc = Accesses(register_init(), image.wa, image.word)
        budget, cursors = max_cycles, (0, 0, 0)
    else:
        acc = Accesses(segment.regs_in, segment.wa, segment.v_in)
        budget, cursors = segment.budget(max_cycles), segment.regs_in[33:36]
    chips = _chip_of(ctx.op)
    rows: dict = {}
    for name, fn in _ROWS.items():
        cyc = chips[name]
        got = fn(ctx, cyc, acc)
        rows[name], out = got if isinstance(got, tuple) else (got, None)
        if out is not None:
            wrote = ctx.rd[cyc] != SINK
            if not np.array_equal(out[wrote], rec.rd_val[cyc][wrote].astype(np.int64)):
                bad = cyc[wrote][np.flatnonzero(out[wrote] != rec.rd_val[cyc][wrote])[0]]
                raise ValueError(f"{name}: cycle {bad} writes {int(out[wrote][0])}, the record "
                                 f"{int(rec.rd_val[bad])}")
    rows["ecall"], info = ecall_rows(ctx, chips["ecall"], acc, budget, len(rec.input), cursors)
    rows["ioword"] = _ioword(rec, info, acc)
    rows["p2call"], p2_states = _p2call(rec, info, acc)
    acc.resolve()
    for r in rows.values():
        r.finish(acc)
    if segment is None:
        rows["memory"] = _memory_rows(acc, image)
        rows["registers"] = _registers_rows(acc)
    else:
        rows["memory"], rows["registers"] = _segment_boundary(acc, segment)

    output = bytes(rec.output)
    slots = dict(slots or {})
    for name in SLOTTED:
        if name not in slots:
            items = len(p2_states) if name == "poseidon2" else rows[name].m
            slots[name] = choose_slots(name, max(1, items), log_blowup, slot_objective)
    cut: dict = {}                          # split chip -> its items in its own table
    piece_objective, splits = slot_mode(slot_objective)
    if splits:
        for name in SPLITTABLE:             # in TABLES order
            got = choose_split(name, rows[name].m, slots.get(name, 1), log_blowup, cycles,
                               piece_objective)
            if got is not None:
                cut[name] = got[0]
                slots[piece_name(name)] = got[1]
    split = tuple(cut)
    names = table_names(split)
    if segment is None:
        airs = table_airs(image, rec.input, output, log_blowup, slots, names=names)
        pvs = public_values(program, rec.input, output, execution.exit_code, max_cycles)
    else:
        from .segments import segment_airs, segment_public_values
        airs = segment_airs(image, rec.input, segment, log_blowup, slots, split)
        pvs = segment_public_values(rec.input, segment, max_cycles)
    pvs += piece_public_values(split)
    traces = [None] * len(names)
    for name, r in rows.items():
        height = REG_ROWS if name == "registers" else None
        if name in cut:                     # the chip's table full, the rest in its piece
            j = names.index(piece_name(name))
            traces[INDEX[name]] = r.trace(airs[INDEX[name]], None, slots.get(name, 1), 0,
                                          cut[name])
            traces[j] = r.trace(airs[j], None, slots[names[j]], cut[name], r.m)
        else:
            traces[INDEX[name]] = r.trace(airs[INDEX[name]], height, slots.get(name, 1))
    prog_air = airs[INDEX["program"]]
    traces[INDEX["program"]] = program_trace(image, ctx.pcw, prog_air.fixed_height)
    if segment is None:
        n_in, n_read = len(rec.input), _final(acc, REG, 33)
    else:                                   # the slice read, every byte of it
        n_in = n_read = int(segment.regs_out[33] - segment.regs_in[33])
    traces[INDEX["io"]] = io_trace(n_in, n_read, airs[INDEX["io"]].fixed_height)
    states = np.asarray(p2_states, dtype=np.uint32).reshape(-1, 16)
    traces[INDEX["poseidon2"]] = poseidon2_trace(states, slots["poseidon2"])
    bidx = INDEX["bytes"]
    traces[bidx] = np.zeros((bytes_chip.SIZE, 3), dtype=np.uint32)
    counts = _lookup_counts(airs, traces, pvs)
    traces[bidx] = bytes_chip.bytes_trace(counts)
    real = {name: r.m for name, r in rows.items()}
    for name, first in cut.items():
        real[piece_name(name)] = real[name] - first
        real[name] = first
    real.update({"program": int(image.wa.size), "io": len(rec.input) + len(output),
                 "bytes": bytes_chip.SIZE, "poseidon2": int(states.shape[0])})
    return Rv32Traces(airs, traces, pvs, cycles, real, slots, states, counts, split)


def _final(acc: Accesses, space: int, addr: int) -> int:
    a, lo, _, _ = acc.finals(space)
    hit = np.flatnonzero(a == addr)
    return int(lo[hit[0]]) if hit.size else 0


def _ioword(rec, info, acc) -> Rows:
    kinds = info["kinds"]
    chain = kinds["k_read"] | kinds["k_w1"]
    ev = rec.ecall_mem_event.astype(np.int64)
    sel = np.flatnonzero(chain[ev]) if ev.size else np.zeros(0, np.int64)
    e = ev[sel]
    clk = rec.ecall_cycle.astype(np.int64)[e]
    kind = np.where(kinds["k_read"][e], 1, 2)
    wa = rec.ecall_mem_word_addr.astype(np.int64)[sel] >> 2
    before = rec.ecall_mem_before.astype(np.int64)[sel]
    after = rec.ecall_mem_after.astype(np.int64)[sel]
    rows = Rows(sel.size)
    rows.update(ioword_rows(clk, kind, wa, info["a1"][e], info["n"][e], info["cur"][e], before,
                            after))
    rows.access(acc, "mem", MEMORY, wa, 3 * clk + 2, after & 0xFFFF, after >> 16,
                old=(before & 0xFFFF, before >> 16))
    return rows


def _p2call(rec, info, acc):
    calls = np.flatnonzero(info["kinds"]["k_p2"])
    ev = rec.ecall_mem_event.astype(np.int64)
    before = rec.ecall_mem_before.astype(np.int64)
    after = rec.ecall_mem_after.astype(np.int64)
    # the touched words are grouped by call, in call order: each call's 24 start at its
    # first entry (16 reads, then 8 writes)
    start = np.searchsorted(ev, calls)
    idx = start[:, None] + np.arange(24)[None, :]
    if calls.size and (idx.max() >= ev.size or np.any(ev[idx] != calls[:, None])):
        raise ValueError("a POSEIDON2 call did not touch its 24 words")
    words_in = before[idx[:, :16]] if calls.size else np.zeros((0, 16), np.int64)
    words_out = after[idx[:, 16:]] if calls.size else np.zeros((0, 8), np.int64)
    states = permute(words_in.astype(np.uint32)) if calls.size else np.zeros((0, 16), np.uint32)
    if calls.size and not np.array_equal(states[:, :8].astype(np.int64), words_out):
        raise ValueError("a POSEIDON2 call's outputs are not the compression of its inputs")
    clk = rec.ecall_cycle.astype(np.int64)[calls]
    rows = p2call_rows(clk, info["a0"][calls] >> 2, info["a1"][calls] >> 2, words_in, words_out,
                       states[:, 8:].astype(np.int64), acc)
    return rows, words_in.astype(np.uint32)


def _memory_rows(acc: Accesses, image) -> Rows:
    wa, f_lo, f_hi, f_ts = acc.finals(MEMORY)
    allwa = np.union1d(wa, image.wa)
    j = np.searchsorted(image.wa, allwa)
    jj = np.minimum(j, max(image.wa.size - 1, 0))
    img = (image.wa.size > 0) & (image.wa[jj] == allwa) if image.wa.size else \
        np.zeros(allwa.size, bool)
    init = np.where(img, image.word[jj].astype(np.int64), 0) if image.wa.size else \
        np.zeros(allwa.size, np.int64)
    k = np.searchsorted(wa, allwa)
    kk = np.minimum(k, max(wa.size - 1, 0))
    touched = (wa.size > 0) & (wa[kk] == allwa) if wa.size else np.zeros(allwa.size, bool)
    lo = np.where(touched, f_lo[kk] if wa.size else 0, init & 0xFFFF)
    hi = np.where(touched, f_hi[kk] if wa.size else 0, init >> 16)
    ts = np.where(touched, f_ts[kk] if wa.size else 0, 0)
    rows = Rows(allwa.size)
    rows.update(memory_rows(allwa, img, init, lo, hi, ts))
    return rows


def _segment_boundary(acc: Accesses, seg):
    """PAGEMEM's and SEGREGS' main columns (chips/segment.py), checking that the accesses
    end where the segment's boundary says."""
    from .chips.common import NUM_REGS
    from .chips.segment import SINK_ROW
    wa, lo, hi, ts = acc.finals(MEMORY)
    if not np.array_equal(wa, seg.wa) or not np.array_equal(lo + (hi << 16), seg.v_out):
        raise ValueError(f"segment {seg.index}: the accesses do not end at its page-out values")
    mem = Rows(wa.size)
    mem.update({"f_ts": ts})
    a, lo, hi, ts = acc.finals(REG)
    f_ts = np.zeros(NUM_REGS, np.int64)
    f_ts[a] = ts
    end = np.asarray(seg.regs_in, dtype=np.int64).copy()
    end[a] = np.where(a >= 33, lo, lo + (hi << 16))
    sink = np.zeros(NUM_REGS, np.int64), np.zeros(NUM_REGS, np.int64)
    hit = np.flatnonzero(a == SINK_ROW)
    if hit.size:
        sink[0][SINK_ROW], sink[1][SINK_ROW] = lo[hit[0]], hi[hit[0]]
    end[SINK_ROW] = 0
    if not np.array_equal(end, np.asarray(seg.regs_out, dtype=np.int64)):
        raise ValueError(f"segment {seg.index}: the accesses do not end at its registers")
    regs = Rows(NUM_REGS)
    regs.update({"f_lo": sink[0], "f_hi": sink[1], "f_ts": f_ts})
    return mem, regs


def _registers_rows(acc: Accesses) -> Rows:
    from .chips.common import NUM_REGS
    a, lo, hi, ts = acc.finals(REG)
    init = register_init().astype(np.int64)
    f_lo, f_hi, f_ts = init & 0xFFFF, init >> 16, np.zeros(NUM_REGS, np.int64)
    f_lo[a], f_hi[a], f_ts[a] = lo, hi, ts
    rows = Rows(NUM_REGS)
    rows.update(registers_rows(f_lo, f_hi, f_ts))
    return rows


__all__ = ["build_traces", "Rv32Traces", "committed_cells", "DEFAULT_LOG_BLOWUP"]
