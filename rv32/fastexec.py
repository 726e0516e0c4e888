"""The RV32IM interpreter loop compiled (numba): what :func:`rv32.execute` runs.

Exactly the semantics of the reference interpreter :mod:`rv32.interp` -- registers,
memory, outputs, exit code, errors with pc and cycle, and the record -- in one compiled
function, :func:`_run`, with two modes chosen by its ``keep`` argument: execute-only and
keeping the record (:mod:`rv32.record`).

How it is fast:

* **Predecoded code.**  Instructions are fetched from the program image only (stores never
  change them, docs/rv32.md), so each code word is decoded once, on first execution, by
  the compiled :func:`rv32.isa.decode_fields` -- the reference's own decoder -- into one
  int64 (op | rd << 8 | rs1 << 13 | rs2 << 18 | DECODED | imm << 32); the loop reads one
  array element per instruction.  The executable segments are concatenated into one word
  array; the loop keeps the current segment's bounds and searches the segment table only
  when pc leaves them.
* **Paged memory.**  A page table int32[2^20] maps each 4 KiB page to a row of a pool of
  uint32[1024] pages; entry 0 is a page of zeros that is never written, so a load from a
  page nobody wrote reads zeros without allocating, and a store allocates.
* **Resumable, no growing arrays in compiled code.**  The pool, the output buffers and the
  ECALL arrays are the caller's.  When one is full the loop saves its state and returns
  :data:`NEED_ROOM` *before* the instruction has any effect; :func:`run` enlarges that
  buffer and calls again (the per-cycle record is sized max_cycles up front: np.empty maps
  pages lazily, only the written prefix becomes resident, and the Record's arrays are
  views of those prefixes).
* A failure returns its ``ERR_*`` code and detail values; :func:`run` raises
  :func:`rv32.errors.execution_error` with them, the same text the reference builds.

Poseidon2 (the precompile) calls the verifier's compiled permutation
(verifier/poseidon2.py ``_permute_lanes``, one state, Montgomery form).  The host is assumed little-endian (the pool's bytes are the memory's bytes).

numba's on-disk cache keys ``_run`` on this file only, not on the functions it calls: the
files of those (rv32/isa.py's decoder, the verifier's permutation) are stamped into its
index as well (``adopt(..., depends=...)`` below), so an edit to either recompiles it.
"""
from __future__ import annotations

import sys

import numpy as np
from numba import njit

from steadfast._jit_cache import adopt

from ..verifier.poseidon2 import _from_mont, _permute_lanes, _to_mont

from . import abi, isa
from .errors import (ERR_BUFFER, ERR_CANONICAL, ERR_CYCLES, ERR_FETCH, ERR_ILLEGAL,
                     ERR_JUMP, ERR_MISALIGNED, ERR_OUTPUT, ERR_POINTER, ERR_SYSCALL, OK,
                     execution_error)
from .execution import Execution
from .memory import NUM_PAGES, PAGE_SIZE, Memory
from .record import CYCLE_FIELDS, Record

if sys.byteorder != "little":                       # pragma: no cover
    raise ImportError("rv32.fastexec needs a little-endian host")

NEED_ROOM = 100
# which buffer NEED_ROOM asks for (state[S_NEED]); detail[0] = how many more entries
ROOM_PAGES, ROOM_OUT, ROOM_ERR, ROOM_ECALL, ROOM_EMEM = 1, 2, 3, 4, 5

# the state vector (int64[16]) shared by run and _run
S_PC, S_CYCLE, S_PAGES, S_IN_POS, S_OUT, S_ERR, S_ECALLS, S_EMEM, S_EXIT, S_NEED = range(10)
STATE_LEN = 16

_DECODED = 1 << 23
_MASK = abi.MASK
_P = abi.P
_decode = njit(cache=True)(isa.decode_fields)

(_ADD, _SUB, _SLL, _SLT, _SLTU, _XOR, _SRL, _SRA, _OR, _AND, _MUL, _MULH, _MULHSU, _MULHU,
 _DIV, _DIVU, _REM, _REMU) = range(1, 19)
_I_FIRST, _I_LAST = isa.I_FIRST, isa.I_LAST
_LB, _LH, _LW, _LBU, _LHU = isa.LB, isa.LH, isa.LW, isa.LBU, isa.LHU
_SB, _SH, _SW = isa.SB, isa.SH, isa.SW
_BEQ, _BNE, _BLT, _BGE, _BLTU, _BGEU = isa.BEQ, isa.BNE, isa.BLT, isa.BGE, isa.BLTU, isa.BGEU
_LUI, _AUIPC, _JAL, _JALR, _FENCE, _ECALL = (isa.LUI, isa.AUIPC, isa.JAL, isa.JALR,
                                             isa.FENCE, isa.ECALL)
_SYS_READ, _SYS_WRITE, _SYS_EXIT, _SYS_EXIT_GROUP, _SYS_POSEIDON2 = (
    abi.SYS_READ, abi.SYS_WRITE, abi.SYS_EXIT, abi.SYS_EXIT_GROUP, abi.SYS_POSEIDON2)
_NEG_EBADF = abi.NEG_EBADF
_MAX_OUT = abi.MAX_OUTPUT_BYTES


@njit(cache=True)
def _run(keep, max_cycles, cwords, dec, segs, regs, state, ptab, pool, inp, out, err, rec,
         e_cycle, e_args, emem, detail):
    """Run from ``state`` until exit, a failure or a full buffer (module docstring).
    cwords uint32[n] / dec int64[n]: the code words and their decodings (0 = not yet);
    segs int64[k, 3]: (start, end, index of start's word) of each code range; regs
    int64[32]; state int64[STATE_LEN]; ptab int32[2^20]; pool uint32[P, 1024] (rows >=
    state[S_PAGES] are zero); inp, out, err uint8; when ``keep``: rec uint32[9, max_cycles],
    e_cycle uint32[E], e_args uint32[E, 5], emem uint32[5, M].  Returns the status."""
    pc = state[S_PC]
    cycle = state[S_CYCLE]
    npages = state[S_PAGES]
    cap_pages = pool.shape[0]
    cs = 0
    ce = 0
    cb = 0
    nseg = segs.shape[0]
    status = OK
    pst = np.empty((16, 1), np.uint64)
    while True:
        if cycle >= max_cycles:
            status = ERR_CYCLES
            detail[0] = max_cycles
            break
        # ---------------------------------------------------------------- fetch, decode
        if pc < cs or pc >= ce:
            found = False
            for k in range(nseg):
                if segs[k, 0] <= pc and pc < segs[k, 1]:
                    cs = segs[k, 0]
                    ce = segs[k, 1]
                    cb = segs[k, 2]
                    found = True
                    break
            if not found:
                status = ERR_FETCH
                break
        i = cb + ((pc - cs) >> 2)
        d = dec[i]
        if d == 0:
            o, f_rd, f_rs1, f_rs2, f_imm = _decode(np.int64(cwords[i]))
            d = o | (f_rd << 8) | (f_rs1 << 13) | (f_rs2 << 18) | _DECODED | (f_imm << 32)
            dec[i] = d
        op = d & 0xFF
        rd = (d >> 8) & 31
        a = regs[(d >> 13) & 31]
        b = regs[(d >> 18) & 31]
        rb = b                          # x[rs2] for the record (rs2 = 0: no rs2 field)
        imm = d >> 32
        npc = (pc + 4) & _MASK
        val = 0
        wr = False
        maddr = 0
        mb = 0
        ma = 0
        # ---------------------------------------------------------------- execute
        if op <= _I_LAST:
            if op == 0:
                status = ERR_ILLEGAL
                detail[0] = cwords[i]
                break
            if op >= _I_FIRST:
                op -= 18
                b = imm & _MASK
            wr = True
            if op == _ADD:
                val = (a + b) & _MASK
            elif op == _SUB:
                val = (a - b) & _MASK
            elif op == _SLL:
                val = (a << (b & 31)) & _MASK
            elif op == _SLT:
                val = 1 if (a ^ 0x80000000) < (b ^ 0x80000000) else 0
            elif op == _SLTU:
                val = 1 if a < b else 0
            elif op == _XOR:
                val = a ^ b
            elif op == _SRL:
                val = a >> (b & 31)
            elif op == _SRA:
                val = ((a - ((a >> 31) << 32)) >> (b & 31)) & _MASK
            elif op == _OR:
                val = a | b
            elif op == _AND:
                val = a & b
            elif op == _MUL:
                val = (a * b) & _MASK
            elif op == _MULH:
                val = (((a - ((a >> 31) << 32)) * (b - ((b >> 31) << 32))) >> 32) & _MASK
            elif op == _MULHSU:
                val = (((a - ((a >> 31) << 32)) * b) >> 32) & _MASK
            elif op == _MULHU:
                val = (((a >> 16) * b + (((a & 0xFFFF) * b) >> 16)) >> 16) & _MASK
            elif op == _DIVU:
                val = _MASK if b == 0 else a // b
            elif op == _REMU:
                val = a if b == 0 else a % b
            else:                                   # DIV, REM
                sa = a - ((a >> 31) << 32)
                sb = b - ((b >> 31) << 32)
                if b == 0:
                    q = -1
                    r = sa
                elif sa == -2147483648 and sb == -1:
                    q = sa
                    r = 0
                else:
                    q = abs(sa) // abs(sb)
                    if (sa < 0) != (sb < 0):
                        q = -q
                    r = sa - q * sb
                val = (q if op == _DIV else r) & _MASK
        elif op <= _LHU:                            # loads
            maddr = (a + imm) & _MASK
            if op == _LW:
                size = 4
            elif op == _LH or op == _LHU:
                size = 2
            else:
                size = 1
            if maddr & (size - 1):
                status = ERR_MISALIGNED
                detail[0] = maddr
                detail[1] = size
                detail[2] = 0
                break
            mb = np.int64(pool[ptab[maddr >> 12], (maddr >> 2) & 1023])
            ma = mb
            sh = (maddr & 3) << 3
            if op == _LW:
                val = mb
            elif op == _LBU:
                val = (mb >> sh) & 0xFF
            elif op == _LHU:
                val = (mb >> sh) & 0xFFFF
            elif op == _LB:
                v = (mb >> sh) & 0xFF
                val = (v - ((v & 0x80) << 1)) & _MASK
            else:
                v = (mb >> sh) & 0xFFFF
                val = (v - ((v & 0x8000) << 1)) & _MASK
            wr = True
        elif op <= _SW:                             # stores
            maddr = (a + imm) & _MASK
            size = 4 if op == _SW else (2 if op == _SH else 1)
            if maddr & (size - 1):
                status = ERR_MISALIGNED
                detail[0] = maddr
                detail[1] = size
                detail[2] = 1
                break
            pn = maddr >> 12
            pi = ptab[pn]
            if pi == 0:
                if npages >= cap_pages:
                    status = NEED_ROOM
                    state[S_NEED] = ROOM_PAGES
                    detail[0] = 1
                    break
                pi = npages
                ptab[pn] = pi
                npages += 1
            wi = (maddr >> 2) & 1023
            mb = np.int64(pool[pi, wi])
            if size == 4:
                ma = b
            else:
                sh = (maddr & 3) << 3
                fm = (0xFFFF if size == 2 else 0xFF) << sh
                ma = (mb & ~fm) | ((b << sh) & fm)
            pool[pi, wi] = np.uint32(ma)
        elif op <= _BGEU:                           # branches
            if op == _BEQ:
                taken = a == b
            elif op == _BNE:
                taken = a != b
            elif op == _BLT:
                taken = (a ^ 0x80000000) < (b ^ 0x80000000)
            elif op == _BGE:
                taken = (a ^ 0x80000000) >= (b ^ 0x80000000)
            elif op == _BLTU:
                taken = a < b
            else:
                taken = a >= b
            if taken:
                npc = (pc + imm) & _MASK
                if npc & 3:
                    status = ERR_JUMP
                    detail[0] = npc
                    break
        elif op == _JAL or op == _JALR:
            val = npc
            wr = True
            if op == _JAL:
                npc = (pc + imm) & _MASK
            else:
                npc = (a + imm) & 0xFFFFFFFE
            if npc & 3:
                status = ERR_JUMP
                detail[0] = npc
                break
        elif op == _LUI:
            val = imm & _MASK
            wr = True
        elif op == _AUIPC:
            val = (pc + imm) & _MASK
            wr = True
        elif op == _FENCE:
            pass
        else:                                       # ECALL
            n = regs[17]
            a0 = regs[10]
            a1 = regs[11]
            a2 = regs[12]
            ne = state[S_ECALLS]
            nm = state[S_EMEM]
            if keep and ne >= e_cycle.shape[0]:
                status = NEED_ROOM
                state[S_NEED] = ROOM_ECALL
                detail[0] = 1
                break
            res = 0
            if n == _SYS_READ:
                if a0 != 0:
                    res = _NEG_EBADF
                else:
                    if a1 + a2 > 4294967296:
                        status = ERR_BUFFER
                        detail[0] = n
                        detail[1] = a1
                        detail[2] = a2
                        break
                    k = min(a2, inp.shape[0] - state[S_IN_POS])
                    nw = 0 if k == 0 else (((a1 + k + 3) >> 2) - (a1 >> 2))
                    if npages + (k >> 12) + 2 > cap_pages:
                        status = NEED_ROOM
                        state[S_NEED] = ROOM_PAGES
                        detail[0] = (k >> 12) + 2
                        break
                    if keep and nm + nw > emem.shape[1]:
                        status = NEED_ROOM
                        state[S_NEED] = ROOM_EMEM
                        detail[0] = nw
                        break
                    src = state[S_IN_POS] - a1
                    end = a1 + k
                    w = a1 & ~3
                    for _ in range(nw):
                        pn = w >> 12
                        pi = ptab[pn]
                        if pi == 0:
                            pi = npages
                            ptab[pn] = pi
                            npages += 1
                        wi = (w >> 2) & 1023
                        before = np.int64(pool[pi, wi])
                        after = before
                        for t in range(max(w, a1), min(w + 4, end)):
                            s8 = (t & 3) << 3
                            after = (after & ~(0xFF << s8)) | (np.int64(inp[src + t]) << s8)
                        pool[pi, wi] = np.uint32(after)
                        if keep:
                            emem[0, nm] = ne
                            emem[1, nm] = w
                            emem[2, nm] = before
                            emem[3, nm] = after
                            emem[4, nm] = 1
                            nm += 1
                        w += 4
                    state[S_IN_POS] += k
                    res = k
            elif n == _SYS_WRITE:
                if a0 != 1 and a0 != 2:
                    res = _NEG_EBADF
                else:
                    if a1 + a2 > 4294967296:
                        status = ERR_BUFFER
                        detail[0] = n
                        detail[1] = a1
                        detail[2] = a2
                        break
                    slot = S_OUT if a0 == 1 else S_ERR
                    have = state[slot]
                    if have + a2 > _MAX_OUT:
                        status = ERR_OUTPUT
                        detail[0] = a0
                        detail[1] = have + a2
                        break
                    sink = out if a0 == 1 else err
                    if have + a2 > sink.shape[0]:
                        status = NEED_ROOM
                        state[S_NEED] = ROOM_OUT if a0 == 1 else ROOM_ERR
                        detail[0] = a2
                        break
                    nw = 0 if a2 == 0 else (((a1 + a2 + 3) >> 2) - (a1 >> 2))
                    if keep and nm + nw > emem.shape[1]:
                        status = NEED_ROOM
                        state[S_NEED] = ROOM_EMEM
                        detail[0] = nw
                        break
                    end = a1 + a2
                    w = a1 & ~3
                    for _ in range(nw):
                        v = np.int64(pool[ptab[w >> 12], (w >> 2) & 1023])
                        for t in range(max(w, a1), min(w + 4, end)):
                            sink[have + t - a1] = np.uint8((v >> ((t & 3) << 3)) & 0xFF)
                        if keep:
                            emem[0, nm] = ne
                            emem[1, nm] = w
                            emem[2, nm] = v
                            emem[3, nm] = v
                            emem[4, nm] = 0
                            nm += 1
                        w += 4
                    state[slot] = have + a2
                    res = a2
            elif n == _SYS_EXIT or n == _SYS_EXIT_GROUP:
                state[S_EXIT] = a0 & 0xFF
                res = a0
                npc = pc
            elif n == _SYS_POSEIDON2:
                if a0 & 3 or a1 & 3:
                    status = ERR_POINTER
                    detail[0] = n
                    detail[1] = a0 if a0 & 3 else a1
                    break
                if a0 + 64 > 4294967296 or a1 + 32 > 4294967296:
                    status = ERR_BUFFER
                    detail[0] = n
                    detail[1] = a0 if a0 + 64 > 4294967296 else a1
                    detail[2] = 64 if a0 + 64 > 4294967296 else 32
                    break
                if npages + 2 > cap_pages:
                    status = NEED_ROOM
                    state[S_NEED] = ROOM_PAGES
                    detail[0] = 2
                    break
                if keep and nm + 24 > emem.shape[1]:
                    status = NEED_ROOM
                    state[S_NEED] = ROOM_EMEM
                    detail[0] = 24
                    break
                bad = -1
                for j in range(16):
                    w = a0 + 4 * j
                    v = np.int64(pool[ptab[w >> 12], (w >> 2) & 1023])
                    if v >= _P and bad < 0:
                        bad = j
                    pst[j, 0] = _to_mont(np.uint64(v))
                if bad >= 0:
                    w = a0 + 4 * bad
                    status = ERR_CANONICAL
                    detail[0] = w
                    detail[1] = pool[ptab[w >> 12], (w >> 2) & 1023]
                    break
                if keep:
                    for j in range(16):
                        w = a0 + 4 * j
                        v = np.int64(pool[ptab[w >> 12], (w >> 2) & 1023])
                        emem[0, nm] = ne
                        emem[1, nm] = w
                        emem[2, nm] = v
                        emem[3, nm] = v
                        emem[4, nm] = 0
                        nm += 1
                _permute_lanes(pst, pst.shape[1])   # an int64: the verifier's one signature
                for j in range(8):
                    w = a1 + 4 * j
                    pn = w >> 12
                    pi = ptab[pn]
                    if pi == 0:
                        pi = npages
                        ptab[pn] = pi
                        npages += 1
                    wi = (w >> 2) & 1023
                    after = np.uint32(_from_mont(pst[j, 0]))
                    if keep:
                        emem[0, nm] = ne
                        emem[1, nm] = w
                        emem[2, nm] = pool[pi, wi]
                        emem[3, nm] = after
                        emem[4, nm] = 1
                        nm += 1
                    pool[pi, wi] = after
                res = 0
            else:
                status = ERR_SYSCALL
                detail[0] = n
                break
            regs[10] = res
            if keep:
                e_cycle[ne] = cycle
                e_args[ne, 0] = n
                e_args[ne, 1] = a0
                e_args[ne, 2] = a1
                e_args[ne, 3] = a2
                e_args[ne, 4] = res
                state[S_ECALLS] = ne + 1
                state[S_EMEM] = nm
        # ---------------------------------------------------------------- retire
        if wr and rd != 0:
            regs[rd] = val
        else:
            val = 0
        if keep:
            rec[0, cycle] = pc
            rec[1, cycle] = cwords[i]
            rec[2, cycle] = a
            rec[3, cycle] = rb
            rec[4, cycle] = val
            rec[5, cycle] = maddr
            rec[6, cycle] = mb
            rec[7, cycle] = ma
            rec[8, cycle] = npc
        cycle += 1
        if state[S_EXIT] >= 0:
            break
        pc = npc
    state[S_PC] = pc
    state[S_CYCLE] = cycle
    state[S_PAGES] = npages
    return status


# ----------------------------------------------------------------------------- the caller

def _code(program):
    """(cwords, segs) of the program's executable ranges (docstring of :func:`_run`)."""
    ranges = program.code_ranges()
    segs = np.zeros((max(len(ranges), 1), 3), np.int64)
    chunks = []
    at = 0
    for k, (start, data) in enumerate(ranges):
        words = np.frombuffer(data, dtype="<u4")
        segs[k] = (start, start + 4 * words.size, at)
        chunks.append(words)
        at += words.size
    if not ranges:
        segs[0] = (0, 0, 0)                 # (a Program always has one: its entry's)
    cwords = np.ascontiguousarray(np.concatenate(chunks) if chunks else np.zeros(1, np.uint32),
                                  dtype=np.uint32)
    return cwords, segs


def _image(program, spare: int):
    """(ptab, pool, pages used) holding the program's non-zero bytes, with ``spare`` free
    pages."""
    ptab = np.zeros(NUM_PAGES, np.int32)
    pages = []
    for s in program.segments:
        data = s.initialised
        if data:
            first, last = s.address >> 12, (s.address + len(data) - 1) >> 12
            pages.extend(range(first, last + 1))
    pages = sorted(set(pages))
    pool = np.zeros((1 + len(pages) + spare, PAGE_SIZE // 4), np.uint32)
    ptab[pages] = np.arange(1, len(pages) + 1, dtype=np.int32)
    flat = pool.reshape(-1).view(np.uint8)
    for s in program.segments:
        data = s.initialised
        done = 0
        while done < len(data):
            addr = s.address + done
            k = min(PAGE_SIZE - (addr & 0xFFF), len(data) - done)
            at = int(ptab[addr >> 12]) * PAGE_SIZE + (addr & 0xFFF)
            flat[at:at + k] = np.frombuffer(data, np.uint8, k, done)
            done += k
    return ptab, pool, 1 + len(pages)


def _grown(arr: np.ndarray, used: int, need: int, axis: int = 0) -> np.ndarray:
    """A zero array like ``arr`` with room for ``used + need`` along ``axis`` (at least
    doubled), holding ``arr``'s first ``used`` entries."""
    size = max(2 * arr.shape[axis], used + need)
    shape = list(arr.shape)
    shape[axis] = size
    new = np.zeros(shape, arr.dtype)
    idx = [slice(None)] * arr.ndim
    idx[axis] = slice(0, used)
    new[tuple(idx)] = arr[tuple(idx)]
    return new


def drive(record, limit, cwords, dec, segs, regs, state, ptab, b: dict, inp, detail) -> int:
    """Run the loop from ``state`` until it stops for another reason than a full buffer,
    enlarging the buffers in ``b`` (pool, out, err, rec, e_cycle, e_args, emem) as it
    asks; returns the status (shared by :func:`run` and rv32.segments)."""
    while True:
        status = _run(record, limit, cwords, dec, segs, regs, state, ptab, b["pool"], inp,
                      b["out"], b["err"], b["rec"], b["e_cycle"], b["e_args"], b["emem"],
                      detail)
        if status != NEED_ROOM:
            return status
        need, more = int(state[S_NEED]), int(detail[0])
        if need == ROOM_PAGES:
            b["pool"] = _grown(b["pool"], int(state[S_PAGES]), more)
        elif need == ROOM_OUT:
            b["out"] = _grown(b["out"], int(state[S_OUT]), more)
        elif need == ROOM_ERR:
            b["err"] = _grown(b["err"], int(state[S_ERR]), more)
        elif need == ROOM_ECALL:
            b["e_cycle"] = _grown(b["e_cycle"], int(state[S_ECALLS]), more)
            b["e_args"] = _grown(b["e_args"], int(state[S_ECALLS]), more)
        else:
            b["emem"] = _grown(b["emem"], int(state[S_EMEM]), more, axis=1)


def record_of(b: dict, state, cycles: int, input: bytes, output: bytes) -> Record:
    """The Record of a run's first ``cycles`` cycles from the buffers in ``b``: views, not
    copies, of the per-cycle buffer (only its written prefix is resident)."""
    rec, e_cycle, e_args, emem = b["rec"], b["e_cycle"], b["e_args"], b["emem"]
    ne, nm = int(state[S_ECALLS]), int(state[S_EMEM])
    cols = {name: rec[k, :cycles] for k, name in enumerate(CYCLE_FIELDS)}
    return Record(ecall_cycle=e_cycle[:ne].copy(), ecall_args=e_args[:ne].copy(),
                  ecall_mem_event=emem[0, :nm].copy(), ecall_mem_word_addr=emem[1, :nm].copy(),
                  ecall_mem_before=emem[2, :nm].copy(), ecall_mem_after=emem[3, :nm].copy(),
                  ecall_mem_is_write=emem[4, :nm].copy(), input=bytes(input), output=output,
                  **cols)


def run(program, input: bytes = b"", max_cycles: int = abi.DEFAULT_MAX_CYCLES,
        record: bool = False) -> Execution:
    """Execute ``program`` on the compiled loop; the same results and errors as
    :func:`rv32.interp.run`."""
    max_cycles = abi.check_run_limits(input, max_cycles)
    cwords, segs = _code(program)
    dec = np.zeros(cwords.shape[0], np.int64)
    ptab, pool, used = _image(program, 64)
    regs = np.zeros(32, np.int64)
    regs[abi.SP] = abi.STACK_TOP
    state = np.zeros(STATE_LEN, np.int64)
    state[S_PC] = program.entry
    state[S_PAGES] = used
    state[S_EXIT] = -1
    inp = np.frombuffer(bytes(input), np.uint8).copy()    # writable: one compiled signature
    out = np.zeros(256, np.uint8)
    err = np.zeros(256, np.uint8)
    if record:
        rec = np.empty((len(CYCLE_FIELDS), max_cycles), np.uint32)
        e_cycle = np.zeros(64, np.uint32)
        e_args = np.zeros((64, 5), np.uint32)
        emem = np.zeros((5, 1024), np.uint32)
    else:
        rec = np.zeros((len(CYCLE_FIELDS), 1), np.uint32)
        e_cycle = np.zeros(1, np.uint32)
        e_args = np.zeros((1, 5), np.uint32)
        emem = np.zeros((5, 1), np.uint32)
    detail = np.zeros(4, np.int64)
    b = {"pool": pool, "out": out, "err": err, "rec": rec, "e_cycle": e_cycle,
         "e_args": e_args, "emem": emem}
    status = drive(record, max_cycles, cwords, dec, segs, regs, state, ptab, b, inp, detail)
    pool, out, err = b["pool"], b["out"], b["err"]
    pc, cycles = int(state[S_PC]), int(state[S_CYCLE])
    if status != OK:
        raise execution_error(status, pc, cycles, detail)
    nout, nerr = int(state[S_OUT]), int(state[S_ERR])
    output = out[:nout].tobytes()
    memory = Memory({int(pn): bytearray(pool[ptab[pn]].tobytes())
                     for pn in np.flatnonzero(ptab)})
    rec_out = None
    if record:
        rec_out = record_of(b, state, cycles, input, output)
    return Execution(cycles=cycles, exit_code=int(state[S_EXIT]), output=output,
                     stderr=err[:nerr].tobytes(), regs=regs, pc=pc, memory=memory,
                     record=rec_out)


__all__ = ["run", "drive", "record_of"]


# cache hits start numba's runtime only, not its compiler (steadfast/_jit_cache.py)
adopt(globals(), depends=("../verifier/poseidon2.py", "isa.py"))
