"""The five tables of a block proof as AIRs (docs/vm.md "Tables").

==========  ======================================================  =======  ======
table       rows                                                    degree   parts
==========  ======================================================  =======  ======
CPU         one per cycle (prologue, transactions, epilogue, pad)   5 (3)    4 (2)
PROGRAM     the ROM (preprocessed) + execution multiplicities       2        1
MEMORY      every memory access, sorted by (address, time)          5 (3)    4 (2)
RANGE       the values 0..2^16-1 (preprocessed) + multiplicities    2        1
POSEIDON2   k permutations per row (slots), every round in columns  3        2
==========  ======================================================  =======  ======

The degree is that of the LogUp batching, chosen per AIR for the proof's log_blowup
(air/builder.py ``choose_logup_degree``: the budget in [base, 5] -- [base, 3] at
log_blowup 1 -- that commits the fewest aux + quotient-part columns; docs/protocol.md
"LogUp"): in brackets at log_blowup 1, and for MEMORY with k = 1 slot at any blowup
(2 aux + 2 parts beat 1 + 4).  Every builder and ``block_airs`` take ``log_blowup``
(default DEFAULT_LOG_BLOWUP, the default proof parameters').

Buses (LogUp; arity in brackets):

* ``program`` [5]: CPU sends (pc, opcode, a, b, c) for each real row; PROGRAM receives.
* ``memory`` [4]: CPU sends (address, time, value, is_write) for each access -- slot A
  (time 3*clk, read), B (3*clk+1, read), C (3*clk+2, write), lanes 0..7; MEMORY receives.
* ``range16`` [1]: CPU (LT operands and difference) and MEMORY (time-gap limbs) send
  values that must be < 2^16; RANGE receives with its multiplicity column.
* ``poseidon2`` [32]: CPU sends (input[16], output[16]) for HASH, READ, WRITE, DISPATCH,
  ABSORB_*; POSEIDON2 receives.

The column layouts live here (:class:`Layout`) and are shared with :mod:`vm.traces`.
Slots (``SLOTTED``; docs/vm.md "Slots"): POSEIDON2 packs k = 1, 2 or 3 permutations per
row, MEMORY k = 1..16 accesses per row (chained slot to slot as rows are chained);
``block_airs(rom, slots, log_blowup)`` takes each slotted table's k, ``slots_from_widths``
reads them back off the main widths.
"""
from __future__ import annotations

import functools

import numpy as np

from ..air import Air, AirBuilder, Expr
from ..air.builder import gc_paused, logup_degree_cap
from ..air.expr import walk

from . import isa
from .poseidon2 import N_FULL_HALF, N_PARTIAL, WIDTH, external_linear, internal_linear
from .block import MAX_LOG_CYCLES
from .statement import NUM_PUBLIC_VALUES

from ..kernels.poseidon2_constants import RC_FULL, RC_PARTIAL
from ..verifier.proof_format import Params

RANGE_BITS = 16
RANGE_SIZE = 1 << RANGE_BITS
TABLES = ("cpu", "program", "memory", "range", "poseidon2")

# Selector columns, one per opcode 1..18; the opcode sent to PROGRAM is sum(k * sel_k).
SELECTORS = [isa.OPCODE_NAMES[k] for k in range(1, isa.NUM_OPCODES)]

PV_NAMES = (["memory_size"] + [f"initial_digest[{i}]" for i in range(8)]
            + [f"final_digest[{i}]" for i in range(8)] + [f"program_digest[{i}]" for i in range(8)]
            + [f"input_digest[{i}]" for i in range(8)] + [f"output_digest[{i}]" for i in range(8)]
            + ["max_cycles"])
# The STOP row's slack max_cycles - 1 - clk in MAX_LOG_CYCLES one-bit limbs, held in the
# first SLACK_BITS of the columns v[0..17], o[0..16] (STOP uses none of them).
SLACK_BITS = MAX_LOG_CYCLES
assert len(PV_NAMES) == NUM_PUBLIC_VALUES
# The log_blowup the AIRs are built for unless told (verifier/proof_format.py Params'
# default; the LogUp batching's degree depends on it, air/builder.py choose_logup_degree).
DEFAULT_LOG_BLOWUP = Params.log_blowup


class Layout:
    """Ordered main columns of one table: ``idx[name]`` is the first column of a group."""

    def __init__(self, groups):
        self.groups = list(groups)
        self.idx = {}
        pos = 0
        for name, count in self.groups:
            self.idx[name] = pos
            pos += count
        self.width = pos

    def declare(self, b: AirBuilder) -> dict:
        cols = {}
        for name, count in self.groups:
            cols[name] = b.main(name) if count == 1 else b.main_cols(name, count)
        return cols


CPU_LAYOUT = Layout([("clk", 1), ("pc", 1), ("a", 1), ("b", 1), ("c", 1)]
                    + [(f"is_{s.lower()}", 1) for s in SELECTORS]
                    + [("addr_b", 1), ("addr_c", 1), ("v", 17), ("o", 16), ("hin", 8), ("hout", 8),
                       ("tx", 1), ("jin", 1), ("jout", 1), ("inv", 1), ("nz", 1), ("d", 1)])
MEMORY_LAYOUT = Layout([("addr", 1), ("time", 1), ("value", 1), ("is_write", 1), ("is_real", 1),
                        ("gap_lo", 1), ("gap_hi", 1)])
P2_LAYOUT = Layout([("in", 16)]
                   + [(f"cube{r}", 16) for r in range(N_FULL_HALF)]
                   + [(f"sbox{r}", 16) for r in range(N_FULL_HALF)]
                   + [("pcube", N_PARTIAL), ("psbox", N_PARTIAL)]
                   + [(f"cube{r}", 16) for r in range(N_FULL_HALF, 2 * N_FULL_HALF)]
                   + [(f"sbox{r}", 16) for r in range(N_FULL_HALF, 2 * N_FULL_HALF)]
                   + [("mult", 1)])

# Slots (docs/vm.md "Slots"): a table whose rows carry no transition constraint may hold k
# independent copies of its row side by side, k from the table's menu; slot j's column
# groups are the k = 1 groups named ``group@j``.  POSEIDON2's menu:
P2_SLOTS = (1, 2, 3)
# MEMORY's menu (accesses per row; consecutive slots are chained like consecutive rows):
MEMORY_SLOTS = tuple(range(1, 17))


def slot_group(name: str, j: int, k: int) -> str:
    """Slot j's name for column group ``name`` of a k-slot table (k = 1: ``name``)."""
    return name if k == 1 else f"{name}@{j}"


def p2_layout(k: int = 1) -> Layout:
    """POSEIDON2 with k permutations per row: slot j holds P2_LAYOUT's groups (named
    ``group@j``) in columns [j * P2_LAYOUT.width, (j + 1) * P2_LAYOUT.width), so a k = 1
    trace of n * k rows reshaped to n rows is the k-slot trace.  k = 1 is P2_LAYOUT."""
    if k not in P2_SLOTS:
        raise ValueError(f"POSEIDON2 takes k in {P2_SLOTS} permutations per row, not {k!r}")
    if k == 1:
        return P2_LAYOUT
    return Layout([(slot_group(g, j, k), c) for j in range(k) for g, c in P2_LAYOUT.groups])


def nxt(e: Expr) -> Expr:
    """``e`` with every column read on the next row (``.next`` for whole expressions)."""
    memo: dict = {}
    for node in walk([e]):
        if node.op in ("main", "prep", "aux"):
            memo[id(node)] = node.next
        elif node.args:
            memo[id(node)] = Expr(node.op, tuple(memo[id(a)] for a in node.args))
        else:
            memo[id(node)] = node
    return memo[id(e)]


def slack_bits(cols) -> list:
    """The STOP row's cycle-limit limbs: the first SLACK_BITS of v[0..17], o[0..16]
    (``cols`` maps a group name to its columns: AIR columns, or trace column indices)."""
    return (list(cols["v"]) + list(cols["o"]))[:SLACK_BITS]


def _sum(xs):
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    return total


# --------------------------------------------------------------------------- CPU

def build_cpu(log_blowup: int = DEFAULT_LOG_BLOWUP) -> Air:
    b = AirBuilder("cpu", public=PV_NAMES)
    col = CPU_LAYOUT.declare(b)
    s = {k: col[f"is_{isa.OPCODE_NAMES[k].lower()}"] for k in range(1, isa.NUM_OPCODES)}
    clk, pc, a, bb, c = col["clk"], col["pc"], col["a"], col["b"], col["c"]
    v, o, hin, hout = col["v"], col["o"], col["hin"], col["hout"]
    tx, jin, jout = col["tx"], col["jin"], col["jout"]
    addr_b, addr_c, inv, nz, d = col["addr_b"], col["addr_c"], col["inv"], col["nz"], col["d"]
    pv = {name: b.pv(name) for name in PV_NAMES}
    pv_init = [pv[f"initial_digest[{i}]"] for i in range(8)]
    pv_final = [pv[f"final_digest[{i}]"] for i in range(8)]
    pv_in = [pv[f"input_digest[{i}]"] for i in range(8)]
    pv_out = [pv[f"output_digest[{i}]"] for i in range(8)]
    msize = pv["memory_size"]

    def any_of(ops):
        return _sum([s[k] for k in sorted(ops)])

    is_real = any_of(range(1, isa.NUM_OPCODES))
    opcode = _sum([k * s[k] for k in range(1, isa.NUM_OPCODES)])
    ai, af, disp = s[isa.ABSORB_INIT], s[isa.ABSORB_FINAL], s[isa.DISPATCH]
    rd, wr = s[isa.READ], s[isa.WRITE]

    # -- decoding: one-hot selectors, padding only at the end, the row fetched from the ROM
    for k in range(1, isa.NUM_OPCODES):
        b.assert_bool(s[k], name=f"is_{isa.OPCODE_NAMES[k].lower()}_bool")
    b.assert_bool(is_real, name="one_hot")
    b.when_transition((1 - is_real) * nxt(is_real), name="padding_at_end")
    b.send("program", [pc, opcode, a, bb, c], multiplicity=is_real)

    # -- start: pc 0 (the prologue), clock 0, empty accumulators, transaction 0
    b.when_first_row(ai - 1, name="starts_with_prologue")
    b.when_first_row(pc, name="first_pc")
    b.when_first_row(clk, name="first_clk")
    b.when_first_row(tx, name="first_tx")
    # hin is the state sponge's capacity in the prologue: the statement digest starts
    # from (M, 0, ..., 0) (lane 8 = the length, M cells; vm.poseidon2.statement_digest)
    for i in range(8):
        b.when_first_row(hin[i] - (msize if i == 0 else 0), name=f"first_hin[{i}]")
        b.when_first_row(hout[i], name=f"first_hout[{i}]")
    b.when_transition(clk.next - clk - 1, name="clk_step")

    # -- end: the last real row is STOP, reached only from the epilogue
    stop = s[isa.STOP]
    b.when_transition((is_real - nxt(is_real)) * (1 - stop), name="ends_with_stop")
    b.when_last_row(is_real * (1 - stop), name="ends_with_stop_last")
    b.when_transition(stop * nxt(is_real), name="stop_is_last")
    b.when_transition(stop.next * (1 - af), name="stop_after_epilogue")
    # the cycle limit (the interpreter runs the instruction of cycle clk only if clk <
    # max_cycles): on the STOP row, max_cycles - 1 - clk = sum 2^i bit_i with 21 boolean
    # limbs bit_i (columns STOP leaves free), so the slack is an integer in [0, 2^21).
    # clk is the row index (< 2^21: the block verifier's height ceiling; < 2^24 for any
    # protocol table would do) and max_cycles is in [1, 2^21] (checked by the verifier),
    # so max_cycles - 1 - clk lies in (-2^24, 2^21) as an integer, and a negative one is
    # p - x mod p with x < 2^24, never below 2^21: so clk <= max_cycles - 1, i.e. cycles
    # <= max_cycles.  (Boolean limbs, not range16: the check costs no bus traffic.)
    bits = slack_bits(col)
    for i, bit in enumerate(bits):
        b.assert_zero(stop * bit * (1 - bit), name=f"cycle_limit_bit[{i}]")
    b.assert_zero(stop * (pv["max_cycles"] - 1 - clk - _sum([(1 << i) * bit for i, bit in enumerate(bits)])),
                  name="cycle_limit")

    # -- control flow
    seq = any_of({isa.SET, isa.ADD, isa.SUB, isa.MUL, isa.ADDI, isa.LT, isa.LOAD, isa.STORE,
                  isa.HASH, isa.READ, isa.WRITE, isa.ABSORB_INIT, isa.ABSORB_FINAL})
    b.when_transition(seq * (pc.next - pc - 1), name="pc_step")
    b.when_transition(s[isa.JMP] * (pc.next - c), name="jmp")
    b.when_transition(s[isa.BNZ] * (pc.next - pc - 1 - nz * (c - pc - 1)), name="bnz_target")
    b.assert_zero(s[isa.BNZ] * (nz - v[0] * inv), name="bnz_nz")
    b.assert_zero(s[isa.BNZ] * v[0] * (1 - nz), name="bnz_zero")
    dispatch_pc = pv["memory_size"] * pow(8, isa.P - 2, isa.P)      # = M / 8
    b.when_transition(s[isa.HALT] * (pc.next - dispatch_pc), name="halt_to_dispatch")
    b.when_transition(disp * (pc.next - v[0]), name="dispatch_target")

    # -- arithmetic, comparison, loads and stores (v[0] = m[a], v[8] = m[addr_b], v[16] written)
    x, y, z = v[0], v[8], v[16]
    b.assert_zero(s[isa.SET] * (z - bb), name="set")
    b.assert_zero(s[isa.ADD] * (z - x - y), name="add")
    b.assert_zero(s[isa.SUB] * (z - x + y), name="sub")
    b.assert_zero(s[isa.MUL] * (z - x * y), name="mul")
    b.assert_zero(s[isa.ADDI] * (z - x - bb), name="addi")
    b.assert_zero(s[isa.LT] * z * (1 - z), name="lt_bool")
    # d = y - x - 1 if x < y else x - y; x, y and d are range-checked below
    b.assert_zero(s[isa.LT] * (d - (x - y + z * (2 * y - 2 * x - 1))), name="lt_diff")
    b.assert_zero(s[isa.LOAD] * (addr_b - x), name="load_addr")
    b.assert_zero(s[isa.LOAD] * (z - y), name="load_value")
    b.assert_zero(s[isa.STORE] * (addr_c - x), name="store_addr")
    b.assert_zero(s[isa.STORE] * (z - y), name="store_value")
    b.assert_zero(any_of(isa.READS_B - {isa.LOAD}) * (addr_b - bb), name="addr_b")
    b.assert_zero(any_of(isa.WRITES_C - {isa.STORE}) * (addr_c - c), name="addr_c")
    b.assert_zero(s[isa.HASH] * (z - o[0]), name="hash_out")
    b.assert_zero(rd * (z - x), name="read_value")

    # -- I/O events: (value, tag, tx, position, 0, 0, 0, 0) in v[0..8]
    ev = rd + wr + disp
    b.assert_zero(ev * v[1] - (isa.TAG_INPUT * rd + isa.TAG_OUTPUT * wr + isa.TAG_DISPATCH * disp),
                  name="event_tag")
    b.assert_zero(ev * (v[2] - tx), name="event_tx")
    b.assert_zero(rd * (v[3] - jin) + wr * (v[3] - jout) + disp * v[3], name="event_position")
    for i in range(4, 8):
        b.assert_zero(ev * v[i], name=f"event_pad[{i}]")
    # lanes 8..15 of a chained call are the accumulator (capacity for ABSORB_*)
    uses_hin = rd + disp + ai + af
    for i in range(8):
        b.assert_zero(uses_hin * (v[8 + i] - hin[i]) + wr * (v[8 + i] - hout[i]),
                      name=f"chain_in[{i}]")

    # -- accumulators (transition): see docs/vm.md "Chains and sponges"
    keep = 1 - rd - disp - ai - af
    for i in range(8):
        # DISPATCH into the epilogue restarts hin at the sponge's initial capacity (M, 0..)
        restart = disp * af.next * msize if i == 0 else 0
        b.when_transition(hin[i].next - keep * hin[i] - rd * o[i] - disp * (1 - af.next) * o[i]
                          - ai * ai.next * o[8 + i] - af * af.next * o[8 + i] - restart,
                          name=f"hin_step[{i}]")
        b.when_transition(hout[i].next - hout[i] - wr * (o[i] - hout[i]), name=f"hout_step[{i}]")
        b.when_transition(ai * (1 - ai.next) * (o[i] - pv_init[i]), name=f"initial_digest[{i}]")
        b.when_transition(af * (1 - af.next) * (o[i] - pv_final[i]), name=f"final_digest[{i}]")
        b.when_transition(disp * af.next * (o[i] - pv_in[i]), name=f"input_digest[{i}]")
        b.when_transition(disp * af.next * (hout[i] - pv_out[i]), name=f"output_digest[{i}]")
    b.when_transition(tx.next - tx - s[isa.HALT], name="tx_step")
    b.when_transition(jin.next - (1 - disp) * (jin + rd), name="jin_step")
    b.when_transition(jout.next - (1 - disp) * (jout + wr), name="jout_step")

    # -- memory accesses: slot A reads a+i at 3clk, B reads addr_b+i at 3clk+1, C writes at 3clk+2
    wide_a = s[isa.HASH] + ai + af
    t = 3 * clk
    for i in range(8):
        m = any_of(isa.READS_A) if i == 0 else wide_a
        b.send("memory", [a + i, t, v[i], 0], multiplicity=m)
    for i in range(8):
        m = any_of(isa.READS_B) if i == 0 else s[isa.HASH]
        b.send("memory", [addr_b + i, t + 1, v[8 + i], 0], multiplicity=m)
    for i in range(8):
        m = any_of(isa.WRITES_C) if i == 0 else s[isa.HASH]
        b.send("memory", [addr_c + i, t + 2, v[16] if i == 0 else o[i], 1], multiplicity=m)

    # -- range checks for LT (16-bit operands and difference)
    lt = s[isa.LT]
    b.send("range16", [x], multiplicity=lt)
    b.send("range16", [y], multiplicity=lt)
    b.send("range16", [d], multiplicity=lt)

    # -- one POSEIDON2 permutation per hashing row
    b.send("poseidon2", list(v[:16]) + list(o), multiplicity=any_of(isa.HASH_CALLS))
    return b.build(log_blowup=log_blowup)


# --------------------------------------------------------------------------- PROGRAM

def program_preprocessed(rom_rows: np.ndarray) -> np.ndarray:
    """uint32[n, 5] of (pc, opcode, a, b, c), n = the ROM length rounded up to a power of
    two (>= 2); padding rows are INVALID (opcode 0)."""
    n_rom = int(rom_rows.shape[0])
    n = max(2, 1 << (n_rom - 1).bit_length())
    prep = np.zeros((n, 5), dtype=np.uint32)
    prep[:, 0] = np.arange(n, dtype=np.uint32)
    prep[:n_rom, 1:] = np.asarray(rom_rows, dtype=np.int64) % isa.P
    return prep


def build_program(rom_rows: np.ndarray, log_blowup: int = DEFAULT_LOG_BLOWUP) -> Air:
    b = AirBuilder("program")
    pc, op, a, bb, c = (b.prep(n) for n in ("pc", "opcode", "a", "b", "c"))
    mult = b.main("mult")
    b.receive("program", [pc, op, a, bb, c], multiplicity=mult)
    return b.build(preprocessed=program_preprocessed(rom_rows), log_blowup=log_blowup)


# --------------------------------------------------------------------------- MEMORY

def memory_layout(k: int = 1) -> Layout:
    """MEMORY with k accesses per row: slot j holds MEMORY_LAYOUT's groups (named
    ``group@j``) in columns [7j, 7j + 7), so the k = 1 trace of n * k rows reshaped to n
    rows is the k-slot trace (access v of the sorted log is row v // k, slot v % k)."""
    if k not in MEMORY_SLOTS:
        raise ValueError(f"MEMORY takes k in {MEMORY_SLOTS} accesses per row, not {k!r}")
    if k == 1:
        return MEMORY_LAYOUT
    return Layout([(slot_group(g, j, k), c) for j in range(k) for g, c in MEMORY_LAYOUT.groups])


def build_memory(k: int = 1, log_blowup: int = DEFAULT_LOG_BLOWUP) -> Air:
    """MEMORY with k accesses per row (k in MEMORY_SLOTS).  The accesses, sorted by
    (address, time), fill the slots row by row: access v is row v // k, slot v % k.  Every
    constraint between consecutive accesses (the "pair" constraints below) is applied to
    each consecutive pair of that sequence: slot j -> slot j + 1 of one row (every row,
    no next-row reads) and the last slot of a row -> slot 0 of the next row (transition).
    So a k-slot trace satisfies them iff the k = 1 trace of its n * k accesses does, and
    the argument of docs/vm.md carries over with n * k in place of n (at most 16 * 2^24 =
    2^28 accesses, still far below p).  k = 1 is the one-access-per-row AIR, names and
    order unchanged."""
    b = AirBuilder("memory", public=["memory_size"])
    cols = memory_layout(k).declare(b)
    S = [{g: cols[slot_group(g, j, k)] for g, _ in MEMORY_LAYOUT.groups} for j in range(k)]
    msize = b.pv("memory_size")

    def tag(j):
        return "" if k == 1 else f"@{j}"

    for j, s in enumerate(S):
        b.assert_bool(s["is_real"], name=f"is_real_bool{tag(j)}")
        b.assert_bool(s["is_write"], name=f"is_write_bool{tag(j)}")
    b.when_first_row(S[0]["is_real"] - 1, name="first_real")
    b.when_first_row(S[0]["addr"], name="first_addr")

    def pair(prev, cur, add, t):
        # Consecutive addresses (docs/vm.md "MEMORY"): the prologue reads every cell
        # 0..M-1, so in the sorted log each address step d = addr' - addr is 0 or 1.  With
        # access 0 at address 0, the address of access v is then the integer count of
        # 1-steps before it, <= v < 2^28 < p: no step can wrap past p, and no range check
        # on the address is needed.  d = 0 is "the same address"; there the time gap
        # (time' - time - 1) is lo + 2^16 hi with lo, hi, 2^8 hi < 2^16, i.e. in [0, 2^24);
        # times are < 3 * 2^24 + 3 < 2^26, so a step backwards would be p - (x < 2^26) >=
        # 2^24 and times strictly increase.  When d = 1 the gap limbs must be 0.
        d = cur["addr"] - prev["addr"]
        add((1 - prev["is_real"]) * cur["is_real"], f"padding_at_end{t}")
        add(d * (1 - d), f"addr_step{t}")
        add(cur["is_real"] * (cur["gap_lo"] + RANGE_SIZE * cur["gap_hi"]
                              - (1 - d) * (cur["time"] - prev["time"] - 1)), f"sorted_gap{t}")
        # read-after-write: a read returns the value of the previous access to its address
        add((1 - d) * (1 - cur["is_write"]) * (cur["value"] - prev["value"]), f"read_consistency{t}")
        # the last real access holds the highest address, M - 1: with the steps above, the
        # real addresses are exactly 0, 1, ..., M - 1 (each at least once), non-decreasing
        add((prev["is_real"] - cur["is_real"]) * (prev["addr"] - msize + 1), f"last_address{t}")

    within = lambda e, name: b.assert_zero(e, name=name)           # noqa: E731
    across = lambda e, name: b.when_transition(e, name=name)       # noqa: E731
    for j in range(k - 1):
        pair(S[j], S[j + 1], within, f"@{j}")
    pair(S[k - 1], {g: e.next for g, e in S[0].items()}, across, tag(k - 1))
    b.when_last_row(S[k - 1]["is_real"] * (S[k - 1]["addr"] - msize + 1), name="last_address_last")
    for s in S:
        b.receive("memory", [s["addr"], s["time"], s["value"], s["is_write"]], multiplicity=s["is_real"])
        b.send("range16", [s["gap_lo"]], multiplicity=s["is_real"])
        b.send("range16", [s["gap_hi"]], multiplicity=s["is_real"])
        b.send("range16", [s["gap_hi"] * (1 << 8)], multiplicity=s["is_real"])
    return b.build(log_blowup=log_blowup)


# --------------------------------------------------------------------------- RANGE

def build_range(log_blowup: int = DEFAULT_LOG_BLOWUP) -> Air:
    b = AirBuilder("range")
    value = b.prep("value")
    mult = b.main("mult")
    b.receive("range16", [value], multiplicity=mult)
    prep = np.arange(RANGE_SIZE, dtype=np.uint32).reshape(RANGE_SIZE, 1)
    return b.build(preprocessed=prep, log_blowup=log_blowup)


# --------------------------------------------------------------------------- POSEIDON2

def build_poseidon2(k: int = 1, log_blowup: int = DEFAULT_LOG_BLOWUP) -> Air:
    """POSEIDON2 with k permutations per row (k in P2_SLOTS): each slot is the whole
    permutation in columns, with its own ``mult`` and its own receive on ``poseidon2``.
    Rows carry no transition constraint, so the slots are independent; k = 1 is the
    one-permutation-per-row AIR, names and layout unchanged."""
    air = _poseidon2_air("poseidon2", k, constraints=True, receive=True, log_blowup=log_blowup)
    # The device computes this AIR's quotient from two smaller generated kernels (kernels/
    # constraint_device.py quotient_device): one slot's permutation constraints, launched
    # once per slot on that slot's columns (the same kernel for every k), and the LogUp
    # constraints alone; the alpha powers line up because the slots' constraints come in
    # slot order, each slot's in the one slot's order, then LogUp's.
    # Only the device needs the parts: ``air.device_split()`` builds them on first call
    # (the verifier and the host prover never do).
    air.device_split = functools.cache(functools.partial(_poseidon2_split, k, air.logup_target))
    return air


def _poseidon2_split(k: int, logup_target: int) -> tuple:
    """(slot AIR, k, slot width, LogUp-only AIR) of POSEIDON2 with k slots."""
    logup = _poseidon2_air("poseidon2_logup", k, constraints=False, receive=True,
                           logup_degree=logup_target)
    return _poseidon2_slot_air(), k, P2_LAYOUT.width, logup


@functools.cache
def _poseidon2_slot_air() -> Air:
    """One permutation's constraints, no receive: the slot kernel every k shares."""
    return _poseidon2_air("poseidon2_slot", 1, constraints=True, receive=False)


def _poseidon2_air(name: str, k: int, constraints: bool, receive: bool,
                   logup_degree: int | None = None, log_blowup: int | None = None) -> Air:
    b = AirBuilder(name)
    cols = p2_layout(k).declare(b)
    for j in range(k):
        col = {g: cols[slot_group(g, j, k)] for g, _ in P2_LAYOUT.groups}
        _poseidon2_slot(b, col, "" if k == 1 else f"@{j}", constraints, receive)
    return b.build(logup_degree=logup_degree, log_blowup=log_blowup)


def _poseidon2_slot(b: AirBuilder, col: dict, sfx: str, constraints: bool = True,
                    receive: bool = True) -> None:
    """One permutation's constraints and receive on the columns ``col`` (P2_LAYOUT's
    group names); ``sfx`` tags the constraint names of a slot."""
    state = external_linear(col["in"])

    def sbox(x, cube, out, name):
        if constraints:
            b.assert_zero(cube - x * x * x, name=f"{name}_cube{sfx}")
            b.assert_zero(out - cube * cube * x, name=f"{name}_sbox{sfx}")

    for r in range(2 * N_FULL_HALF):
        if r == N_FULL_HALF:
            for k in range(N_PARTIAL):
                x0 = state[0] + int(RC_PARTIAL[k])
                sbox(x0, col["pcube"][k], col["psbox"][k], f"partial{k}")
                state = internal_linear([col["psbox"][k]] + state[1:])
        for i in range(WIDTH):
            sbox(state[i] + int(RC_FULL[r][i]), col[f"cube{r}"][i], col[f"sbox{r}"][i],
                 f"full{r}[{i}]")
        state = external_linear(col[f"sbox{r}"])
    if receive:
        b.receive("poseidon2", list(col["in"]) + state, multiplicity=col["mult"])


# --------------------------------------------------------------------------- all tables

# Tables with slots: name -> (menu of k, main layout of k slots).  Every other table has
# k = 1; a slotted table's builder takes k.
SLOTTED = {"memory": (MEMORY_SLOTS, memory_layout), "poseidon2": (P2_SLOTS, p2_layout)}
_BUILDERS = {"cpu": build_cpu, "memory": build_memory, "range": build_range,
             "poseidon2": build_poseidon2}
_CACHE: dict = {}


def slot_menu(table: str) -> tuple:
    """The k a table accepts, ascending ((1,) for a table without slots)."""
    return tuple(sorted(SLOTTED[table][0])) if table in SLOTTED else (1,)


def check_log_blowup(log_blowup) -> int:
    """``log_blowup`` as an int in [1, 8] (verifier/proof_format.py Params' range);
    ValueError otherwise."""
    if isinstance(log_blowup, bool) or not isinstance(log_blowup, (int, np.integer)) \
            or not 1 <= int(log_blowup) <= 8:
        raise ValueError(f"log_blowup must be an int in [1, 8], got {log_blowup!r}")
    return int(log_blowup)


def table_air(table: str, k: int = 1, log_blowup: int = DEFAULT_LOG_BLOWUP) -> Air:
    """The AIR of a block-independent table (all but PROGRAM) with k slots for proofs at
    ``log_blowup``, built once per (table, k, LogUp degree cap): the AIR depends on the
    blowup only through air.builder.logup_degree_cap."""
    if table not in _BUILDERS:
        raise ValueError(f"no block-independent table {table!r} (tables: {', '.join(TABLES)})")
    if k not in slot_menu(table):
        raise ValueError(f"{table}: k = {k!r} slots is not in its menu {slot_menu(table)}")
    log_blowup = check_log_blowup(log_blowup)
    key = (table, k, logup_degree_cap(log_blowup))
    if key not in _CACHE:
        with gc_paused():           # half the build time otherwise (air.builder.gc_paused)
            _CACHE[key] = (_BUILDERS[table](k, log_blowup) if table in SLOTTED
                           else _BUILDERS[table](log_blowup))
    return _CACHE[key]


def check_slots(slots) -> dict:
    """``slots`` (None, or a mapping table -> k) as a dict with every slotted table;
    ValueError for an unknown or unslotted table or a k outside its menu."""
    out = {name: 1 for name in SLOTTED}
    for name, k in dict(slots or {}).items():
        if name not in TABLES:
            raise ValueError(f"slots: unknown table {name!r} (tables: {', '.join(TABLES)})")
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or int(k) not in slot_menu(name):
            raise ValueError(f"slots: {name} takes k in {slot_menu(name)}, not {k!r}")
        out[name] = int(k)
    return out


def slots_from_widths(widths) -> dict:
    """The slots of a block's tables from their main widths (table order): a slotted
    table's width must be that of one k in its menu.  ValueError (naming the table and
    the width) otherwise; other tables' widths are the verifier's shape check's to judge."""
    widths = list(widths)
    if len(widths) != len(TABLES):
        raise ValueError(f"expected {len(TABLES)} tables ({', '.join(TABLES)}), got {len(widths)}")
    out = {}
    for name, w in zip(TABLES, widths):
        if name not in SLOTTED:
            continue
        layout = SLOTTED[name][1]
        by_width = {layout(k).width: k for k in slot_menu(name)}
        if w not in by_width:
            raise ValueError(f"{name}: main width {w} is not one of "
                             + ", ".join(f"{wk} (k = {k})" for wk, k in by_width.items()))
        out[name] = by_width[w]
    return out


def block_airs(rom_rows: np.ndarray, slots=None,
               log_blowup: int = DEFAULT_LOG_BLOWUP) -> list[Air]:
    """The five AIRs of a block proof at ``log_blowup`` (the proof's parameter: the LogUp
    batching's degree depends on it, air/builder.py choose_logup_degree), in table order
    (CPU, PROGRAM, MEMORY, RANGE, POSEIDON2).  ``slots`` maps a table to its k (default 1;
    see SLOTTED).  Only PROGRAM depends on the block (its ROM); the others are built once
    per (table, k, LogUp degree cap)."""
    slots = check_slots(slots)
    log_blowup = check_log_blowup(log_blowup)
    with gc_paused():
        return [build_program(rom_rows, log_blowup) if name == "program"
                else table_air(name, slots.get(name, 1), log_blowup) for name in TABLES]
