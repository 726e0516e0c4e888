"""Python models of the guests (written from the formats documented in guests/*.c, not
from their code), the bench guest's cycle formula and an input maker for it.

Each ``*_model(data) -> (output bytes, exit code)`` gives what the guest must produce for
the input ``data``; tests/test_guests.py checks the ELFs against them.  sha256, sort and
hello use hashlib / sorted / slicing; merkle and bench take the Poseidon2 compression
as an argument (``poseidon2_compress`` below: lanes 0..7 of the width-16 permutation,
written from the SPEC with the project's constants; tests/test_guests.py checks it
against the project's known-answer vector and the machine's results).
"""
from __future__ import annotations

import hashlib
import struct
from typing import Callable, Sequence

P = 2013265921
M32 = 0xFFFFFFFF
Compress = Callable[[Sequence[int]], Sequence[int]]   # 16 words -> (at least) 8 words


# --------------------------------------------------------------------------- Poseidon2

def poseidon2_permute(state: Sequence[int]) -> list[int]:
    """The width-16 BabyBear Poseidon2 permutation (docs' SPEC §2, as the VM's HASH and the
    machine's SYS_POSEIDON2 use it) over Python ints:  s = M_E(in);  4 full rounds;
    13 partial rounds;  4 full rounds.  Full: s_i = (s_i + rc_i)^7 for every lane, then
    M_E; partial: s_0 = (s_0 + rc)^7, then M_I.  M_E = circ(2,3,1,1) on each 4-lane block
    plus the sum over blocks of each lane position; M_I = J + diag(V16).  Only the
    constants come from the project (kernels/poseidon2_constants.py: the Grain LFSR
    constants and V16; importing it compiles nothing)."""
    from steadfast.kernels.poseidon2_constants import RC_FULL, RC_PARTIAL, V16

    def m_e(v: list[int]) -> list[int]:
        blocks = []
        for k in range(4):
            a, b, c, d = v[4 * k:4 * k + 4]
            blocks.append([2 * a + 3 * b + c + d, a + 2 * b + 3 * c + d,
                           a + b + 2 * c + 3 * d, 3 * a + b + c + 2 * d])
        sums = [sum(blk[i] for blk in blocks) for i in range(4)]
        return [(blocks[k][i] + sums[i]) % P for k in range(4) for i in range(4)]

    def m_i(v: list[int]) -> list[int]:
        total = sum(v)
        return [(total + int(V16[i]) * v[i]) % P for i in range(16)]

    s = m_e([int(x) % P for x in state])
    for r in range(8):
        if r == 4:
            for rc in RC_PARTIAL:
                s[0] = pow((s[0] + int(rc)) % P, 7, P)
                s = m_i(s)
        s = m_e([pow((s[i] + int(RC_FULL[r][i])) % P, 7, P) for i in range(16)])
    return s


def poseidon2_compress(words: Sequence[int]) -> list[int]:
    """SYS_POSEIDON2: lanes 0..7 of the permutation of 16 words (each < p)."""
    assert len(words) == 16 and all(0 <= w < P for w in words)
    return poseidon2_permute(words)[:8]


# --------------------------------------------------------------------------- simple ones

def hello_model(data: bytes) -> tuple[bytes, int]:
    return b"hello from rv32im\n" + data[::-1], 0


def sha256_model(data: bytes) -> tuple[bytes, int]:
    return hashlib.sha256(data).digest(), 0


def sort_input(values: Sequence[int]) -> bytes:
    return struct.pack(f"<I{len(values)}I", len(values), *values)


def sort_model(data: bytes) -> tuple[bytes, int]:
    if len(data) < 4 or (len(data) - 4) % 4 or (len(data) - 4) // 4 != \
            struct.unpack_from("<I", data)[0]:
        return b"", 1
    n = (len(data) - 4) // 4
    return struct.pack(f"<{n}I", *sorted(struct.unpack_from(f"<{n}I", data, 4))), 0


# --------------------------------------------------------------------------- transfer

OK, UNKNOWN_SENDER, UNKNOWN_RECIPIENT, SELF_TRANSFER, BAD_NONCE, NONCE_EXHAUSTED, \
    INSUFFICIENT_BALANCE, RECIPIENT_OVERFLOW = range(8)


def transfer_input(accounts: Sequence[tuple[int, int, int]],
                   transfers: Sequence[tuple[int, int, int, int]]) -> bytes:
    """accounts: (id, nonce, balance); transfers: (from, to, nonce, amount)."""
    out = [struct.pack("<I", len(accounts))]
    out += [struct.pack("<IIQ", i, n, b) for i, n, b in accounts]
    out.append(struct.pack("<I", len(transfers)))
    out += [struct.pack("<IIIQ", f, t, n, a) for f, t, n, a in transfers]
    return b"".join(out)


def transfer_model(data: bytes) -> tuple[bytes, int]:
    try:
        (n_acc,) = struct.unpack_from("<I", data, 0)
        accs = [list(struct.unpack_from("<IIQ", data, 4 + 16 * i)) for i in range(n_acc)]
        off = 4 + 16 * n_acc
        (n_tx,) = struct.unpack_from("<I", data, off)
        txs = [struct.unpack_from("<IIIQ", data, off + 4 + 20 * i) for i in range(n_tx)]
    except struct.error:
        return b"", 255
    if len(data) != off + 4 + 20 * n_tx:
        return b"", 255
    ids = [a[0] for a in accs]
    if any(a >= b for a, b in zip(ids, ids[1:])):
        return b"", 255
    by_id = {a[0]: a for a in accs}
    status = []
    for frm, to, nonce, amount in txs:
        s, r = by_id.get(frm), by_id.get(to)
        if s is None:
            st = UNKNOWN_SENDER
        elif r is None:
            st = UNKNOWN_RECIPIENT
        elif frm == to:
            st = SELF_TRANSFER
        elif nonce != s[1]:
            st = BAD_NONCE
        elif s[1] == M32:
            st = NONCE_EXHAUSTED
        elif amount > s[2]:
            st = INSUFFICIENT_BALANCE
        elif r[2] + amount >= 1 << 64:
            st = RECIPIENT_OVERFLOW
        else:
            st = OK
            s[2] -= amount
            r[2] += amount
            s[1] += 1
        status.append(st)
    state = struct.pack("<I", n_acc) + b"".join(struct.pack("<IIQ", *a) for a in accs)
    return state + bytes(status), sum(s != OK for s in status) & 0xFF


# --------------------------------------------------------------------------- merkle

def merkle_input(leaves: Sequence[Sequence[int]]) -> bytes:
    return struct.pack("<I", len(leaves)) + b"".join(struct.pack("<8I", *l) for l in leaves)


def merkle_root(leaves: Sequence[Sequence[int]], compress: Compress) -> list[int]:
    level = [list(l) for l in leaves]
    while len(level) > 1:
        nxt = [list(compress(level[i] + level[i + 1])[:8]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def merkle_model(data: bytes, compress: Compress) -> tuple[bytes, int]:
    if len(data) < 4 or (len(data) - 4) % 32:
        return b"", 1
    n = struct.unpack_from("<I", data)[0]
    if n == 0 or (len(data) - 4) // 32 != n:
        return b"", 1
    words = struct.unpack_from(f"<{8 * n}I", data, 4)
    if any(w >= P for w in words):
        return b"", 2
    leaves = [list(words[8 * i:8 * i + 8]) for i in range(n)]
    return struct.pack("<8I", *merkle_root(leaves, compress)), 0


# --------------------------------------------------------------------------- bench

# Constant part of the bench guest's cycle count: everything outside the per-iteration
# loop (start-up, reading the header, seeding, the output, exit), measured with
# guests/emu.py and pinned by tests/test_guests.py (changes only if bench.c, the runtime
# or the compiler flags change).
BENCH_BASE = 302
BENCH_PER_ITER = 10                       # outer loop + the four unit loops' set-up
BENCH_UNIT = {"alu": 10, "mem": 11, "mul": 15, "p2": 7}
BENCH_MEM_LOG2_MAX = 16


def bench_cycles(iters: int, alu: int, mem: int, mul: int, p2: int) -> int:
    """Exact retired-instruction count of guests/bin/bench.elf (exit ECALL included)."""
    per = BENCH_PER_ITER + alu * BENCH_UNIT["alu"] + mem * BENCH_UNIT["mem"] \
        + mul * BENCH_UNIT["mul"] + p2 * BENCH_UNIT["p2"]
    return BENCH_BASE + iters * per


def bench_header(iters: int, alu: int, mem: int, mul: int, p2: int, mem_log2: int = 10,
                 seed: int = 1) -> bytes:
    return struct.pack("<7I", iters, alu, mem, mul, p2, mem_log2, seed)


def bench_input(target_cycles: int, alu: int = 8, mem: int = 4, mul: int = 2, p2: int = 1,
                mem_log2: int = 10, seed: int = 1) -> tuple[bytes, int]:
    """The bench input whose cycle count is the largest not above ``target_cycles`` for
    this per-iteration mix (at least one iteration); returns (input, exact cycles)."""
    per = bench_cycles(1, alu, mem, mul, p2) - BENCH_BASE
    iters = max(1, (target_cycles - BENCH_BASE) // per)
    return (bench_header(iters, alu, mem, mul, p2, mem_log2, seed),
            bench_cycles(iters, alu, mem, mul, p2))


def _s32(v: int) -> int:
    v &= M32
    return v - (1 << 32) if v >> 31 else v


def _div(a: int, b: int) -> int:          # RISC-V DIV (b != 0 here): truncating, signed
    a, b = _s32(a), _s32(b)
    if a == -(1 << 31) and b == -1:
        return a & M32
    q = abs(a) // abs(b)
    return (q if (a < 0) == (b < 0) else -q) & M32


def _rem(a: int, b: int) -> int:          # RISC-V REM: sign of the dividend
    a, b = _s32(a), _s32(b)
    if a == -(1 << 31) and b == -1:
        return 0
    r = abs(a) % abs(b)
    return (r if a >= 0 else -r) & M32


def bench_model(data: bytes, compress: Compress) -> tuple[bytes, int]:
    if len(data) != 28:
        return b"", 1
    iters, n_alu, n_mem, n_mul, n_p2, mem_log2, seed = struct.unpack("<7I", data)
    if mem_log2 > BENCH_MEM_LOG2_MAX:
        return b"", 1
    st = [(seed | 1) & M32]

    def xorshift() -> int:
        v = st[0]
        v ^= (v << 13) & M32
        v ^= v >> 17
        v ^= (v << 5) & M32
        st[0] = v
        return v

    x, y, s, m = xorshift(), xorshift(), xorshift(), xorshift()
    k = xorshift() | 1
    pb = [xorshift() % P for _ in range(16)] + [0] * 8
    mem = [0] * (1 << mem_log2)
    mask = ((1 << mem_log2) - 1) << 2
    q = 0
    for _ in range(iters):
        for _ in range(n_alu):
            x = (x + y) & M32
            y = (((y << 7) | (y >> 25)) & M32) ^ x
            t0 = (_s32(x) >> (y & 31)) & M32
            x = (x + (1 if y < t0 else 0)) & M32
        for _ in range(n_mem):
            i = (s & mask) >> 2
            w = mem[i]
            b = (w >> 8) & 0xFF
            mem[i] = (s & ~0xFF0000 & M32) | ((w & 0xFF) << 16)
            s = ((((s + w) & M32) ^ b) + 0x555) & M32
        for _ in range(n_mul):
            t0 = (m * k) & M32
            t1 = ((_s32(m) * _s32(k)) >> 32) & M32
            t2 = ((_s32(m) * k) >> 32) & M32
            m = (m * k) >> 32
            t2 |= 1
            t1 = _div(t1, t2)
            t0 = _rem(t0, t2)
            t1 |= 1
            t2 = t0 // t1
            t0 = m % t1
            m = ((((m + t0) & M32) ^ t2) + 0x3A7) & M32
        for _ in range(n_p2):
            i, o = q // 4, 16 - q // 2
            pb[o:o + 8] = list(compress(pb[i:i + 16])[:8])
            q ^= 32
    return struct.pack("<8I", x, y, s, m, q, pb[0], pb[8], pb[16]), 0
