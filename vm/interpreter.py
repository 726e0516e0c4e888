"""The reference interpreter: runs a block and records what the tables need.

Execution of a block (docs/vm.md "Block execution"):

1. prologue -- ABSORB_INIT for every 8-cell chunk of memory: the state sponge over the
   initial memory (its lanes 0..7 after the last chunk are the initial-state digest);
2. for each transaction: DISPATCH (absorbs the event (entry pc, 1, tx, 0...) into the input
   chain, jumps to the program), the program until HALT (READ/WRITE extend the input and
   output chains);
3. a last DISPATCH (event (epilogue pc, 1, n_tx, 0...)), then the epilogue ABSORB_FINAL
   over the final memory and STOP.

The record keeps per cycle the pc and the lane-0 values of the three memory slots, and per
POSEIDON2 call its cycle, input and output; the trace generators (:mod:`vm.traces`) derive
every column from these.  Failures raise :class:`ExecutionError` naming the transaction,
the instruction (with its JSON path) and the cycle.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import isa
from .block import Block
from . import fastexec
from .poseidon2 import permute_one
from .rom import Rom, build_rom
from steadfast.errors import SteadfastError

P = isa.P
LT_LIMIT = 1 << isa.LT_BITS


class ExecutionError(SteadfastError, RuntimeError):
    """The block cannot execute: ``where`` locates the failure, ``reason`` says what."""

    def __init__(self, reason: str, where: str, cycle: int, tx: int | None = None,
                 path: str | None = None):
        self.reason = reason
        self.where = where
        self.cycle = cycle
        self.tx = tx
        self.path = path
        super().__init__(f"{where}, cycle {cycle}: {reason}")


@dataclass
class ExecutionRecord:
    """What one execution of a block produced (arrays are int64 unless noted)."""
    block: Block
    rom: Rom
    pc: np.ndarray                  # [cycles]
    va: np.ndarray                  # value read by slot A (lane 0), 0 if unused
    vb: np.ndarray                  # value read by slot B (lane 0)
    vc: np.ndarray                  # value written by slot C (lane 0)
    hash_cycle: np.ndarray          # [calls] cycle of each POSEIDON2 call
    hash_in: np.ndarray             # uint32[calls, 16]
    hash_out: np.ndarray            # uint32[calls, 16]
    outputs: tuple                  # per transaction, the outputs it wrote
    final_memory: list
    initial_digest: list
    final_digest: list
    input_digest: list
    output_digest: list

    @property
    def cycles(self) -> int:
        return int(self.pc.shape[0])


def _locate(block: Block, rom: Rom, pc: int, tx: int | None) -> tuple[str, str | None]:
    pi, ii = rom.source[pc] if 0 <= pc < len(rom) else (-1, -1)
    if pi < 0:
        phase = "prologue" if pc < rom.dispatch_pc else "epilogue"
        if pc == rom.dispatch_pc:
            phase = "dispatch"
        return f"{phase} (system code, pc {pc})", None
    name = block.programs[pi].name
    if ii == len(block.programs[pi].code):          # the guard row after the program
        path = f"$.programs[{pi}].code[{ii - 1}]"
        return f"transaction {tx} (program {name!r}) after its last instruction {path}", path
    path = f"$.programs[{pi}].code[{ii}]"
    return f"transaction {tx} (program {name!r}) at {path}", path


def execute(block: Block, rom: Rom | None = None) -> ExecutionRecord:
    """Run ``block``; raise :class:`ExecutionError` if any transaction fails.

    The loop runs compiled (:mod:`vm.fastexec`, the semantics of :func:`_execute_py` with
    the same record and errors); a block whose memory or inputs are not canonical field
    elements (no validated block) runs the Python loop."""
    rom = rom if rom is not None else build_rom(block)
    res = fastexec.run(block, rom)
    if res is None:
        return _execute_py(block, rom)
    (status, detail, pc, tx, cycle, calls, pcs, vas, vbs, vcs, h_cycle, h_in, h_out,
     n_out, out_tx, out_val, digests, memory) = res
    n_tx = len(block.transactions)
    if status != fastexec.OK:
        d = [int(x) for x in detail]
        reason = {
            fastexec.ERR_CYCLES: lambda: f"cycle limit {block.max_cycles} reached",
            fastexec.ERR_LT: lambda: (f"LT operand out of range: m[{d[0]}] = {d[2]}, "
                                      f"m[{d[1]}] = {d[3]} (both must be < 2^{isa.LT_BITS})"),
            fastexec.ERR_LOAD: lambda: (f"LOAD address m[{d[0]}] = {d[1]} out of range "
                                        f"[0, {block.memory_size})"),
            fastexec.ERR_STORE: lambda: (f"STORE address m[{d[0]}] = {d[1]} out of range "
                                         f"[0, {block.memory_size})"),
            fastexec.ERR_READ: lambda: (f"READ past the end of the inputs (the transaction "
                                        f"has {d[0]})"),
            fastexec.ERR_HALT: lambda: f"HALT with {d[0]} unread input(s)",
            fastexec.ERR_OPCODE: lambda: rom.errors.get(int(pc), f"bad opcode {d[0]}"),
        }[int(status)]()
        where, path = _locate(block, rom, int(pc), int(tx) if tx < n_tx else None)
        raise ExecutionError(reason, where, int(cycle), int(tx) if tx < n_tx else None, path)
    outputs: list[list] = [[] for _ in range(n_tx)]
    for t, v in zip(out_tx.tolist(), out_val.tolist()):
        outputs[t].append(v)
    dig = digests.tolist()
    return ExecutionRecord(
        block=block, rom=rom, pc=pcs, va=vas, vb=vbs, vc=vcs, hash_cycle=h_cycle,
        hash_in=h_in, hash_out=h_out, outputs=tuple(tuple(o) for o in outputs),
        final_memory=memory.tolist(), initial_digest=dig[0], final_digest=dig[1],
        input_digest=dig[2], output_digest=dig[3])


def _execute_py(block: Block, rom: Rom | None = None) -> ExecutionRecord:
    """The interpreter loop in Python, one instruction at a time: the reference semantics
    of :func:`execute` (tests compare the two record for record), run for blocks the
    compiled loop does not take."""
    rom = rom if rom is not None else build_rom(block)
    rows = rom.rows.tolist()
    mem = block.dense_memory()
    msize = block.memory_size
    txs = block.transactions
    n_tx = len(txs)
    max_cycles = block.max_cycles

    pcs: list[int] = []
    vas: list[int] = []
    vbs: list[int] = []
    vcs: list[int] = []
    h_cycle: list[int] = []
    h_in: list[list] = []
    h_out: list[list] = []
    outputs: list[list] = [[] for _ in range(n_tx)]

    # sponge capacity in prologue/epilogue (starting at (M, 0, ..., 0): the length-binding
    # statement digest), input chain in between (starting at zeros)
    sponge_iv = [msize % P] + [0] * 7
    h_acc = list(sponge_iv)
    out_acc = [0] * 8
    tx = 0
    j_in = 0
    inputs: tuple = ()
    digests = {}
    pc = 0
    cycle = 0

    def fail(reason: str):
        where, path = _locate(block, rom, pc, tx if tx < n_tx else None)
        raise ExecutionError(reason, where, cycle, tx if tx < n_tx else None, path)

    def call(state: list) -> list:
        out = permute_one(state)
        h_cycle.append(cycle)
        h_in.append(state)
        h_out.append(out)
        return out

    while True:
        if cycle >= max_cycles:
            fail(f"cycle limit {max_cycles} reached")
        op, a, b, c = rows[pc]
        va = vb = vc = 0
        npc = pc + 1
        if op == isa.ADD or op == isa.SUB or op == isa.MUL:
            va = mem[a]
            vb = mem[b]
            vc = (va + vb) % P if op == isa.ADD else (va - vb) % P if op == isa.SUB else va * vb % P
            mem[c] = vc
        elif op == isa.ADDI:
            va = mem[a]
            vc = (va + b) % P
            mem[c] = vc
        elif op == isa.SET:
            vc = b
            mem[c] = vc
        elif op == isa.BNZ:
            va = mem[a]
            if va:
                npc = c
        elif op == isa.JMP:
            npc = c
        elif op == isa.LT:
            va = mem[a]
            vb = mem[b]
            if va >= LT_LIMIT or vb >= LT_LIMIT:
                fail(f"LT operand out of range: m[{a}] = {va}, m[{b}] = {vb} "
                     f"(both must be < 2^{isa.LT_BITS})")
            vc = 1 if va < vb else 0
            mem[c] = vc
        elif op == isa.LOAD:
            va = mem[a]
            if va >= msize:
                fail(f"LOAD address m[{a}] = {va} out of range [0, {msize})")
            vb = mem[va]
            vc = vb
            mem[c] = vc
        elif op == isa.STORE:
            va = mem[a]
            if va >= msize:
                fail(f"STORE address m[{a}] = {va} out of range [0, {msize})")
            vb = mem[b]
            vc = vb
            mem[va] = vc
        elif op == isa.HASH:
            out = call(mem[a:a + 8] + mem[b:b + 8])
            va, vb, vc = mem[a], mem[b], out[0]
            mem[c:c + 8] = out[:8]
        elif op == isa.READ:
            if j_in >= len(inputs):
                fail(f"READ past the end of the inputs (the transaction has {len(inputs)})")
            vc = inputs[j_in]
            h_acc = call([vc, isa.TAG_INPUT, tx, j_in, 0, 0, 0, 0] + h_acc)[:8]
            mem[c] = vc
            j_in += 1
        elif op == isa.WRITE:
            va = mem[a]
            out_acc = call([va, isa.TAG_OUTPUT, tx, len(outputs[tx]), 0, 0, 0, 0] + out_acc)[:8]
            outputs[tx].append(va)
        elif op == isa.HALT:
            if j_in != len(inputs):
                fail(f"HALT with {len(inputs) - j_in} unread input(s)")
            npc = rom.dispatch_pc
            tx += 1
        elif op == isa.ABSORB_INIT or op == isa.ABSORB_FINAL:
            va = mem[a]
            out = call(mem[a:a + 8] + h_acc)
            h_acc = out[8:]
            if rows[npc][0] != op:           # last chunk: lanes 0..7 are the digest
                digests[op] = out[:8]
                h_acc = [0] * 8
        elif op == isa.DISPATCH:
            target = rom.entries[txs[tx].program] if tx < n_tx else rom.epi_start
            h_acc = call([target, isa.TAG_DISPATCH, tx, 0, 0, 0, 0, 0] + h_acc)[:8]
            if tx == n_tx:
                digests["input"] = h_acc
                h_acc = list(sponge_iv)
            else:
                inputs = txs[tx].inputs
            j_in = 0
            npc = target
        elif op == isa.STOP:
            pcs.append(pc)
            vas.append(0)
            vbs.append(0)
            vcs.append(0)
            cycle += 1
            break
        else:
            fail(rom.errors.get(pc, f"bad opcode {op}"))
        pcs.append(pc)
        vas.append(va)
        vbs.append(vb)
        vcs.append(vc)
        pc = npc
        cycle += 1

    calls = len(h_cycle)
    return ExecutionRecord(
        block=block, rom=rom,
        pc=np.array(pcs, dtype=np.int64), va=np.array(vas, dtype=np.int64),
        vb=np.array(vbs, dtype=np.int64), vc=np.array(vcs, dtype=np.int64),
        hash_cycle=np.array(h_cycle, dtype=np.int64),
        hash_in=np.array(h_in, dtype=np.uint32).reshape(calls, 16),
        hash_out=np.array(h_out, dtype=np.uint32).reshape(calls, 16),
        outputs=tuple(tuple(o) for o in outputs), final_memory=mem,
        initial_digest=digests[isa.ABSORB_INIT], final_digest=digests[isa.ABSORB_FINAL],
        input_digest=digests["input"], output_digest=out_acc)


def claim_mismatches(record: ExecutionRecord) -> list[str]:
    """Where the block's claimed outputs differ from what execution wrote (empty if none)."""
    problems = []
    for i, (tx, got) in enumerate(zip(record.block.transactions, record.outputs)):
        want = tx.outputs
        if len(want) != len(got):
            problems.append(f"$.transactions[{i}].outputs: claims {len(want)} output(s), "
                            f"execution wrote {len(got)}")
            continue
        for j, (w, g) in enumerate(zip(want, got)):
            if w != g:
                problems.append(f"$.transactions[{i}].outputs[{j}]: claims {w}, "
                                f"execution wrote {g}")
    return problems
