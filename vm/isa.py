"""The instruction set of the Steadfast reference VM (documented in docs/vm.md).

Machine model: a flat memory of ``memory_size`` field elements (BabyBear, canonical ints in
[0, p)), no registers, a program counter ``pc`` into the ROM, and per transaction an input
stream and an output stream.  Every instruction has the three operand fields ``a``, ``b``,
``c`` of the ROM row (unused fields are 0):

=======  ===========  ============================================  ========================
opcode   JSON form    effect                                        memory slots (A, B, C)
=======  ===========  ============================================  ========================
1 SET    [SET c imm]  m[c] = imm                                    -, -, W c
2 ADD    [ADD c a b]  m[c] = m[a] + m[b]                            R a, R b, W c
3 SUB    [SUB c a b]  m[c] = m[a] - m[b]                            R a, R b, W c
4 MUL    [MUL c a b]  m[c] = m[a] * m[b]                            R a, R b, W c
5 ADDI   [ADDI c a i] m[c] = m[a] + imm                             R a, -, W c
6 LT     [LT c a b]   m[c] = 1 if m[a] < m[b] else 0 (16-bit ops)   R a, R b, W c
7 LOAD   [LOAD c a]   m[c] = m[m[a]]                                R a, R m[a], W c
8 STORE  [STORE a b]  m[m[a]] = m[b]                                R a, R b, W m[a]
9 JMP    [JMP t]      pc = t                                        -
10 BNZ   [BNZ a t]    pc = t if m[a] != 0 else pc + 1               R a
11 HASH  [HASH c a b] m[c..c+8] = compress(m[a..a+8], m[b..b+8])    R a+i, R b+i, W c+i
12 READ  [READ c]     m[c] = next input of the transaction          -, -, W c
13 WRITE [WRITE a]    append m[a] to the transaction's outputs      R a
14 HALT  [HALT]       end the transaction                           -
=======  ===========  ============================================  ========================

System instructions (placed by the ROM layout, never written in a block):
15 ABSORB_INIT / 16 ABSORB_FINAL (``a`` = 8k: absorb m[8k..8k+8] into the state sponge),
17 DISPATCH (start the next transaction, or the epilogue), 18 STOP (end of the block).
Opcode 0 is INVALID: it marks ROM rows no execution may reach (a program's end guard, an
instruction whose opcode or operands are invalid, ROM padding); no CPU row can match it.

Jump targets are program-relative in JSON and absolute in the ROM.
"""
from __future__ import annotations

from dataclasses import dataclass

P = 2013265921
LT_BITS = 16                     # LT compares operands < 2^16

INVALID, SET, ADD, SUB, MUL, ADDI, LT, LOAD, STORE, JMP, BNZ, HASH, READ, WRITE, HALT, \
    ABSORB_INIT, ABSORB_FINAL, DISPATCH, STOP = range(19)
NUM_OPCODES = 19

# I/O event tags (lane 1 of an event; see docs/vm.md "I/O chains").
TAG_DISPATCH = 1
TAG_INPUT = 2
TAG_OUTPUT = 3


@dataclass(frozen=True)
class OpSpec:
    """How one user instruction is written in JSON and placed in the ROM row."""
    name: str
    opcode: int
    operands: tuple          # JSON operand kinds in order: "addr", "imm", "target"
    fields: tuple            # ROM field ("a", "b", "c") receiving each JSON operand
    hash_width: int = 1      # addresses used per memory operand (8 for HASH)


USER_OPS = {
    "SET": OpSpec("SET", SET, ("addr", "imm"), ("c", "b")),
    "ADD": OpSpec("ADD", ADD, ("addr", "addr", "addr"), ("c", "a", "b")),
    "SUB": OpSpec("SUB", SUB, ("addr", "addr", "addr"), ("c", "a", "b")),
    "MUL": OpSpec("MUL", MUL, ("addr", "addr", "addr"), ("c", "a", "b")),
    "ADDI": OpSpec("ADDI", ADDI, ("addr", "addr", "imm"), ("c", "a", "b")),
    "LT": OpSpec("LT", LT, ("addr", "addr", "addr"), ("c", "a", "b")),
    "LOAD": OpSpec("LOAD", LOAD, ("addr", "addr"), ("c", "a")),
    "STORE": OpSpec("STORE", STORE, ("addr", "addr"), ("a", "b")),
    "JMP": OpSpec("JMP", JMP, ("target",), ("c",)),
    "BNZ": OpSpec("BNZ", BNZ, ("addr", "target"), ("a", "c")),
    "HASH": OpSpec("HASH", HASH, ("addr", "addr", "addr"), ("c", "a", "b"), hash_width=8),
    "READ": OpSpec("READ", READ, ("addr",), ("c",)),
    "WRITE": OpSpec("WRITE", WRITE, ("addr",), ("a",)),
    "HALT": OpSpec("HALT", HALT, (), ()),
}

OPCODE_NAMES = {INVALID: "INVALID", ABSORB_INIT: "ABSORB_INIT", ABSORB_FINAL: "ABSORB_FINAL",
                DISPATCH: "DISPATCH", STOP: "STOP"}
OPCODE_NAMES.update({spec.opcode: name for name, spec in USER_OPS.items()})

# Which memory slots an opcode uses (lane 0; HASH and ABSORB_* also use lanes 1..7).
READS_A = frozenset({ADD, SUB, MUL, ADDI, LT, LOAD, STORE, BNZ, HASH, WRITE, ABSORB_INIT,
                     ABSORB_FINAL})
READS_B = frozenset({ADD, SUB, MUL, LT, LOAD, STORE, HASH})
WRITES_C = frozenset({SET, ADD, SUB, MUL, ADDI, LT, LOAD, STORE, HASH, READ})
# Which opcodes call the POSEIDON2 table (one permutation per such row).
HASH_CALLS = frozenset({HASH, ABSORB_INIT, ABSORB_FINAL, READ, WRITE, DISPATCH})
