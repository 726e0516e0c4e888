"""Verbatim copies of the VM's execution and trace generators as they were at commit
687c514 (before the compiled interpreter and trace kernels), kept as the reference the
fast paths are compared against bit for bit (tests/test_vm_fast.py).  Do not "fix" or
speed these up: they are the specification of the outputs."""
from __future__ import annotations

import numpy as np

from steadfast.air import field as F
from steadfast.vm import isa
from steadfast.vm.airs import (CPU_LAYOUT, MEMORY_LAYOUT, P2_LAYOUT, RANGE_SIZE, SELECTORS,
                               SLACK_BITS, slack_bits, slot_menu)
from steadfast.vm.block import MAX_CYCLES, Block
from steadfast.vm.interpreter import ExecutionError, ExecutionRecord, _locate
from steadfast.vm.poseidon2 import (N_FULL_HALF, WIDTH, _RC_FULL, _RC_PART, external_linear,
                                    internal_linear, _permute_py)
from steadfast.vm.rom import Rom, build_rom

P = isa.P
LT_LIMIT = 1 << isa.LT_BITS
_P64 = np.uint64(P)
N_PARTIAL = 13


def permute_one(state):
    """The pure-Python permutation (the reference of every compiled one)."""
    return _permute_py(state)


def execute_ref(block: Block, rom: Rom | None = None) -> ExecutionRecord:
    """Run ``block``; raise :class:`ExecutionError` if any transaction fails."""
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


def _pow3(x):
    return (x * x % _P64) * x % _P64


def permute_rows_ref(states: np.ndarray) -> dict:
    """Permute a batch ``uint32[n, 16]`` and return every intermediate the POSEIDON2 table
    stores, as uint32 arrays:

    * ``full_cube``  [8, n, 16]: t = (s + rc)^3 in each full round,
    * ``full_sbox``  [8, n, 16]: y = t^2 (s + rc) = (s + rc)^7,
    * ``part_cube``  [13, n] and ``part_sbox`` [13, n]: the same for lane 0 of partial rounds,
    * ``out``        [n, 16]: the permutation output.
    """
    states = np.asarray(states)
    if states.ndim != 2 or states.shape[1] != WIDTH:
        raise ValueError(f"expected states of shape (n, 16), got {states.shape}")
    n = states.shape[0]
    red = lambda v: v % _P64  # noqa: E731
    s = external_linear([states[:, i].astype(np.uint64) for i in range(WIDTH)], red)
    full_cube = np.empty((2 * N_FULL_HALF, n, WIDTH), np.uint32)
    full_sbox = np.empty((2 * N_FULL_HALF, n, WIDTH), np.uint32)
    part_cube = np.empty((N_PARTIAL, n), np.uint32)
    part_sbox = np.empty((N_PARTIAL, n), np.uint32)
    for r in range(2 * N_FULL_HALF):
        if r == N_FULL_HALF:
            for k, rc in enumerate(_RC_PART):
                x = (s[0] + np.uint64(rc)) % _P64
                t = _pow3(x)
                y = t * t % _P64 * x % _P64
                part_cube[k] = t
                part_sbox[k] = y
                s = internal_linear([y] + s[1:], red)
        ys = []
        for i in range(WIDTH):
            x = (s[i] + np.uint64(_RC_FULL[r][i])) % _P64
            t = _pow3(x)
            y = t * t % _P64 * x % _P64
            full_cube[r, :, i] = t
            full_sbox[r, :, i] = y
            ys.append(y)
        s = external_linear(ys, red)
    out = np.stack(s, axis=1).astype(np.uint32)
    return {"full_cube": full_cube, "full_sbox": full_sbox, "part_cube": part_cube,
            "part_sbox": part_sbox, "out": out}


def _pow2(n: int) -> int:
    return max(2, 1 << (max(n, 1) - 1).bit_length())


def _forward_fill(n: int, change_rows: np.ndarray, values: np.ndarray, initial) -> np.ndarray:
    """out[t] = values[k] for the last change_rows[k] < t (the state *before* row t),
    ``initial`` before the first change.  values: [k, w]."""
    w = values.shape[1]
    out = np.empty((n, w), dtype=np.int64)
    marker = np.full(n, -1, dtype=np.int64)
    ok = change_rows + 1 < n
    marker[change_rows[ok] + 1] = np.nonzero(ok)[0]
    last = np.maximum.accumulate(marker)
    out[:] = np.asarray(initial, dtype=np.int64)
    sel = last >= 0
    out[sel] = values[last[sel]]
    return out


def cpu_trace_ref(rec: ExecutionRecord, max_cycles: int | None = None) -> np.ndarray:
    """The CPU trace; ``max_cycles`` (default: the block's) is the public limit whose
    slack the STOP row decomposes.  A slack outside [0, 2^21) -- a false limit -- is left
    as zeros, which breaks ``cycle_limit``."""
    L = CPU_LAYOUT.idx
    cycles = rec.cycles
    n = _pow2(cycles)
    T = np.zeros((n, CPU_LAYOUT.width), dtype=np.int64)
    rows = rec.rom.rows
    op = rows[rec.pc, 0]
    T[:, L["clk"]] = np.arange(n)
    T[:cycles, L["pc"]] = rec.pc
    T[:cycles, L["a"]] = rows[rec.pc, 1]
    T[:cycles, L["b"]] = rows[rec.pc, 2]
    T[:cycles, L["c"]] = rows[rec.pc, 3]
    for k, name in enumerate(SELECTORS, start=1):
        T[:cycles, L[f"is_{name.lower()}"]] = op == k
    va, vb, vc = rec.va, rec.vb, rec.vc
    v0, o0 = L["v"], L["o"]
    T[:cycles, v0] = va
    T[:cycles, v0 + 8] = vb
    T[:cycles, v0 + 16] = vc
    T[:cycles, L["addr_b"]] = np.where(op == isa.LOAD, va, rows[rec.pc, 2])
    T[:cycles, L["addr_c"]] = np.where(op == isa.STORE, va, rows[rec.pc, 3])

    # POSEIDON2 calls: inputs in v[0..16], outputs in o[0..16]
    hc = rec.hash_cycle
    T[hc, v0:v0 + 16] = rec.hash_in
    T[hc, o0:o0 + 16] = rec.hash_out

    # accumulators: the value before each row (see the hin_step / hout_step constraints)
    hop = op[hc]
    nxt_op = np.append(op, isa.STOP)[hc + 1]
    # the state sponges start from the capacity (M, 0, ..., 0) (statement_digest)
    iv = np.zeros(8, dtype=np.int64)
    iv[0] = rec.block.memory_size
    new_hin = np.zeros((len(hc), 8), dtype=np.int64)
    chain = (hop == isa.READ) | ((hop == isa.DISPATCH) & (nxt_op != isa.ABSORB_FINAL))
    new_hin[chain] = rec.hash_out[chain, :8]
    new_hin[(hop == isa.DISPATCH) & (nxt_op == isa.ABSORB_FINAL)] = iv
    sponge = ((hop == isa.ABSORB_INIT) | (hop == isa.ABSORB_FINAL)) & (nxt_op == hop)
    new_hin[sponge] = rec.hash_out[sponge, 8:]
    changes = chain | sponge | (hop == isa.ABSORB_INIT) | (hop == isa.ABSORB_FINAL) | \
        (hop == isa.DISPATCH)
    T[:, L["hin"]:L["hin"] + 8] = _forward_fill(n, hc[changes], new_hin[changes], iv)
    w = hop == isa.WRITE
    T[:, L["hout"]:L["hout"] + 8] = _forward_fill(n, hc[w], rec.hash_out[w, :8], 0)

    # transaction index and I/O positions (values before each row)
    def before(flag):
        c = np.zeros(n, dtype=np.int64)
        c[1:cycles + 1] = np.cumsum(flag)[:n - 1] if cycles < n else np.cumsum(flag)[:-1]
        c[cycles + 1:] = c[cycles] if cycles < n else 0
        return c
    T[:, L["tx"]] = before(op == isa.HALT)
    disp_rows = np.nonzero(op == isa.DISPATCH)[0]
    for name, flag in (("jin", op == isa.READ), ("jout", op == isa.WRITE)):
        count = before(flag)
        base = _forward_fill(n, disp_rows, count[np.minimum(disp_rows + 1, n - 1)].reshape(-1, 1), 0)
        T[:, L[name]] = count - base[:, 0]

    # BNZ: nz = [m[a] != 0], inv = m[a]^-1 (0 if m[a] = 0)
    bnz = np.nonzero(op == isa.BNZ)[0]
    x = va[bnz].astype(np.uint64)
    T[bnz, L["nz"]] = x != 0
    T[bnz, L["inv"]] = F.inv(x).astype(np.int64)
    # LT: d = y - x - 1 if x < y else x - y
    lt = np.nonzero(op == isa.LT)[0]
    T[lt, L["d"]] = np.where(vc[lt] == 1, vb[lt] - va[lt] - 1, va[lt] - vb[lt])
    # STOP (the last cycle, clk = cycles - 1): slack = max_cycles - cycles in limbs
    limit = rec.block.max_cycles if max_cycles is None else int(max_cycles)
    slack = limit - cycles
    if 0 <= slack < MAX_CYCLES:
        cols = slack_bits({"v": range(v0, v0 + 17), "o": range(o0, o0 + 16)})
        T[cycles - 1, cols] = (slack >> np.arange(SLACK_BITS)) & 1
    return (T % P).astype(np.uint32)


def memory_accesses_ref(cpu: np.ndarray) -> np.ndarray:
    """All memory accesses of a CPU trace as int64[k, 4] (address, time, value, is_write),
    exactly the tuples the CPU sends on the ``memory`` bus."""
    L = CPU_LAYOUT.idx
    T = cpu.astype(np.int64)
    sel = {k: T[:, L[f"is_{name.lower()}"]] for k, name in enumerate(SELECTORS, start=1)}

    def anyof(ops):
        return sum(sel[k] for k in ops).astype(bool)

    wide_a = anyof({isa.HASH, isa.ABSORB_INIT, isa.ABSORB_FINAL})
    hsh = sel[isa.HASH].astype(bool)
    t = 3 * T[:, L["clk"]]
    v, o = L["v"], L["o"]
    parts = []
    for i in range(8):
        m = anyof(isa.READS_A) if i == 0 else wide_a
        parts.append(np.stack([T[m, L["a"]] + i, t[m], T[m, v + i], np.zeros(m.sum(), np.int64)], 1))
        m = anyof(isa.READS_B) if i == 0 else hsh
        parts.append(np.stack([T[m, L["addr_b"]] + i, t[m] + 1, T[m, v + 8 + i],
                               np.zeros(m.sum(), np.int64)], 1))
        m = anyof(isa.WRITES_C) if i == 0 else hsh
        val = T[m, v + 16] if i == 0 else T[m, o + i]
        parts.append(np.stack([T[m, L["addr_c"]] + i, t[m] + 2, val, np.ones(m.sum(), np.int64)], 1))
    return np.concatenate(parts)


def memory_trace_ref(acc: np.ndarray, slots: int = 1) -> np.ndarray:
    """MEMORY with ``slots`` accesses per row (vm/airs.py memory_layout): the accesses
    sorted by (address, time), then padding, access v in row v // slots, slot v % slots,
    over next_pow2(ceil(accesses / slots)) rows.  Within an address the gap limbs hold
    time' - time - 1; where the address steps (by exactly 1: the prologue reads every
    cell) they are 0."""
    if slots not in slot_menu("memory"):
        raise ValueError(f"MEMORY takes k in {slot_menu('memory')} slots, not {slots!r}")
    L = MEMORY_LAYOUT.idx
    order = np.lexsort((acc[:, 1], acc[:, 0]))
    acc = acc[order]
    k = acc.shape[0]
    n = _pow2(-(-k // slots)) * slots
    T = np.zeros((n, MEMORY_LAYOUT.width), dtype=np.int64)
    T[:k, L["addr"]] = acc[:, 0]
    T[:k, L["time"]] = acc[:, 1]
    T[:k, L["value"]] = acc[:, 2]
    T[:k, L["is_write"]] = acc[:, 3]
    T[:k, L["is_real"]] = 1
    gap = np.zeros(k, dtype=np.int64)
    same = acc[1:, 0] == acc[:-1, 0]
    gap[1:] = np.where(same, acc[1:, 1] - acc[:-1, 1] - 1, 0)
    T[:k, L["gap_lo"]] = gap & 0xFFFF
    T[:k, L["gap_hi"]] = gap >> 16
    # padding rows: not real, so only the unguarded transition constraints apply;
    # repeating the last row's address, time and value as a read (address step 0, value
    # unchanged) satisfies addr_step and read_consistency
    if k:
        for name, j in (("addr", 0), ("time", 1), ("value", 2)):
            T[k:, L[name]] = acc[-1, j]
    return (T % P).astype(np.uint32).reshape(n // slots, slots * MEMORY_LAYOUT.width)


def range_counts_ref(cpu: np.ndarray, mem: np.ndarray) -> np.ndarray:
    """RANGE's multiplicity column: how often each value 0..2^16-1 is sent on ``range16``.
    Mirrors the sends of vm/airs.py -- CPU: x, y, d of every LT row; MEMORY: gap_lo,
    gap_hi and 2^8 gap_hi of every real row."""
    L, M = CPU_LAYOUT.idx, MEMORY_LAYOUT.idx
    mem = mem.reshape(-1, MEMORY_LAYOUT.width)          # one access per row, any slots
    lt = cpu[:, L["is_lt"]] == 1
    real = mem[:, M["is_real"]] == 1
    hi = mem[real, M["gap_hi"]].astype(np.int64)
    vals = np.concatenate([cpu[lt, L["v"]], cpu[lt, L["v"] + 8], cpu[lt, L["d"]],
                           mem[real, M["gap_lo"]], hi, hi << 8]).astype(np.int64)
    if vals.size and (vals.min() < 0 or vals.max() >= RANGE_SIZE):
        bad = vals[(vals < 0) | (vals >= RANGE_SIZE)][0]
        raise ValueError(f"range check of {bad} cannot succeed (not < 2^16)")
    return np.bincount(vals, minlength=RANGE_SIZE).astype(np.uint32).reshape(-1, 1)


def program_counts_ref(cpu: np.ndarray, height: int) -> np.ndarray:
    L = CPU_LAYOUT.idx
    real = cpu[:, L["is_" + SELECTORS[0].lower()]:L["is_" + SELECTORS[-1].lower()] + 1].sum(1) > 0
    counts = np.bincount(cpu[real, L["pc"]].astype(np.int64), minlength=height)
    return counts.astype(np.uint32).reshape(-1, 1)


def poseidon2_trace_ref(hash_in: np.ndarray, k: int = 1) -> np.ndarray:
    """POSEIDON2 with k slots (vm/airs.py p2_layout): permutation i in row i // k, slot
    i % k, over next_pow2(ceil(perms / k)) rows; the slots left over permute zero with
    mult 0."""
    if k not in slot_menu("poseidon2"):
        raise ValueError(f"POSEIDON2 takes k in {slot_menu('poseidon2')} slots, not {k!r}")
    perms = hash_in.shape[0]
    n = _pow2(-(-perms // k))
    states = np.zeros((n * k, WIDTH), dtype=np.uint32)
    states[:perms] = hash_in
    r = permute_rows_ref(states)
    L = P2_LAYOUT.idx
    T = np.zeros((n * k, P2_LAYOUT.width), dtype=np.uint32)
    T[:, L["in"]:L["in"] + 16] = states
    for rnd in range(2 * N_FULL_HALF):
        T[:, L[f"cube{rnd}"]:L[f"cube{rnd}"] + 16] = r["full_cube"][rnd]
        T[:, L[f"sbox{rnd}"]:L[f"sbox{rnd}"] + 16] = r["full_sbox"][rnd]
    T[:, L["pcube"]:L["pcube"] + r["part_cube"].shape[0]] = r["part_cube"].T
    T[:, L["psbox"]:L["psbox"] + r["part_sbox"].shape[0]] = r["part_sbox"].T
    T[:perms, L["mult"]] = 1
    # one permutation per row of n * k rows, k consecutive rows side by side per row
    return T.reshape(n, k * P2_LAYOUT.width)
