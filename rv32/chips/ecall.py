"""ECALL: one row per system call (rv32/abi.py; the machine's semantics, rv32/interp.py).

The row reads a7, a1, a2 and read-modify-writes a0 (all at ts 3 clk + 1; distinct
registers), and exactly one kind flag is set:

========  ==========================  =================================================
flag      when                        effect
========  ==========================  =================================================
k_exit    a7 in {93, 94}              exit code a0 mod 256 to REGISTERS; no next cycle;
                                      clk <= max_cycles - 1; a0 unchanged
k_read    a7 = 63, a0 = 0             n = min(a2, input_len - cursor) bytes of the input
                                      to memory at a1 (IOWORD chain); cursor += n; a0 = n
k_rbad    a7 = 63, a0 != 0            a0 = -EBADF
k_w1      a7 = 64, a0 = 1             a2 bytes of memory at a1 to the output (IOWORD
                                      chain); fd 1 count += a2; a0 = a2
k_w2      a7 = 64, a0 = 2             fd 2 count += a2 (the bytes are not part of the
                                      statement); a0 = a2
k_wbad    a7 = 64, a0 not in {1, 2}   a0 = -EBADF
k_p2      a7 = 0x53460001             POSEIDON2 of the 16 words at a0 into the 8 words at
                                      a1 (P2CALL); a0 = 0
========  ==========================  =================================================

Every number is checked on limbs (a7_hi = 0 and (a7_lo - 93)(a7_lo - 94) = 0, ...): an
unknown a7 is an execution error, so no flag fits it.  The "not" cases have witnesses:
(a0_lo + a0_hi) iu = 1 (a0 != 0), a0_hi iu + (a0_lo - 1)(a0_lo - 2) iw = 1 (a0 not 1, 2).

The machine's error checks, so that no failing run is proved: read / write buffers
a1 + a2 <= 2^32 (an adder with a carry out only onto 0), fd 1 / fd 2 at most
MAX_OUTPUT_BYTES = 2^26 bytes (a2_hi < 2^11, then 2^26 - count - a2 = z in [0, 2^27)),
POSEIDON2 pointers 4-aligned (a0 = 4 wla, a1 = 4 wl) and inside memory (the words from
2^30 on have no MEMORY row, so accesses there cannot balance), inputs canonical (P2CALL),
the cycle limit (exit).  n = min(a2, avail) with avail = input_len - cursor in limbs
(av_hi < 2^11: avail is below 2^27) and one adder d + avail = a2 + 2^32 mk1, so mk1 =
[a2 < avail].  The cursors are registers 33..35 (one field element in the lo slot), read
and written at ts + 1 with multiplicity k_read + k_w1 + k_w2.
"""
from __future__ import annotations

import numpy as np

from ...air import AirBuilder
from ...air import field as F

from .. import abi, isa
from .common import (CUR_ERR, CUR_IN, CUR_OUT, EXIT, IOCHAIN, P2CALL, PAIR8, REG, STREAM_IN,
                     STREAM_OUT, TWO16, access, fetch, limbs16, range16, read, step, sum_of,
                     ts_of)
from .rows import Rows

KINDS = ("k_exit", "k_read", "k_rbad", "k_w1", "k_w2", "k_wbad", "k_p2")
PV_NAMES = ("max_cycles", "input_len")
OUT_LIMIT = abi.MAX_OUTPUT_BYTES


def _regs(b, name):
    return (b.main(f"{name}_lo"), b.main(f"{name}_hi"))


def build_ecall(log_blowup: int):
    b = AirBuilder("rv32_ecall", public=PV_NAMES)
    pcw, clk = b.main("pcw"), b.main("clk")
    k = {name: b.main(name) for name in KINDS}
    for name, f in k.items():
        b.assert_bool(f, name=f"{name}_bool")
    real = sum_of(list(k.values()))
    b.assert_bool(real, name="one_kind")
    a7, a0, a1, a2 = (_regs(b, n) for n in ("a7", "a0", "a1", "a2"))
    res = _regs(b, "res")
    cur = b.main("cur")
    n = _regs(b, "n")
    N = n[0] + TWO16 * n[1]
    fetch(b, real, pcw, isa.ECALL * real)
    step(b, pcw, clk, pcw + 1, real, next_mult=real - k["k_exit"])
    t1 = ts_of(clk, 1)
    read(b, "a7", REG, 17, a7, t1, real)
    read(b, "a1", REG, 11, a1, t1, real)
    read(b, "a2", REG, 12, a2, t1, real)
    access(b, "a0", REG, 10, a0, res, t1, real)
    io = k["k_read"] + k["k_w1"] + k["k_w2"]
    wr = k["k_w1"] + k["k_w2"]
    cidx = CUR_IN * k["k_read"] + CUR_OUT * k["k_w1"] + CUR_ERR * k["k_w2"]
    access(b, "cur", REG, cidx, (cur, 0), (cur + N, 0), t1, io)

    # the call number and the fd
    def is_const(flag, v, const, name):
        lo, hi = limbs16(const)
        b.assert_zero(flag * (v[0] - lo), name=f"{name}_lo")
        b.assert_zero(flag * (v[1] - hi), name=f"{name}_hi")

    b.assert_zero(k["k_exit"] * a7[1], name="exit_a7_hi")
    b.assert_zero(k["k_exit"] * (a7[0] - abi.SYS_EXIT) * (a7[0] - abi.SYS_EXIT_GROUP),
                  name="exit_a7_lo")
    is_const(k["k_read"] + k["k_rbad"], a7, abi.SYS_READ, "read_a7")
    is_const(k["k_w1"] + k["k_w2"] + k["k_wbad"], a7, abi.SYS_WRITE, "write_a7")
    is_const(k["k_p2"], a7, abi.SYS_POSEIDON2, "p2_a7")
    is_const(k["k_read"], a0, abi.FD_STDIN, "read_fd")
    is_const(k["k_w1"], a0, abi.FD_STDOUT, "w1_fd")
    is_const(k["k_w2"], a0, abi.FD_STDERR, "w2_fd")
    iu, iw, t2 = b.main("iu"), b.main("iw"), b.main("t2")
    b.assert_zero(k["k_rbad"] * ((a0[0] + a0[1]) * iu - 1), name="rbad_fd")
    b.assert_zero(k["k_wbad"] * (t2 - (a0[0] - 1) * (a0[0] - 2)), name="t2")
    b.assert_zero(k["k_wbad"] * (a0[1] * iu + t2 * iw - 1), name="wbad_fd")

    # the result in a0
    bad = k["k_rbad"] + k["k_wbad"]
    eb = limbs16(abi.NEG_EBADF)
    b.assert_zero(res[0] - k["k_exit"] * a0[0] - io * n[0] - bad * eb[0], name="res_lo")
    b.assert_zero(res[1] - k["k_exit"] * a0[1] - io * n[1] - bad * eb[1], name="res_hi")

    # read: n = min(a2, avail), avail = input_len - cur
    av, d = _regs(b, "av"), _regs(b, "d")
    mk0, mk1 = b.main("mk0"), b.main("mk1")
    rd = k["k_read"]
    b.assert_zero(rd * (av[0] + TWO16 * av[1] - b.pv("input_len") + cur), name="avail")
    range16(b, av[0], rd)
    range16(b, av[1], rd)             # av_hi becomes n_hi, a limb of a0: a real limb,
    range16(b, 32 * av[1], rd)        # and below 2^11 (avail <= input_len <= 2^26)
    b.assert_bool(mk0, name="mk0_bool")
    b.assert_bool(mk1, name="mk1_bool")
    b.assert_zero(rd * (d[0] + av[0] - a2[0] - TWO16 * mk0), name="min_lo")
    b.assert_zero(rd * (d[1] + av[1] + mk0 - a2[1] - TWO16 * mk1), name="min_hi")
    range16(b, d[0], rd)
    range16(b, d[1], rd)
    for j in range(2):
        b.assert_zero(rd * (n[j] - av[j] - mk1 * (a2[j] - av[j])), name=f"read_n{j}")
        b.assert_zero(wr * (n[j] - a2[j]), name=f"write_n{j}")
    # writes: at most OUT_LIMIT bytes per fd
    z = _regs(b, "z")
    range16(b, 32 * a2[1], wr)        # a2 < 2^27, so the count below cannot wrap
    b.assert_zero(wr * (OUT_LIMIT - cur - N - z[0] - TWO16 * z[1]), name="out_limit")
    range16(b, z[0], wr)
    range16(b, 32 * z[1], wr)
    # read / write buffers: a1 + a2 <= 2^32
    s = _regs(b, "s")
    bk0, bk1 = b.main("bk0"), b.main("bk1")
    b.assert_bool(bk0, name="bk0_bool")
    b.assert_bool(bk1, name="bk1_bool")
    b.assert_zero(a1[0] + a2[0] - s[0] - TWO16 * bk0, name="buf_lo")
    b.assert_zero(a1[1] + a2[1] + bk0 - s[1] - TWO16 * bk1, name="buf_hi")
    range16(b, s[0], real)
    range16(b, s[1], real)
    b.assert_zero(io * bk1 * (s[0] + s[1]), name="buf_end")
    # the IOWORD chain from a1 (read, write to fd 1)
    wl, o0, o1 = b.main("wl"), b.main("o0"), b.main("o1")
    b.assert_bool(o0, name="o0_bool")
    b.assert_bool(o1, name="o1_bool")
    b.assert_zero(a1[0] - 4 * wl - o0 - 2 * o1, name="a1_split")
    range16(b, wl, real)
    range16(b, 4 * wl, real)
    chain = k["k_read"] + k["k_w1"]
    kind = STREAM_IN * k["k_read"] + STREAM_OUT * k["k_w1"]
    wa_e, off_e = b.main("wa_e"), b.main("off_e")
    b.send(IOCHAIN, [clk, kind, wl + (1 << 14) * a1[1], cur, N, o0 + 2 * o1], multiplicity=chain)
    b.receive(IOCHAIN, [clk, kind, wa_e, cur + N, 0, off_e], multiplicity=chain)
    # POSEIDON2: a0, a1 4-aligned word pointers
    wla = b.main("wla")
    p2 = k["k_p2"]
    b.assert_zero(p2 * (a0[0] - 4 * wla), name="p2_a0_align")
    b.assert_zero(p2 * o0, name="p2_a1_align0")
    b.assert_zero(p2 * o1, name="p2_a1_align1")
    range16(b, wla, p2)
    range16(b, 4 * wla, p2)
    b.send(P2CALL, [clk, wla + (1 << 14) * a0[1], wl + (1 << 14) * a1[1]], multiplicity=p2)
    # exit: the code, and the cycle limit clk <= max_cycles - 1 (below 2^24)
    code, rest, cl = b.main("code"), b.main("rest"), _regs(b, "cl")
    ex = k["k_exit"]
    b.assert_zero(ex * (a0[0] - code - 256 * rest), name="exit_code")
    b.send(PAIR8, [code, rest], multiplicity=ex)
    b.send(EXIT, [code], multiplicity=ex)
    b.assert_zero(ex * (b.pv("max_cycles") - 1 - clk - cl[0] - TWO16 * cl[1]), name="cycle_limit")
    range16(b, cl[0], ex)
    range16(b, 256 * cl[1], ex)
    return b.build(log_blowup=log_blowup)


# --------------------------------------------------------------------------- trace

def ecall_rows(ctx, cyc: np.ndarray, acc, max_cycles: int, input_len: int,
               cursors=(0, 0, 0)) -> tuple:
    """ECALL rows of cycles ``cyc`` (the record's ECALL arrays in order); returns (rows,
    per-call info for IOWORD and P2CALL: kind, a0, a1, n, cursor before)."""
    rec = ctx.rec
    m = cyc.size
    args = rec.ecall_args.astype(np.int64)
    if args.shape[0] != m or not np.array_equal(rec.ecall_cycle.astype(np.int64), cyc):
        raise ValueError("the record's ECALL arrays do not match its ECALL cycles")
    a7, a0, a1, a2, res = (args[:, j] for j in range(5))
    rows = Rows(m)
    rows.update({"pcw": ctx.pcw[cyc], "clk": cyc})
    exit_ = (a7 == abi.SYS_EXIT) | (a7 == abi.SYS_EXIT_GROUP)
    rd_, wr_ = a7 == abi.SYS_READ, a7 == abi.SYS_WRITE
    kinds = {"k_exit": exit_, "k_read": rd_ & (a0 == 0), "k_rbad": rd_ & (a0 != 0),
             "k_w1": wr_ & (a0 == 1), "k_w2": wr_ & (a0 == 2),
             "k_wbad": wr_ & (a0 != 1) & (a0 != 2), "k_p2": a7 == abi.SYS_POSEIDON2}
    if not np.all(sum(v.astype(np.int64) for v in kinds.values()) == 1):
        raise ValueError("an ECALL of a kind the machine does not run")
    for name, v in kinds.items():
        rows[name] = v
    for name, v in (("a7", a7), ("a0", a0), ("a1", a1), ("a2", a2), ("res", res)):
        rows[f"{name}_lo"], rows[f"{name}_hi"] = v & 0xFFFF, v >> 16
    # cursors: each kind's cursor before the call (a running count per cursor)
    io = kinds["k_read"] | kinds["k_w1"] | kinds["k_w2"]
    n = np.where(io, np.where(kinds["k_read"], res, a2), 0)
    cur = np.zeros(m, np.int64)
    cidx = np.select([kinds["k_read"], kinds["k_w1"], kinds["k_w2"]], [CUR_IN, CUR_OUT, CUR_ERR],
                     0)
    for c, c0 in zip((CUR_IN, CUR_OUT, CUR_ERR), cursors):
        sel = cidx == c
        csum = np.cumsum(np.where(sel, n, 0))
        cur[sel] = (int(c0) + csum - n)[sel]
    rows.update({"cur": cur, "n_lo": n & 0xFFFF, "n_hi": n >> 16})
    avail = np.where(kinds["k_read"], input_len - cur, 0)
    d = (a2 - avail) & 0xFFFF_FFFF
    mk0 = ((d & 0xFFFF) + (avail & 0xFFFF)) >> 16
    mk1 = ((d >> 16) + (avail >> 16) + mk0) >> 16
    rows.update({"av_lo": avail & 0xFFFF, "av_hi": avail >> 16, "d_lo": d & 0xFFFF,
                 "d_hi": d >> 16, "mk0": np.where(kinds["k_read"], mk0, 0),
                 "mk1": np.where(kinds["k_read"], mk1, 0)})
    wr = kinds["k_w1"] | kinds["k_w2"]
    z = np.where(wr, OUT_LIMIT - cur - n, 0)
    s = a1 + a2
    bk0 = ((a1 & 0xFFFF) + (a2 & 0xFFFF)) >> 16
    rows.update({"z_lo": z & 0xFFFF, "z_hi": z >> 16, "s_lo": s & 0xFFFF,
                 "s_hi": (s >> 16) & 0xFFFF, "bk0": bk0, "bk1": s >> 32,
                 "wl": (a1 & 0xFFFF) >> 2, "o0": a1 & 1, "o1": (a1 >> 1) & 1})
    wa_e = np.where(n > 0, ((a1 + n - 1) >> 2) + 1, a1 >> 2)
    rows.update({"wa_e": wa_e, "off_e": np.where(n > 0, 0, a1 & 3),
                 "wla": np.where(kinds["k_p2"], (a0 & 0xFFFF) >> 2, 0)})
    ex = kinds["k_exit"]
    cl = np.where(ex, max_cycles - 1 - cyc, 0)
    rows.update({"code": np.where(ex, a0 & 0xFF, 0), "rest": np.where(ex, (a0 >> 8) & 0xFF, 0),
                 "cl_lo": cl & 0xFFFF, "cl_hi": cl >> 16})
    lo0 = a0 & 0xFFFF
    t2 = ((lo0 - 1) * (lo0 - 2)) % F.P
    rows["t2"] = np.where(kinds["k_wbad"], t2, 0)
    nz = (lo0 + (a0 >> 16)) % F.P
    iu = np.zeros(m, np.int64)
    iw = np.zeros(m, np.int64)
    rb = kinds["k_rbad"]
    iu[rb] = F.inv(nz[rb].astype(np.uint64)).astype(np.int64)
    wb = np.flatnonzero(kinds["k_wbad"])
    hi_nz = (a0[wb] >> 16) != 0
    iu[wb[hi_nz]] = F.inv((a0[wb[hi_nz]] >> 16).astype(np.uint64)).astype(np.int64)
    w2 = wb[~hi_nz]
    iw[w2] = F.inv(t2[w2].astype(np.uint64)).astype(np.int64)
    rows.update({"iu": iu, "iw": iw})
    t1 = 3 * cyc + 1
    rows.access(acc, "a7", REG, 17, t1, a7 & 0xFFFF, a7 >> 16)
    rows.access(acc, "a1", REG, 11, t1, a1 & 0xFFFF, a1 >> 16)
    rows.access(acc, "a2", REG, 12, t1, a2 & 0xFFFF, a2 >> 16)
    rows.access(acc, "a0", REG, 10, t1, res & 0xFFFF, res >> 16, old=(a0 & 0xFFFF, a0 >> 16))
    sel = np.flatnonzero(io)
    rows.access(acc, "cur", REG, cidx[sel], t1[sel], cur[sel] + n[sel], 0, old=(cur[sel], 0),
                rows=sel)
    info = {"kinds": kinds, "a0": a0, "a1": a1, "n": n, "cur": cur}
    return rows, info


__all__ = ["build_ecall", "ecall_rows", "KINDS", "PV_NAMES"]
