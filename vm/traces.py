"""Trace generation: from an :class:`~vm.interpreter.ExecutionRecord` to the five tables'
main traces (uint32[n, width], n a power of two), all numpy-vectorised.

The CPU trace is built column by column from the per-cycle record; the memory accesses,
range-check counts, ROM multiplicities and POSEIDON2 rows are then derived from the CPU
trace itself, so the tables agree on the buses by construction.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..air import field as F

from . import isa
from .airs import (CPU_LAYOUT, MEMORY_LAYOUT, P2_LAYOUT, RANGE_SIZE, SELECTORS, SLACK_BITS,
                   SLOTTED, block_airs, check_slots, slack_bits, slot_menu, slots_from_widths,
                   table_air, DEFAULT_LOG_BLOWUP)
from .block import MAX_CYCLES
from .interpreter import ExecutionRecord
from .poseidon2 import N_FULL_HALF, WIDTH
from .statement import NUM_PUBLIC_VALUES, PV_MAX_CYCLES, block_public_values

P = isa.P


def _pow2(n: int) -> int:
    return max(2, 1 << (max(n, 1) - 1).bit_length())


@dataclass
class BlockTraces:
    """Everything a block proof needs: AIRs, traces and per-table public values, in table
    order (CPU, PROGRAM, MEMORY, RANGE, POSEIDON2), plus the block-level public values."""
    airs: list
    traces: list
    table_public_values: list
    public_values: list

    @property
    def names(self) -> list[str]:
        return [a.name for a in self.airs]

    @property
    def slots(self) -> dict:
        """k of every slotted table (vm/airs.py SLOTTED), read off the traces' widths."""
        return slots_from_widths([int(t.shape[1]) for t in self.traces])


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


def cpu_trace(rec: ExecutionRecord, max_cycles: int | None = None) -> np.ndarray:
    """The CPU trace; ``max_cycles`` (default: the block's) is the public limit whose
    slack the STOP row decomposes.  A slack outside [0, 2^21) -- a false limit -- is left
    as zeros, which breaks ``cycle_limit``."""
    from . import tracekernels as K
    L = CPU_LAYOUT.idx
    cycles = rec.cycles
    n = _pow2(cycles)
    # built column-major (U[column] contiguous) and transposed once at the end, in uint32
    # from the start: every value is reduced mod p as it is stored (the same cells as
    # building the trace in int64 and reducing it at the end, without the int64 copy)
    U = np.zeros((CPU_LAYOUT.width, n), dtype=np.uint32)

    def put(rows_, col, values):
        v = np.asarray(values, dtype=np.int64)
        if v.size and (v.min() < 0 or v.max() >= P):
            v = v % P
        U[col, rows_] = v.T

    rows = rec.rom.rows
    pc = np.asarray(rec.pc)
    prow = rows[pc]
    op = prow[:, 0]
    put(slice(None), L["clk"], np.arange(n))
    put(slice(0, cycles), L["pc"], pc)
    put(slice(0, cycles), L["a"], prow[:, 1])
    put(slice(0, cycles), L["b"], prow[:, 2])
    put(slice(0, cycles), L["c"], prow[:, 3])
    s0 = L["is_" + SELECTORS[0].lower()]
    if all(L[f"is_{name.lower()}"] == s0 + k for k, name in enumerate(SELECTORS)):
        U[s0:s0 + len(SELECTORS), :cycles] = op == np.arange(1, len(SELECTORS) + 1)[:, None]
    else:
        for k, name in enumerate(SELECTORS, start=1):
            U[L[f"is_{name.lower()}"], :cycles] = op == k
    va, vb, vc = rec.va, rec.vb, rec.vc
    v0, o0 = L["v"], L["o"]
    put(slice(0, cycles), v0, va)
    put(slice(0, cycles), v0 + 8, vb)
    put(slice(0, cycles), v0 + 16, vc)
    put(slice(0, cycles), L["addr_b"], np.where(op == isa.LOAD, va, prow[:, 2]))
    put(slice(0, cycles), L["addr_c"], np.where(op == isa.STORE, va, prow[:, 3]))

    # POSEIDON2 calls: inputs in v[0..16], outputs in o[0..16]
    hc = rec.hash_cycle
    put(hc, slice(v0, v0 + 16), rec.hash_in)
    put(hc, slice(o0, o0 + 16), rec.hash_out)

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
    K.forward_fill_into(U, L["hin"], hc[changes], new_hin[changes], iv)
    w = hop == isa.WRITE
    K.forward_fill_into(U, L["hout"], np.ascontiguousarray(hc[w]),
                        np.ascontiguousarray(rec.hash_out[w, :8], dtype=np.int64),
                        np.zeros(8, dtype=np.int64))

    # transaction index and I/O positions (values before each row)
    def before(flag):
        c = np.zeros(n, dtype=np.int64)
        c[1:cycles + 1] = np.cumsum(flag)[:n - 1] if cycles < n else np.cumsum(flag)[:-1]
        c[cycles + 1:] = c[cycles] if cycles < n else 0
        return c
    put(slice(None), L["tx"], before(op == isa.HALT))
    disp_rows = np.nonzero(op == isa.DISPATCH)[0]
    for name, flag in (("jin", op == isa.READ), ("jout", op == isa.WRITE)):
        count = before(flag)
        base = _forward_fill(n, disp_rows, count[np.minimum(disp_rows + 1, n - 1)].reshape(-1, 1), 0)
        put(slice(None), L[name], count - base[:, 0])

    # BNZ: nz = [m[a] != 0], inv = m[a]^-1 (0 if m[a] = 0)
    bnz = np.nonzero(op == isa.BNZ)[0]
    x = va[bnz].astype(np.uint64)
    U[L["nz"], bnz] = x != 0
    put(bnz, L["inv"], F.inv(x).astype(np.int64))
    # LT: d = y - x - 1 if x < y else x - y
    lt = np.nonzero(op == isa.LT)[0]
    put(lt, L["d"], np.where(vc[lt] == 1, vb[lt] - va[lt] - 1, va[lt] - vb[lt]))
    # STOP (the last cycle, clk = cycles - 1): slack = max_cycles - cycles in limbs
    limit = rec.block.max_cycles if max_cycles is None else int(max_cycles)
    slack = limit - cycles
    if 0 <= slack < MAX_CYCLES:
        cols = slack_bits({"v": range(v0, v0 + 17), "o": range(o0, o0 + 16)})
        U[cols, cycles - 1] = (slack >> np.arange(SLACK_BITS)) & 1
    return np.ascontiguousarray(U.T)


def memory_accesses(cpu: np.ndarray) -> np.ndarray:
    """All memory accesses of a CPU trace as int64[k, 4] (address, time, value, is_write),
    exactly the tuples the CPU sends on the ``memory`` bus."""
    from . import tracekernels as K
    L = CPU_LAYOUT.idx
    cpu = np.asarray(cpu)
    if cpu.ndim == 2 and cpu.dtype == np.uint32:
        # one compiled pass (vm/tracekernels.py mem_accesses), the same rows in the same order
        def cols(ops):
            return np.array(sorted(L[f"is_{isa.OPCODE_NAMES[k].lower()}"] for k in ops),
                            dtype=np.int64)
        return K.mem_accesses(np.ascontiguousarray(cpu), cols(isa.READS_A), cols(isa.READS_B),
                              cols(isa.WRITES_C),
                              cols({isa.HASH, isa.ABSORB_INIT, isa.ABSORB_FINAL}),
                              L["is_hash"], L["a"], L["addr_b"], L["addr_c"], L["clk"],
                              L["v"], L["o"])
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


def memory_trace(acc: np.ndarray, slots: int = 1) -> np.ndarray:
    """MEMORY with ``slots`` accesses per row (vm/airs.py memory_layout): the accesses
    sorted by (address, time), then padding, access v in row v // slots, slot v % slots,
    over next_pow2(ceil(accesses / slots)) rows.  Within an address the gap limbs hold
    time' - time - 1; where the address steps (by exactly 1: the prologue reads every
    cell) they are 0."""
    if slots not in slot_menu("memory"):
        raise ValueError(f"MEMORY takes k in {slot_menu('memory')} slots, not {slots!r}")
    from . import tracekernels as K
    L = MEMORY_LAYOUT.idx
    acc = np.asarray(acc)
    k = acc.shape[0]
    n = _pow2(-(-k // slots)) * slots
    if acc.ndim == 2 and acc.shape[1] == 4 and acc.dtype == np.int64 and k:
        # compiled: a radix sort (the order of the lexsort below; not ok if an address or
        # time is outside [0, 2^31)) and one pass over the rows
        acc = np.ascontiguousarray(acc)
        order, ok = K.sort_order(acc)
        if ok:
            cols = [L[c] for c in ("addr", "time", "value", "is_write", "is_real", "gap_lo",
                                   "gap_hi")]
            full = sorted(cols) == list(range(MEMORY_LAYOUT.width))   # mem_fill writes all
            T = (np.empty if full else np.zeros)((n, MEMORY_LAYOUT.width), dtype=np.uint32)
            K.mem_fill(acc, order, T, *cols)
            return T.reshape(n // slots, slots * MEMORY_LAYOUT.width)
    order = np.lexsort((acc[:, 1], acc[:, 0]))
    acc = acc[order]
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


def range_counts(cpu: np.ndarray, mem: np.ndarray) -> np.ndarray:
    """RANGE's multiplicity column: how often each value 0..2^16-1 is sent on ``range16``.
    Mirrors the sends of vm/airs.py -- CPU: x, y, d of every LT row; MEMORY: gap_lo,
    gap_hi and 2^8 gap_hi of every real row."""
    from . import tracekernels as K
    L, M = CPU_LAYOUT.idx, MEMORY_LAYOUT.idx
    mem = mem.reshape(-1, MEMORY_LAYOUT.width)          # one access per row, any slots
    if cpu.ndim == 2 and cpu.dtype == np.uint32 and mem.dtype == np.uint32:
        counts, ok = K.range_bincount(np.ascontiguousarray(cpu), L["is_lt"], L["v"],
                                      L["v"] + 8, L["d"], np.ascontiguousarray(mem),
                                      M["is_real"], M["gap_lo"], M["gap_hi"], RANGE_SIZE)
        if ok:                  # else a value is out of range: the error below says which
            return counts.astype(np.uint32).reshape(-1, 1)
    lt = cpu[:, L["is_lt"]] == 1
    real = mem[:, M["is_real"]] == 1
    hi = mem[real, M["gap_hi"]].astype(np.int64)
    vals = np.concatenate([cpu[lt, L["v"]], cpu[lt, L["v"] + 8], cpu[lt, L["d"]],
                           mem[real, M["gap_lo"]], hi, hi << 8]).astype(np.int64)
    if vals.size and (vals.min() < 0 or vals.max() >= RANGE_SIZE):
        bad = vals[(vals < 0) | (vals >= RANGE_SIZE)][0]
        raise ValueError(f"range check of {bad} cannot succeed (not < 2^16)")
    return np.bincount(vals, minlength=RANGE_SIZE).astype(np.uint32).reshape(-1, 1)


def program_counts(cpu: np.ndarray, height: int) -> np.ndarray:
    L = CPU_LAYOUT.idx
    real = cpu[:, L["is_" + SELECTORS[0].lower()]:L["is_" + SELECTORS[-1].lower()] + 1].sum(1) > 0
    counts = np.bincount(cpu[real, L["pc"]].astype(np.int64), minlength=height)
    return counts.astype(np.uint32).reshape(-1, 1)


def poseidon2_trace(hash_in: np.ndarray, k: int = 1) -> np.ndarray:
    """POSEIDON2 with k slots (vm/airs.py p2_layout): permutation i in row i // k, slot
    i % k, over next_pow2(ceil(perms / k)) rows; the slots left over permute zero with
    mult 0."""
    if k not in slot_menu("poseidon2"):
        raise ValueError(f"POSEIDON2 takes k in {slot_menu('poseidon2')} slots, not {k!r}")
    from . import tracekernels as K
    perms = hash_in.shape[0]
    n = _pow2(-(-perms // k))
    # the permutations and the first all-zero padding state (the rest repeat its row), one
    # compiled pass writing every round's columns (vm/tracekernels.py p2_fill: the values
    # of vm/poseidon2.py permute_rows)
    m = min(perms + 1, n * k)
    states = np.zeros((m, WIDTH), dtype=np.uint32)
    states[:perms] = hash_in
    L = P2_LAYOUT.idx
    T = np.empty((n * k, P2_LAYOUT.width), dtype=np.uint32)
    if P2_LAYOUT.width != 2 * N_FULL_HALF * 32 + 16 + 2 * 13 + 1:
        T[:m] = 0                    # columns p2_fill does not write (it writes all but mult)
    T[:m, L["mult"]] = 0
    K.p2_fill(states, T, L["in"], np.array([L[f"cube{r}"] for r in range(2 * N_FULL_HALF)]),
              np.array([L[f"sbox{r}"] for r in range(2 * N_FULL_HALF)]), L["pcube"],
              L["psbox"], K.RCF_M, K.RCP_M, K.V16_M)
    T[m:] = T[m - 1]
    T[:perms, L["mult"]] = 1
    # one permutation per row of n * k rows, k consecutive rows side by side per row
    return T.reshape(n, k * P2_LAYOUT.width)


def committed_cells(air, rows: int) -> int:
    """Cells a table of ``rows`` rows commits: main, LogUp (4 per EF column) and
    quotient parts (4 each) -- per unit of blowup.  aux_width and num_parts are those of
    ``air``, i.e. of the log_blowup it was built for (its LogUp batching degree)."""
    return rows * (air.main_width + 4 * air.aux_width + 4 * air.num_parts)


def choose_slots(table: str, items: int, log_blowup: int = DEFAULT_LOG_BLOWUP) -> int:
    """The k in ``table``'s menu that commits the fewest cells for ``items`` rows' worth
    of work (rows = next_pow2(ceil(items / k))) with the AIRs of a proof at
    ``log_blowup`` (their aux and quotient-part columns); ties go to the smaller k."""
    best = None
    for k in slot_menu(table):
        cells = committed_cells(table_air(table, k, log_blowup), _pow2(-(-items // k)))
        if best is None or cells < best[0]:
            best = (cells, k)
    return best[1]


def memory_count(rec: ExecutionRecord) -> int:
    """The number of memory accesses of ``rec`` (the rows of :func:`memory_accesses`),
    counted from the executed opcodes: lane 0 of slots A, B, C for the opcodes that use
    them, lanes 1..7 of A for HASH and ABSORB_*, of B and C for HASH."""
    ops = np.asarray(rec.rom.rows)[np.asarray(rec.pc, dtype=np.int64), 0].astype(np.int64)
    counts = np.bincount(ops, minlength=isa.NUM_OPCODES)
    total = 0
    for op, c in enumerate(counts):
        per = (op in isa.READS_A) + (op in isa.READS_B) + (op in isa.WRITES_C)
        per += 7 * (op in (isa.HASH, isa.ABSORB_INIT, isa.ABSORB_FINAL)) + 14 * (op == isa.HASH)
        total += int(c) * per
    return total


def block_slots(rec: ExecutionRecord, slots: dict | None = None,
                accesses: int | None = None, log_blowup: int = DEFAULT_LOG_BLOWUP) -> dict:
    """k of every slotted table for a proof of ``rec`` at ``log_blowup``: the forced ones
    in ``slots`` (ValueError outside a table's menu), the rest by :func:`choose_slots`."""
    forced = {} if slots is None else dict(slots)
    check_slots(forced)
    items = {"poseidon2": int(rec.hash_in.shape[0]),
             "memory": memory_count(rec) if accesses is None else int(accesses)}
    return {name: int(forced[name]) if name in forced
            else choose_slots(name, items[name], log_blowup) for name in SLOTTED}


def build_traces(rec: ExecutionRecord, public_values: list[int] | None = None,
                 slots: dict | None = None,
                 log_blowup: int = DEFAULT_LOG_BLOWUP) -> BlockTraces:
    """AIRs, traces and public values for a proof of ``rec.block`` at ``log_blowup`` (the
    AIRs' LogUp batching depends on it: vm/airs.py block_airs).  ``public_values``
    defaults to the block's (claimed outputs included) with the executed final digest;
    pass others to build a deliberately false statement.  ``slots`` forces a table's k
    (vm/airs.py SLOTTED); a slotted table not named gets the k that commits the fewest
    cells (:func:`choose_slots`)."""
    if public_values is None:
        public_values = block_public_values(rec.block, rec.rom, rec.final_digest)
    if len(public_values) != NUM_PUBLIC_VALUES:
        raise ValueError(f"expected {NUM_PUBLIC_VALUES} public values, got {len(public_values)}")
    cpu = cpu_trace(rec, public_values[PV_MAX_CYCLES])
    acc = memory_accesses(cpu)
    slots = block_slots(rec, slots, accesses=acc.shape[0], log_blowup=log_blowup)
    airs = block_airs(rec.rom.rows, slots, log_blowup)
    mem = memory_trace(acc, slots["memory"])
    prog = program_counts(cpu, airs[1].fixed_height)
    rng = range_counts(cpu, mem)
    p2 = poseidon2_trace(rec.hash_in, slots["poseidon2"])
    pv = [int(x) for x in public_values]
    table_pv = [pv, [], [pv[0]], [], []]
    return BlockTraces(airs, [cpu, prog, mem, rng, p2], table_pv, pv)


__all__ = ["BlockTraces", "build_traces", "cpu_trace", "memory_accesses", "memory_trace",
           "range_counts", "program_counts", "poseidon2_trace", "choose_slots", "committed_cells",
           "block_slots", "memory_count"]
