"""Sample programs and block builders (used by examples/, bench/make_block.py and tests).

Programs are written as lists of JSON instructions; :func:`assemble` only resolves
``("label",)`` markers and label names used as jump targets into program-relative
indices -- the block format itself has no assembler.

Memory conventions of the samples (addresses):

* 0..7    scratch "registers" r0..r7 (loop counter, state, accumulator, constants)
* 8..15   hash buffer A (8 cells), 16..23 hash buffer B
* 24..31  transfer scratch
* 32..    an accounts/table region (``TABLE_BASE``..``TABLE_BASE + table_size``)
"""
from __future__ import annotations

import random
from typing import Sequence

from . import isa
from .block import FORMAT, VERSION, Block, parse_block
from .interpreter import execute

TABLE_BASE = 32
P = isa.P


def assemble(lines: Sequence) -> list:
    """Resolve labels: a 1-tuple ``("name",)`` marks a position; a string operand of JMP
    or BNZ names such a position."""
    labels, code = {}, []
    for ln in lines:
        if isinstance(ln, tuple):
            labels[ln[0]] = len(code)
        else:
            code.append(list(ln))
    for ins in code:
        if ins[0] in ("JMP", "BNZ") and isinstance(ins[-1], str):
            ins[-1] = labels[ins[-1]]
    return code


def mix_program(hashes_per_iter: int, table_size: int, base: int = TABLE_BASE) -> list:
    """Inputs (n >= 1, seed); per iteration: x = x*k + 7, acc += x, table[ptr] += x with a
    wrapping pointer (LT against the table end), ``hashes_per_iter`` HASHes of buffer A
    with buffer B; outputs (acc, hash lane 0).  acc and ptr persist in memory across
    transactions (the shared state)."""
    end = base + table_size
    body = [
        ["READ", 0], ["READ", 1], ["SET", 3, 1000003], ["SET", 7, end],
        ("top",),
        ["MUL", 1, 1, 3], ["ADDI", 1, 1, 7], ["ADD", 2, 2, 1],
        ["LOAD", 5, 4], ["ADD", 5, 5, 1], ["STORE", 4, 5], ["ADDI", 4, 4, 1],
        ["LT", 6, 4, 7], ["BNZ", 6, "nowrap"], ["SET", 4, base],
        ("nowrap",),
    ]
    body += [["HASH", 8, 8, 16]] * hashes_per_iter
    body += [["ADDI", 0, 0, -1], ["BNZ", 0, "top"], ["WRITE", 2], ["WRITE", 8], ["HALT"]]
    return assemble(body)


MIX_SETUP = 4          # READ, READ, SET, SET
MIX_BODY = 11          # per iteration without wrap and without hashes
MIX_TAIL = 3           # WRITE, WRITE, HALT


def transfer_program() -> list:
    """Inputs (from, to, amount): move ``amount`` from account ``from`` to ``to`` (accounts
    are cells TABLE_BASE + i) if the balance suffices (16-bit LT); outputs (ok, new
    balance of from, new balance of to)."""
    return assemble([
        ["READ", 24], ["READ", 25], ["READ", 26],
        ["ADDI", 24, 24, TABLE_BASE], ["ADDI", 25, 25, TABLE_BASE],
        ["LOAD", 27, 24],                 # balance of from
        ["LT", 28, 27, 26],               # balance < amount ?
        ["BNZ", 28, "fail"],
        ["SUB", 27, 27, 26], ["STORE", 24, 27],
        ["LOAD", 29, 25], ["ADD", 29, 29, 26], ["STORE", 25, 29],
        ["SET", 30, 1], ["JMP", "out"],
        ("fail",), ["SET", 30, 0],
        ("out",),
        ["LOAD", 27, 24], ["LOAD", 29, 25],
        ["WRITE", 30], ["WRITE", 27], ["WRITE", 29], ["HALT"],
    ])


def copy_program() -> list:
    """Inputs (src, dst, n): copy n cells with LOAD/STORE (memory-heavy); output the last
    value copied."""
    return assemble([
        ["READ", 0], ["READ", 1], ["READ", 2], ["SET", 6, 0],
        ("loop",),
        ["LOAD", 6, 0], ["STORE", 1, 6], ["ADDI", 0, 0, 1], ["ADDI", 1, 1, 1],
        ["ADDI", 2, 2, -1], ["BNZ", 2, "loop"],
        ["WRITE", 6], ["HALT"],
    ])


def make_block(programs: list, txs: list, memory_size: int, initial_memory=(),
               max_cycles: int | None = None) -> Block:
    """Build a block from (name, code) programs and (program, inputs) transactions,
    executing it once to fill in the claimed outputs."""
    obj = {"format": FORMAT, "version": VERSION, "memory_size": memory_size,
           "initial_memory": [{"address": a, "values": list(v)} for a, v in initial_memory],
           "programs": [{"name": n, "code": c} for n, c in programs],
           "transactions": [{"program": p, "inputs": list(i), "outputs": []} for p, i in txs]}
    if max_cycles is not None:
        obj["max_cycles"] = max_cycles
    rec = execute(parse_block(obj))
    for t, out in zip(obj["transactions"], rec.outputs):
        t["outputs"] = list(out)
    return parse_block(obj)


def mix_cycles(n_iters: int, hashes: int, table_size: int, ptr0: int = 0) -> int:
    """Exact cycles of one mix transaction (DISPATCH included) of n_iters iterations,
    starting with the table pointer at offset ptr0."""
    wraps = (ptr0 + n_iters) // table_size
    return 1 + MIX_SETUP + n_iters * (MIX_BODY + hashes) + wraps + MIX_TAIL


def sized_block(log_cycles: int, hash_share: float, seed: int = 0, memory_size: int = 1024,
                table_size: int = 256, n_tx: int = 8) -> Block:
    """A block of at most 2^log_cycles cycles (close to it) whose share of HASH instructions
    among all cycles is about ``hash_share`` (0 <= share < 1)."""
    if not 0 <= hash_share < 1:
        raise ValueError("hash_share must be in [0, 1)")
    table_size = min(table_size, memory_size - TABLE_BASE)
    if table_size < 1:
        raise ValueError(f"memory_size must exceed {TABLE_BASE}")
    rng = random.Random(seed)
    target = 1 << log_cycles
    fixed = 2 * (memory_size // 8) + 2              # prologue, final DISPATCH, epilogue, STOP
    per_tx = mix_cycles(1, 0, table_size) - MIX_BODY
    budget = target - fixed - n_tx * per_tx
    if budget < n_tx * (MIX_BODY + 1):
        raise ValueError(f"2^{log_cycles} cycles cannot hold {n_tx} transactions with "
                         f"memory_size {memory_size}")
    # HASH rows / all rows = share  =>  h / (BODY + h) = share * target / budget
    s = min(hash_share * target / budget, 0.97)
    h = round(s * MIX_BODY / (1 - s))
    iters_total = max(n_tx, budget // (MIX_BODY + h + 1))
    # distribute iterations, then fix up the count exactly with the cycle formula
    cuts = sorted(rng.sample(range(1, iters_total), n_tx - 1)) if n_tx > 1 else []
    counts = [b - a for a, b in zip([0] + cuts, cuts + [iters_total])]
    counts = [max(1, c) for c in counts]

    def total(cs):
        ptr, cyc = 0, fixed
        for c in cs:
            cyc += mix_cycles(c, h, table_size, ptr)
            ptr = (ptr + c) % table_size
        return cyc
    while total(counts) < target:
        counts[-1] += 1
    while total(counts) > target and counts[-1] > 1:
        counts[-1] -= 1
    table = [rng.randrange(1 << 16) for _ in range(table_size)]
    init = [(4, [TABLE_BASE]), (8, [rng.randrange(P) for _ in range(16)]), (TABLE_BASE, table)]
    txs = [(0, [c, rng.randrange(P)]) for c in counts]
    return make_block([("mix", mix_program(h, table_size))], txs, memory_size, init)


def example_block() -> Block:
    """examples/block.json: three programs (transfer, mix with one HASH per iteration,
    copy) and six transactions over 256 cells of memory."""
    accounts = [1000, 250, 40, 0, 77, 5000, 12, 300]
    init = [(4, [64]), (8, list(range(1, 17))), (TABLE_BASE, accounts)]
    programs = [("transfer", transfer_program()), ("mix", mix_program(1, 64, base=64)),
                ("copy", copy_program())]
    txs = [(0, [0, 3, 400]), (0, [2, 1, 100]), (1, [20, 12345]), (0, [5, 2, 60]),
           (2, [TABLE_BASE, 160, 8]), (1, [5, 777])]
    return make_block(programs, txs, 256, init)


def dump_block(block: Block) -> str:
    """Pretty JSON with one instruction per line (what examples/ and make_block write)."""
    import json
    obj = block.to_json()
    text = json.dumps(obj, indent=2)
    # collapse each instruction array and each list of numbers onto one line
    import re
    text = re.sub(r"\[\s+((?:\"[A-Z_]+\"|-?\d+)(?:,\s+-?\d+)*)\s+\]",
                  lambda m: "[" + re.sub(r",\s+", ", ", m.group(1)) + "]", text)
    return text + "\n"
