"""Compiled (numba) inner loops of the trace generators in :mod:`vm.traces`.

Each kernel computes exactly what the numpy code it replaces computed (tests compare them
bit for bit with the earlier implementation, tests/vm_reference.py); the callers in
:mod:`vm.traces` fall back to numpy wherever an input is outside what a kernel assumes.

* :func:`p2_fill` -- the POSEIDON2 rows: every permutation with its round intermediates
  (S-box cubes and outputs) written straight into the trace's columns;
* :func:`mem_accesses` -- the CPU trace's memory accesses in the order of
  ``memory_accesses`` (lane, then slot A/B/C, then cycle);
* :func:`sort_order` -- the stable (address, time) order of the accesses (LSD radix sort;
  the order of ``np.lexsort((time, addr))``);
* :func:`mem_fill` -- the MEMORY rows from the accesses in that order;
* :func:`range_bincount` -- RANGE's multiplicities from the CPU's LT rows and MEMORY's
  real rows.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..verifier.poseidon2 import _from_mont, _mmul, _red37, _to_mont

from .poseidon2 import _RC_FULL, _RC_PART, _V16

P = 2013265921
_P64 = np.uint64(P)



# --------------------------------------------------------------------------- POSEIDON2

RCF_M = np.array([[x * (1 << 32) % P for x in row] for row in _RC_FULL], dtype=np.uint64)
RCP_M = np.array([x * (1 << 32) % P for x in _RC_PART], dtype=np.uint64)
V16_M = np.array([x * (1 << 32) % P for x in _V16], dtype=np.uint64)
_B = 64                 # states per batch (lane-major, the batch axis vectorises)


@njit(inline="always")
def _ext_lanes(st, nb):
    """M_E on columns 0..nb-1 of st[16, B] (Montgomery forms, canonical in and out; M_E
    has integer entries, so it acts on Montgomery forms unchanged): the M4 outputs < 7p,
    the column sums < 28p, lane + sum < 35p < 2^37, one _red37 each."""
    for b in range(nb):
        y0 = 2 * st[0, b] + 3 * st[1, b] + st[2, b] + st[3, b]
        y1 = st[0, b] + 2 * st[1, b] + 3 * st[2, b] + st[3, b]
        y2 = st[0, b] + st[1, b] + 2 * st[2, b] + 3 * st[3, b]
        y3 = 3 * st[0, b] + st[1, b] + st[2, b] + 2 * st[3, b]
        y4 = 2 * st[4, b] + 3 * st[5, b] + st[6, b] + st[7, b]
        y5 = st[4, b] + 2 * st[5, b] + 3 * st[6, b] + st[7, b]
        y6 = st[4, b] + st[5, b] + 2 * st[6, b] + 3 * st[7, b]
        y7 = 3 * st[4, b] + st[5, b] + st[6, b] + 2 * st[7, b]
        y8 = 2 * st[8, b] + 3 * st[9, b] + st[10, b] + st[11, b]
        y9 = st[8, b] + 2 * st[9, b] + 3 * st[10, b] + st[11, b]
        y10 = st[8, b] + st[9, b] + 2 * st[10, b] + 3 * st[11, b]
        y11 = 3 * st[8, b] + st[9, b] + st[10, b] + 2 * st[11, b]
        y12 = 2 * st[12, b] + 3 * st[13, b] + st[14, b] + st[15, b]
        y13 = st[12, b] + 2 * st[13, b] + 3 * st[14, b] + st[15, b]
        y14 = st[12, b] + st[13, b] + 2 * st[14, b] + 3 * st[15, b]
        y15 = 3 * st[12, b] + st[13, b] + st[14, b] + 2 * st[15, b]
        t0 = y0 + y4 + y8 + y12
        t1 = y1 + y5 + y9 + y13
        t2 = y2 + y6 + y10 + y14
        t3 = y3 + y7 + y11 + y15
        st[0, b] = _red37(y0 + t0)
        st[1, b] = _red37(y1 + t1)
        st[2, b] = _red37(y2 + t2)
        st[3, b] = _red37(y3 + t3)
        st[4, b] = _red37(y4 + t0)
        st[5, b] = _red37(y5 + t1)
        st[6, b] = _red37(y6 + t2)
        st[7, b] = _red37(y7 + t3)
        st[8, b] = _red37(y8 + t0)
        st[9, b] = _red37(y9 + t1)
        st[10, b] = _red37(y10 + t2)
        st[11, b] = _red37(y11 + t3)
        st[12, b] = _red37(y12 + t0)
        st[13, b] = _red37(y13 + t1)
        st[14, b] = _red37(y14 + t2)
        st[15, b] = _red37(y15 + t3)


@njit(cache=True)
def p2_fill(states, T, c_in, c_cube, c_sbox, c_pcube, c_psbox, rcf_m, rcp_m, v16_m):
    """For every row r of ``states`` (uint32[m, 16], any values: lanes are taken mod p):
    T[r, c_in + i] = states[r, i], the full rounds' cubes t = x^3 and S-box outputs
    y = x^7 at c_cube[rnd] / c_sbox[rnd] (16 lanes each), the partial rounds' at
    c_pcube / c_psbox (13 each) -- the values of vm/poseidon2.py permute_rows.  Batches
    of _B states run lane-major in Montgomery form (verifier/poseidon2.py's arithmetic);
    the stored values are converted back to canonical form row by row."""
    m = states.shape[0]
    st = np.empty((16, _B), np.uint64)
    cube = np.empty((8, 16, _B), np.uint64)
    sbox = np.empty((8, 16, _B), np.uint64)
    pcube = np.empty((13, _B), np.uint64)
    psbox = np.empty((13, _B), np.uint64)
    for r0 in range(0, m, _B):
        nb = min(_B, m - r0)
        for b in range(nb):
            for i in range(16):
                st[i, b] = _to_mont(np.uint64(states[r0 + b, i]))
        _ext_lanes(st, nb)
        for rnd in range(8):
            if rnd == 4:
                for k in range(13):
                    rc = rcp_m[k]
                    for b in range(nb):
                        x = st[0, b] + rc
                        x = x - _P64 if x >= _P64 else x
                        t = _mmul(_mmul(x, x), x)
                        y = _mmul(_mmul(t, t), x)
                        pcube[k, b] = t
                        psbox[k, b] = y
                        st[0, b] = y
                    for b in range(nb):
                        tot = st[0, b]
                        for i in range(1, 16):
                            tot += st[i, b]
                        for i in range(16):
                            st[i, b] = _red37(tot + _mmul(v16_m[i], st[i, b]))
            for i in range(16):
                rc = rcf_m[rnd, i]
                for b in range(nb):
                    x = st[i, b] + rc
                    x = x - _P64 if x >= _P64 else x
                    t = _mmul(_mmul(x, x), x)
                    y = _mmul(_mmul(t, t), x)
                    cube[rnd, i, b] = t
                    sbox[rnd, i, b] = y
                    st[i, b] = y
            _ext_lanes(st, nb)
        for b in range(nb):
            r = r0 + b
            for i in range(16):
                T[r, c_in + i] = states[r, i]
            for rnd in range(8):
                cc = c_cube[rnd]
                cs = c_sbox[rnd]
                for i in range(16):
                    T[r, cc + i] = np.uint32(_from_mont(cube[rnd, i, b]))
                    T[r, cs + i] = np.uint32(_from_mont(sbox[rnd, i, b]))
            for k in range(13):
                T[r, c_pcube + k] = np.uint32(_from_mont(pcube[k, b]))
                T[r, c_psbox + k] = np.uint32(_from_mont(psbox[k, b]))


# --------------------------------------------------------------------------- MEMORY

@njit(cache=True)
def mem_accesses(cpu, sel_a, sel_b, sel_c, sel_wide, sel_hash, col_a, col_b, col_c, col_clk,
                 col_v, col_o):
    """int64[k, 4] (address, time, value, is_write) of every access: for lane i = 0..7, the
    A reads (rows with a nonzero selector in sel_a for lane 0, sel_wide for the others), the
    B reads (sel_b / sel_hash) and the C writes (sel_c / sel_hash), each in row order."""
    n = cpu.shape[0]
    fa = np.zeros(n, np.bool_)
    fb = np.zeros(n, np.bool_)
    fc = np.zeros(n, np.bool_)
    fw = np.zeros(n, np.bool_)
    fh = np.zeros(n, np.bool_)
    na = nb = nc = nw = nh = 0
    for r in range(n):
        for j in sel_a:
            if cpu[r, j] != 0:
                fa[r] = True
        for j in sel_b:
            if cpu[r, j] != 0:
                fb[r] = True
        for j in sel_c:
            if cpu[r, j] != 0:
                fc[r] = True
        for j in sel_wide:
            if cpu[r, j] != 0:
                fw[r] = True
        fh[r] = cpu[r, sel_hash] != 0
        na += fa[r]
        nb += fb[r]
        nc += fc[r]
        nw += fw[r]
        nh += fh[r]
    out = np.empty((na + nb + nc + 7 * (nw + 2 * nh), 4), np.int64)
    k = 0
    for i in range(8):
        for part in range(3):
            if part == 0:
                f = fa if i == 0 else fw
                ca = col_a
                cv = col_v + i
            elif part == 1:
                f = fb if i == 0 else fh
                ca = col_b
                cv = col_v + 8 + i
            else:
                f = fc if i == 0 else fh
                ca = col_c
                cv = col_v + 16 if i == 0 else col_o + i
            for r in range(n):
                if f[r]:
                    out[k, 0] = np.int64(cpu[r, ca]) + i
                    out[k, 1] = 3 * np.int64(cpu[r, col_clk]) + part
                    out[k, 2] = np.int64(cpu[r, cv])
                    out[k, 3] = 1 if part == 2 else 0
                    k += 1
    return out


@njit(cache=True)
def sort_order(acc):
    """The stable order of the rows of acc (int64[k, >= 2]) by (acc[:, 0], acc[:, 1]) --
    that of np.lexsort((acc[:, 1], acc[:, 0])) -- when both columns are in [0, 2^31): an
    LSD radix sort of the key addr (max time + 1) + time (< 2^62), in as few passes of at
    most 12 bits as the largest key needs, the keys travelling with the indices.  Returns
    (int64[k] order, True), or (empty, False) when a value is out of that range."""
    k = acc.shape[0]
    lim = np.int64(1) << 31
    tmax = np.int64(0)
    for i in range(k):
        a = acc[i, 0]
        t = acc[i, 1]
        if a < 0 or a >= lim or t < 0 or t >= lim:
            return np.empty(0, np.int64), False
        if t > tmax:
            tmax = t
    span = tmax + 1
    keys = np.empty(k, np.int64)
    mx = np.int64(0)
    for i in range(k):
        keys[i] = acc[i, 0] * span + acc[i, 1]
        if keys[i] > mx:
            mx = keys[i]
    bits = 0
    while bits < 63 and (mx >> bits) != 0:
        bits += 1
    passes = (bits + 11) // 12
    order = np.arange(k)
    if passes == 0:
        return order, True
    width = (bits + passes - 1) // passes
    mask = (np.int64(1) << width) - 1
    nbuck = 1 << width
    order2 = np.empty(k, np.int64)
    keys2 = np.empty(k, np.int64)
    cnt = np.empty(nbuck, np.int64)
    shift = 0
    for _ in range(passes):
        cnt[:] = 0
        for i in range(k):
            cnt[(keys[i] >> shift) & mask] += 1
        s = np.int64(0)
        for d in range(nbuck):
            c = cnt[d]
            cnt[d] = s
            s += c
        for i in range(k):
            d = (keys[i] >> shift) & mask
            j = cnt[d]
            cnt[d] = j + 1
            order2[j] = order[i]
            keys2[j] = keys[i]
        order, order2 = order2, order
        keys, keys2 = keys2, keys
        shift += width
    return order, True


@njit(cache=True)
def mem_fill(acc, order, T, c_addr, c_time, c_value, c_write, c_real, c_lo, c_hi):
    """MEMORY's rows (int-valued like memory_trace's, reduced mod p into uint32): access
    order[j] in row j, then padding rows repeating the last access's address, time and
    value, zero in the other four columns (T's other columns are left as they are)."""
    k = order.shape[0]
    n = T.shape[0]
    pa = np.int64(0)
    pt = np.int64(0)
    for j in range(k):
        o = order[j]
        a = acc[o, 0]
        t = acc[o, 1]
        T[j, c_addr] = np.uint32(a % P)
        T[j, c_time] = np.uint32(t % P)
        T[j, c_value] = np.uint32(acc[o, 2] % P)
        T[j, c_write] = np.uint32(acc[o, 3] % P)
        T[j, c_real] = 1
        gap = np.int64(0)
        if j > 0 and a == pa:
            gap = t - pt - 1
        T[j, c_lo] = np.uint32((gap & 0xFFFF) % P)
        T[j, c_hi] = np.uint32((gap >> 16) % P)
        pa = a
        pt = t
    if k > 0:
        o = order[k - 1]
        for j in range(k, n):
            T[j, c_addr] = np.uint32(acc[o, 0] % P)
            T[j, c_time] = np.uint32(acc[o, 1] % P)
            T[j, c_value] = np.uint32(acc[o, 2] % P)
            T[j, c_write] = 0
            T[j, c_real] = 0
            T[j, c_lo] = 0
            T[j, c_hi] = 0


# --------------------------------------------------------------------------- RANGE

@njit(cache=True)
def range_bincount(cpu, c_lt, c_x, c_y, c_d, mem, m_real, m_lo, m_hi, size):
    """RANGE's multiplicities: x, y, d of every CPU row with is_lt == 1, gap_lo, gap_hi,
    2^8 gap_hi of every MEMORY row (one access per row) with is_real == 1.  Returns
    (counts int64[size], ok): ok is False if a value is outside [0, size) (the caller then
    reports it as range_counts does)."""
    counts = np.zeros(size, np.int64)
    for r in range(cpu.shape[0]):
        if cpu[r, c_lt] == 1:
            for c in (c_x, c_y, c_d):
                v = np.int64(cpu[r, c])
                if v >= size:
                    return counts, False
                counts[v] += 1
    for r in range(mem.shape[0]):
        if mem[r, m_real] == 1:
            lo = np.int64(mem[r, m_lo])
            hi = np.int64(mem[r, m_hi])
            if lo >= size or (hi << 8) >= size:
                return counts, False
            counts[lo] += 1
            counts[hi] += 1
            counts[hi << 8] += 1
    return counts, True


# --------------------------------------------------------------------------- CPU

@njit(cache=True)
def forward_fill_into(U, c0, change_rows, values, initial):
    """U[c0 + j, t] = values[k, j] mod p for the change k with the largest index among those
    with change_rows[k] + 1 <= t, initial[j] mod p before any (vm/traces.py _forward_fill,
    written column-major into U[c0:c0 + w, :n] as uint32)."""
    n = U.shape[1]
    w = values.shape[1]
    marker = np.full(n, -1, np.int64)
    for k in range(change_rows.shape[0]):
        idx = change_rows[k] + 1
        if idx < n:
            if idx < 0:
                idx += n
            marker[idx] = k
    last = np.int64(-1)
    for t in range(n):
        if marker[t] > last:
            last = marker[t]
        if last >= 0:
            for j in range(w):
                U[c0 + j, t] = np.uint32(values[last, j] % P)
        else:
            for j in range(w):
                U[c0 + j, t] = np.uint32(initial[j] % P)
