"""The interpreter's loop compiled (numba): :func:`vm.interpreter.execute` runs a block here.

Exactly the semantics of the Python loop kept in :func:`vm.interpreter._execute_py` (the
reference, and the fallback for a block whose memory or inputs are not canonical field
elements), and the same record: per cycle pc and the lane-0 values of the three memory
slots, per POSEIDON2 call its cycle, input and output.  The permutation is the verifier's
compiled one (verifier/poseidon2.py ``_permute_lanes``, one state at a time, in Montgomery
form), called from inside the loop -- no Python per cycle or per call.

A failure does not raise inside the kernel: it returns a code and the values the message
needs (:data:`ERR_*`), and :func:`run` turns them into the interpreter's ExecutionError
with the same text.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..verifier.poseidon2 import _from_mont, _permute_lanes, _to_mont

from . import isa

P = isa.P
LT_LIMIT = 1 << isa.LT_BITS

# failure codes (status); detail = the values the message names
OK = 0
ERR_CYCLES = 1          # cycle limit reached
ERR_LT = 2              # detail: a, b, m[a], m[b]
ERR_LOAD = 3            # detail: a, m[a]
ERR_STORE = 4           # detail: a, m[a]
ERR_READ = 5            # detail: number of inputs
ERR_HALT = 6            # detail: unread inputs
ERR_OPCODE = 7          # detail: opcode

_SET, _ADD, _SUB, _MUL, _ADDI, _LT, _LOAD, _STORE, _JMP, _BNZ, _HASH, _READ, _WRITE, _HALT, \
    _ABSORB_INIT, _ABSORB_FINAL, _DISPATCH, _STOP = (isa.SET, isa.ADD, isa.SUB, isa.MUL,
                                                     isa.ADDI, isa.LT, isa.LOAD, isa.STORE,
                                                     isa.JMP, isa.BNZ, isa.HASH, isa.READ,
                                                     isa.WRITE, isa.HALT, isa.ABSORB_INIT,
                                                     isa.ABSORB_FINAL, isa.DISPATCH, isa.STOP)
_TAG_DISPATCH, _TAG_INPUT, _TAG_OUTPUT = isa.TAG_DISPATCH, isa.TAG_INPUT, isa.TAG_OUTPUT


@njit(cache=True)
def _run(rows, mem, max_cycles, dispatch_pc, epi_start, tx_entry, in_off, in_vals, pcs, vas,
         vbs, vcs, h_cycle, h_in, h_out, out_tx, out_val, digests, detail):
    """The block's execution.  rows int64[R, 4]; mem int64[M] (modified in place: the final
    memory); tx_entry int64[T] (entry pc of each transaction's program); the inputs of
    transaction t are in_vals[in_off[t]:in_off[t + 1]].  Fills, each with room for
    max_cycles entries (a row records at most one call and one output): pcs, vas, vbs, vcs
    per cycle, h_cycle, h_in, h_out per call, out_tx, out_val per output; digests int64[4,
    8] (initial, final, input, output) and detail (a failure's values).  Returns (status,
    pc, tx, cycle, calls, outputs).  The buffers are the caller's, so the compiled code
    has no growing arrays (they tripled its compile time)."""
    msize = mem.shape[0]
    n_tx = tx_entry.shape[0]
    out_count = np.zeros(max(n_tx, 1), np.int64)
    n_out = 0
    st = np.empty((16, 1), np.uint64)

    h_acc = np.zeros(8, np.int64)
    h_acc[0] = msize % P
    out_acc = np.zeros(8, np.int64)
    tx = 0
    j_in = 0
    n_in = 0
    in_base = 0
    pc = 0
    cycle = 0
    calls = 0
    status = OK
    while True:
        if cycle >= max_cycles:
            status = ERR_CYCLES
            break
        op = rows[pc, 0]
        a = rows[pc, 1]
        b = rows[pc, 2]
        c = rows[pc, 3]
        va = 0
        vb = 0
        vc = 0
        npc = pc + 1
        if op == _ADD or op == _SUB or op == _MUL:
            va = mem[a]
            vb = mem[b]
            if op == _ADD:
                vc = (va + vb) % P
            elif op == _SUB:
                vc = (va - vb) % P
            else:
                vc = va * vb % P
            mem[c] = vc
        elif op == _ADDI:
            va = mem[a]
            vc = (va + b) % P
            mem[c] = vc
        elif op == _SET:
            vc = b
            mem[c] = vc
        elif op == _BNZ:
            va = mem[a]
            if va != 0:
                npc = c
        elif op == _JMP:
            npc = c
        elif op == _LT:
            va = mem[a]
            vb = mem[b]
            if va >= LT_LIMIT or vb >= LT_LIMIT:
                status = ERR_LT
                detail[0] = a
                detail[1] = b
                detail[2] = va
                detail[3] = vb
                break
            vc = 1 if va < vb else 0
            mem[c] = vc
        elif op == _LOAD:
            va = mem[a]
            if va >= msize:
                status = ERR_LOAD
                detail[0] = a
                detail[1] = va
                break
            vb = mem[va]
            vc = vb
            mem[c] = vc
        elif op == _STORE:
            va = mem[a]
            if va >= msize:
                status = ERR_STORE
                detail[0] = a
                detail[1] = va
                break
            vb = mem[b]
            vc = vb
            mem[va] = vc
        elif op == _HALT:
            if j_in != n_in:
                status = ERR_HALT
                detail[0] = n_in - j_in
                break
            npc = dispatch_pc
            tx += 1
        elif op == _STOP:
            pass
        elif op == _HASH or op == _READ or op == _WRITE or op == _ABSORB_INIT \
                or op == _ABSORB_FINAL or op == _DISPATCH:
            if op == _READ and j_in >= n_in:
                status = ERR_READ
                detail[0] = n_in
                break
            # the call's input state
            if op == _HASH:
                for i in range(8):
                    h_in[calls, i] = mem[a + i]
                    h_in[calls, 8 + i] = mem[b + i]
            elif op == _ABSORB_INIT or op == _ABSORB_FINAL:
                for i in range(8):
                    h_in[calls, i] = mem[a + i]
                    h_in[calls, 8 + i] = h_acc[i]
            else:
                if op == _READ:
                    e0, tag, e3 = in_vals[in_base + j_in], _TAG_INPUT, j_in
                    acc = h_acc
                elif op == _WRITE:
                    e0, tag, e3 = mem[a], _TAG_OUTPUT, out_count[tx]
                    acc = out_acc
                else:
                    e0 = tx_entry[tx] if tx < n_tx else epi_start
                    tag, e3 = _TAG_DISPATCH, 0
                    acc = h_acc
                h_in[calls, 0] = e0
                h_in[calls, 1] = tag
                h_in[calls, 2] = tx
                h_in[calls, 3] = e3
                for i in range(4, 8):
                    h_in[calls, i] = 0
                for i in range(8):
                    h_in[calls, 8 + i] = acc[i]
            for i in range(16):
                st[i, 0] = _to_mont(np.uint64(h_in[calls, i]))
            _permute_lanes(st, 1)
            for i in range(16):
                h_out[calls, i] = np.uint32(_from_mont(st[i, 0]))
            h_cycle[calls] = cycle
            k = calls
            calls += 1
            # the instruction's effect
            if op == _HASH:
                va = mem[a]
                vb = mem[b]
                vc = np.int64(h_out[k, 0])
                for i in range(8):
                    mem[c + i] = np.int64(h_out[k, i])
            elif op == _READ:
                vc = in_vals[in_base + j_in]
                for i in range(8):
                    h_acc[i] = np.int64(h_out[k, i])
                mem[c] = vc
                j_in += 1
            elif op == _WRITE:
                va = mem[a]
                for i in range(8):
                    out_acc[i] = np.int64(h_out[k, i])
                out_tx[n_out] = tx
                out_val[n_out] = va
                n_out += 1
                out_count[tx] += 1
            elif op == _ABSORB_INIT or op == _ABSORB_FINAL:
                va = mem[a]
                for i in range(8):
                    h_acc[i] = np.int64(h_out[k, 8 + i])
                if rows[npc, 0] != op:           # last chunk: lanes 0..7 are the digest
                    d = 0 if op == _ABSORB_INIT else 1
                    for i in range(8):
                        digests[d, i] = np.int64(h_out[k, i])
                        h_acc[i] = 0
            else:                                 # DISPATCH
                target = tx_entry[tx] if tx < n_tx else epi_start
                for i in range(8):
                    h_acc[i] = np.int64(h_out[k, i])
                if tx == n_tx:
                    for i in range(8):
                        digests[2, i] = h_acc[i]
                        h_acc[i] = 0
                    h_acc[0] = msize % P
                else:
                    in_base = in_off[tx]
                    n_in = in_off[tx + 1] - in_off[tx]
                j_in = 0
                npc = target
        else:
            status = ERR_OPCODE
            detail[0] = op
            break
        pcs[cycle] = pc
        vas[cycle] = va
        vbs[cycle] = vb
        vcs[cycle] = vc
        cycle += 1
        if op == _STOP:
            break
        pc = npc
    for i in range(8):
        digests[3, i] = out_acc[i]
    return status, pc, tx, cycle, calls, n_out


def canonical(values) -> bool:
    """Whether every value is an int in [0, p) (what the compiled loop assumes of the
    initial memory and the inputs; a validated block always satisfies it)."""
    try:
        arr = np.asarray(values, dtype=np.int64)
    except (OverflowError, TypeError, ValueError):
        return False
    if arr.ndim != 1:
        return False
    return bool(arr.size == 0 or (arr.min() >= 0 and arr.max() < P))


def rom_ok(rom, msize: int) -> bool:
    """Whether every row the compiled loop could execute stays inside memory and the ROM
    (a ROM from vm.rom.build_rom always does; the loop does not check indices, so another
    ROM runs the Python loop, which fails as Python does): memory operands of the opcodes
    that use them in [0, msize - width], jump targets, program entries, dispatch and
    epilogue rows inside the ROM, immediates canonical, and a last row that stops."""
    rows = np.asarray(rom.rows)
    if rows.ndim != 2 or rows.shape[0] == 0 or rows.shape[1] != 4 or rows.dtype.kind not in "iu":
        return False
    rows = rows.astype(np.int64)
    n = rows.shape[0]
    op, a, b, c = rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3]
    wide = (op == isa.HASH) | (op == isa.ABSORB_INIT) | (op == isa.ABSORB_FINAL)
    width = np.where(wide, 8, 1)

    def inside(field, ops):
        use = np.isin(op, sorted(ops))
        return bool(np.all(~use | ((field >= 0) & (field + width <= msize))))

    uses_b = set(isa.READS_B) - {isa.LOAD}
    uses_c = set(isa.WRITES_C) - {isa.STORE}
    jumps = (op == isa.JMP) | (op == isa.BNZ)
    imm = (op == isa.SET) | (op == isa.ADDI)
    targets = [*rom.entries, rom.dispatch_pc, rom.epi_start]
    return (inside(a, isa.READS_A) and inside(b, uses_b) and inside(c, uses_c)
            and bool(np.all(~jumps | ((c >= 0) & (c < n))))
            and bool(np.all(~imm | ((b >= 0) & (b < P))))
            and all(0 <= int(x) < n for x in targets)
            and int(op[-1]) in (isa.STOP, isa.INVALID))


def run(block, rom):
    """Execute ``block`` on the compiled loop.  Returns the kernel's tuple followed by the
    final memory (int64[M]), or None when the block's memory or inputs are not canonical
    or the ROM is not one the loop can run unchecked (:func:`rom_ok`); the caller then
    runs the Python loop."""
    mem = block.dense_memory()
    txs = block.transactions
    flat_in = [x for t in txs for x in t.inputs]
    if not (canonical(mem) and canonical(flat_in)):
        return None
    if any(type(x) is bool for x in mem) or any(type(x) is bool for x in flat_in):
        return None
    if not rom_ok(rom, block.memory_size) or any(
            not 0 <= t.program < len(rom.entries) for t in txs):
        return None
    in_off = np.zeros(len(txs) + 1, dtype=np.int64)
    in_off[1:] = np.cumsum([len(t.inputs) for t in txs], dtype=np.int64)
    tx_entry = np.array([rom.entries[t.program] for t in txs], dtype=np.int64)
    rows = np.ascontiguousarray(rom.rows, dtype=np.int64)
    cap = max(int(block.max_cycles), 1)
    # room for max_cycles of everything: np.empty maps the pages lazily, only the rows
    # written become resident; the record keeps copies of the written part
    pcs, vas, vbs, vcs, h_cycle, out_tx, out_val = (np.empty(cap, np.int64) for _ in range(7))
    h_in = np.empty((cap, 16), np.uint32)
    h_out = np.empty((cap, 16), np.uint32)
    digests = np.zeros((4, 8), np.int64)
    detail = np.zeros(4, np.int64)
    memory = np.array(mem, dtype=np.int64)
    status, pc, tx, cycle, calls, n_out = _run(
        rows, memory, int(block.max_cycles), int(rom.dispatch_pc), int(rom.epi_start),
        tx_entry, in_off, np.array(flat_in, dtype=np.int64), pcs, vas, vbs, vcs, h_cycle,
        h_in, h_out, out_tx, out_val, digests, detail)
    return (status, detail, pc, tx, cycle, calls, pcs[:cycle].copy(), vas[:cycle].copy(),
            vbs[:cycle].copy(), vcs[:cycle].copy(), h_cycle[:calls].copy(),
            h_in[:calls].copy(), h_out[:calls].copy(), n_out, out_tx[:n_out].copy(),
            out_val[:n_out].copy(), digests, memory)
