"""What every RV32IM table shares: bus names, address spaces, timestamps, and the gadgets
(AIR fragments) the chips are assembled from (docs/rv32.md "Tables (AIRs)").

Values.  A 32-bit value travels as two 16-bit limbs (lo, hi), each a canonical field
element below 2^16; a chip that needs bytes splits a limb into two bytes checked on the
``pair8`` bus.  Every limb a chip *writes* is range-checked (or is a combination of checked
bytes); limbs *read* from the memory argument are well formed by induction (initial values
come from the statement, every later value was checked when it was written).

Buses (LogUp; arity in brackets):

* ``rv32_exec`` [2] (pc/4, clk): the execution chain.  Every instruction row receives its
  (pcw, clk) and sends (next pcw, clk + 1); REGISTERS sends (entry/4, 0); the exit ECALL
  sends nothing.
* ``rv32_program`` [10] (pcw, op, rd, rs1, rs2, imm_lo, imm_hi, v_lo, v_hi, tgt): a row's
  decoded instruction; PROGRAM receives.
* ``rv32_mem`` [5] (space, addr, lo, hi, ts): the offline memory argument.  An access
  receives (space, addr, old, prev_ts) and sends (space, addr, new, ts), with
  prev_ts < ts checked; boundary tables send the initial (…, 0) and receive the final
  tuple of every address.
* ``rv32_image`` [3] (word address, lo, hi): PROGRAM sends every nonzero image word once;
  MEMORY receives.
* ``rv32_range16`` [1], ``rv32_pair8`` [2], ``rv32_and8`` [3]: BYTES' lookups.
* ``rv32_exit`` [1] (exit code), ``rv32_io`` [3] (stream, position, byte),
  ``rv32_iochain`` [6], ``rv32_p2call`` [3], ``poseidon2`` [32]: the system calls.

Timestamps.  Cycle clk owns ts = 3 clk + 1, 3 clk + 2, 3 clk + 3 (ts 0 is the initial
state).  clk < max_cycles <= 2^24 (abi.MAX_CYCLES_CEILING), so every ts is below
3 * 2^24 + 4 < 2^26 and a gap ts - prev_ts - 1 is checked below 2^26 with two range16
lookups (:func:`ts_check`).
"""
from __future__ import annotations

from ...air import AirBuilder

# ---------------------------------------------------------------- buses
EXEC = "rv32_exec"
PROGRAM = "rv32_program"
MEM = "rv32_mem"
IMAGE = "rv32_image"
RANGE16 = "rv32_range16"
PAIR8 = "rv32_pair8"
AND8 = "rv32_and8"
EXIT = "rv32_exit"
IO = "rv32_io"
IOCHAIN = "rv32_iochain"
P2CALL = "rv32_p2call"
POSEIDON2 = "poseidon2"          # chips/poseidon2.py: one table for every execution

# ---------------------------------------------------------------- address spaces
REG, MEMORY = 0, 1               # the ``space`` field of rv32_mem tuples
SINK = 32                        # writes to x0 go to this register (never read)
CUR_IN, CUR_OUT, CUR_ERR = 33, 34, 35    # fd 0 read position, fd 1 / fd 2 byte counts
NUM_REGS = 36                    # x0..x31, the sink and the three cursors
STREAM_IN, STREAM_OUT = 1, 2     # ``stream`` field of rv32_io tuples

# ---------------------------------------------------------------- limits
TS_GAP_BITS = 26                 # ts - prev_ts - 1 < 2^26
TS_PER_CYCLE = 3
TWO16 = 1 << 16
P = 2013265921

# op ids sent on the program bus: the R-type ids of rv32/isa.py (an I-type op sends its
# R-type op: the chips read the operand as rs2 + imm, one of them zero), plus these:
OP_JUMP = 50                     # LUI, AUIPC, JAL, JALR, FENCE: rd := v, pc := tgt + (rs1 + imm) & ~3
BAD_TARGET = P - 1               # tgt of a branch/JAL whose target is not 4-aligned (no pcw)


def ts_of(clk, j: int):
    """Timestamp j (1, 2 or 3) of cycle clk."""
    return TS_PER_CYCLE * clk + j


def pow2_rows(n: int) -> int:
    """The height of a table of n real rows: a power of two, at least 2."""
    return max(2, 1 << (max(int(n), 1) - 1).bit_length())


class Cols:
    """A chip's column declarations in order: ``c.one("x")`` declares a main column and
    returns its expression; ``c.many("x", 4)`` a group ``x[0..3]``."""

    def __init__(self, b: AirBuilder):
        self.b = b

    def one(self, name: str):
        return self.b.main(name)

    def many(self, name: str, k: int):
        return self.b.main_cols(name, k)


def limbs16(x: int) -> tuple[int, int]:
    return x & 0xFFFF, (x >> 16) & 0xFFFF


# ---------------------------------------------------------------- gadgets

def range16(b: AirBuilder, value, mult) -> None:
    """value in [0, 2^16)."""
    b.send(RANGE16, [value], multiplicity=mult)


def ts_check(b: AirBuilder, name: str, gap, mult) -> None:
    """gap = ts - prev_ts - 1 in [0, 2^26) where mult = 1 (mult boolean, degree <= 1).

    gap = lo + 2^16 h with range16(lo) and range16(2^6 h).  Only 2^16 h matters, and it
    equals 2^10 (2^6 h) in the field: an integer below 2^26 whatever h is, so gap is an
    integer in [0, 2^16 + 2^26).  Both timestamps are below 2^26, so a negative gap would
    be p - x with x <= 2^26, far above that range: prev_ts < ts."""
    lo, h = b.main(f"{name}_dlo"), b.main(f"{name}_dh")
    b.assert_zero(mult * (gap - lo - TWO16 * h), name=f"{name}_ts_gap")
    range16(b, lo, mult)
    range16(b, (1 << (32 - TS_GAP_BITS)) * h, mult)


def access(b: AirBuilder, name: str, space, addr, old, new, ts, mult) -> None:
    """One access of the offline memory argument: the address's previous tuple (old value,
    prev_ts) is consumed and (new value, ts) produced, with prev_ts < ts.  ``old``/``new``
    are (lo, hi) expressions; declares ``{name}_pts`` (and the ts-gap limbs)."""
    pts = b.main(f"{name}_pts")
    b.receive(MEM, [space, addr, old[0], old[1], pts], multiplicity=mult)
    b.send(MEM, [space, addr, new[0], new[1], ts], multiplicity=mult)
    ts_check(b, name, ts - pts - 1, mult)


def read(b: AirBuilder, name: str, space, addr, value, ts, mult) -> None:
    """A read: the value is unchanged (it is the address's current value)."""
    access(b, name, space, addr, value, value, ts, mult)


def write(b: AirBuilder, name: str, space, addr, new, ts, mult) -> tuple:
    """A write of ``new``; the previous value is witnessed in ``{name}_plo/_phi``."""
    old = (b.main(f"{name}_plo"), b.main(f"{name}_phi"))
    access(b, name, space, addr, old, new, ts, mult)
    return old


def step(b: AirBuilder, pcw, clk, next_pcw, mult, next_mult=None) -> None:
    """The execution chain: consume (pcw, clk), produce (next_pcw, clk + 1)."""
    b.receive(EXEC, [pcw, clk], multiplicity=mult)
    b.send(EXEC, [next_pcw, clk + 1], multiplicity=mult if next_mult is None else next_mult)


def fetch(b: AirBuilder, mult, pcw, op, rd=0, rs1=0, rs2=0, imm=(0, 0), v=(0, 0), tgt=0):
    """The row's instruction: (pcw, op, fields) must be a PROGRAM row."""
    b.send(PROGRAM, [pcw, op, rd, rs1, rs2, imm[0], imm[1], v[0], v[1], tgt],
           multiplicity=mult)


def adder(b: AirBuilder, name: str, x, y, z, k0, k1, when=1) -> None:
    """x + y = z + 2^32 k1 on 16-bit limbs (x, y, z pairs of limb expressions; k0 the
    carry between limbs, k0 and k1 boolean columns).  With every limb below 2^16 both
    limb equations are integer identities (no wrap mod p), so they hold exactly."""
    b.assert_bool(k0, name=f"{name}_k0_bool")
    b.assert_bool(k1, name=f"{name}_k1_bool")
    b.assert_zero(when * (x[0] + y[0] - z[0] - TWO16 * k0), name=f"{name}_lo")
    b.assert_zero(when * (x[1] + y[1] + k0 - z[1] - TWO16 * k1), name=f"{name}_hi")


def sum_of(xs):
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    return total


__all__ = [n for n in dir() if not n.startswith("_")]
