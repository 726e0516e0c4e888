"""The byte streams of read(0) and write(1): the IO table and the IOWORD chain rows.

**IO** (``rv32_io``): preprocessed rows (stream, position, byte, out): the input bytes
(stream 1, the verifier has them) and the output bytes (stream 2, which the verifier reads
off this table's public values before it builds the AIR); main ``m_in``.  It receives
(stream, pos, byte) on ``rv32_io`` with multiplicity m_in + out, and ``out * m_in = 0``: an
output row is received exactly once, an input row any number of times.  Public values:
the output bytes, three to a field element (little-endian), so the proof carries them.

**IOWORD** (``rv32_ioword``): one row per memory word a read(0) writes or a write(1) reads,
linked to its ECALL by the chain bus ``rv32_iochain`` (clk, kind, wa, pos, rem, off): the
ECALL sends (clk, kind, a1 / 4, cursor, n, a1 mod 4) and receives (clk, kind, *, cursor +
n, 0, *); each row receives (clk, kind, wa, pos, rem, off) and sends (clk, kind, wa + 1,
pos + cnt, rem - cnt, 0).  Columns: clk, k_in, k_out (kind = k_in + 2 k_out), wa, pos,
rem, o0, o1 (off = o0 + 2 o1), h[4] (a prefix mask: where this word's bytes end), f[4]
(the bytes moved: f_j = [j >= off] h_j), b[4] / a[4] (the word before / after, bytes), and
the memory access (ts 3 clk + 2).  Byte j with f_j = 1 is sent as (kind, pos + f_0 + ..
+ f_(j-1), a_j) on ``rv32_io``; a_j = b_j where f_j = 0, and everywhere for a write.

Why it is sound.  A chain starts only at an ECALL (a row's received tuple was sent by the
ECALL or by a row of the same clk and kind one word below; wa increases by one per step,
so a cycle of rows would need p steps).  ``(rem - cnt)(1 - h_3) = 0``: a row that does not
finish the transfer moves every byte from off to the end of its word, so the bytes moved
are exactly [a1, a1 + n) in order (a row with rem > 0 moves at least one byte; rem - cnt
never goes below 0, or it could not return to 0 in fewer than p / 4 rows); rows after the
end (rem = 0) move nothing and leave memory as it was.  Input bytes are the verifier's
(IO), output bytes are received once each at positions 0 .. output_len - 1
(REGISTERS checks the final fd 1 cursor), so the claimed output is exactly what was
written.
"""
from __future__ import annotations

import numpy as np

from ...air import AirBuilder

from .common import IO, IOCHAIN, MEMORY, PAIR8, STREAM_IN, STREAM_OUT, access, sum_of, ts_of

BYTES_PER_PV = 3
IO_PREP = ("stream", "pos", "byte", "out")


def pack_output(output: bytes) -> list[int]:
    """The IO table's public values: the output bytes three to an element."""
    out = []
    for i in range(0, len(output), BYTES_PER_PV):
        out.append(int.from_bytes(output[i:i + BYTES_PER_PV], "little"))
    return out


def unpack_output(values, length: int) -> bytes:
    """Inverse of :func:`pack_output` (``length`` bytes; ValueError if the values are not
    exactly the packing of that many bytes)."""
    values = [int(v) for v in values]
    if len(values) != -(-length // BYTES_PER_PV) or any(not 0 <= v < 1 << 24 for v in values):
        raise ValueError(f"{len(values)} output values are not a packing of {length} bytes")
    data = b"".join(v.to_bytes(BYTES_PER_PV, "little") for v in values)
    if any(data[length:]):
        raise ValueError("the output values are not a packing of bytes")
    return data[:length]


def io_prep(input: bytes, output: bytes, in_start: int = 0, out_start: int = 0) -> np.ndarray:
    """The rows of ``input`` at stream positions in_start.. and of ``output`` at
    out_start.. (a segment's slices; 0 for a whole run)."""
    n_in, n_out = len(input), len(output)
    rows = max(2, 1 << (max(n_in + n_out, 1) - 1).bit_length())
    prep = np.zeros((rows, len(IO_PREP)), dtype=np.uint32)
    prep[:n_in, 0] = STREAM_IN
    prep[:n_in, 1] = in_start + np.arange(n_in)
    prep[:n_in, 2] = np.frombuffer(bytes(input), dtype=np.uint8)
    s = slice(n_in, n_in + n_out)
    prep[s, 0] = STREAM_OUT
    prep[s, 1] = out_start + np.arange(n_out)
    prep[s, 2] = np.frombuffer(bytes(output), dtype=np.uint8)
    prep[s, 3] = 1
    return prep


def build_io(input: bytes, output: bytes, log_blowup: int, in_start: int = 0,
             out_start: int = 0):
    n_pv = -(-len(output) // BYTES_PER_PV)
    b = AirBuilder("rv32_io", public=[f"output[{i}]" for i in range(n_pv)])
    c = {name: b.prep(name) for name in IO_PREP}
    m_in = b.main("m_in")
    b.assert_zero(c["out"] * m_in, name="output_once")
    b.receive(IO, [c["stream"], c["pos"], c["byte"]], multiplicity=m_in + c["out"])
    return b.build(preprocessed=io_prep(input, output, in_start, out_start),
                   log_blowup=log_blowup)


def io_trace(n_in: int, n_read: int, height: int) -> np.ndarray:
    """m_in: 1 for the input bytes read (positions below the final read cursor)."""
    T = np.zeros((height, 1), dtype=np.uint32)
    T[:n_read, 0] = 1
    assert n_read <= n_in
    return T


# --------------------------------------------------------------------------- IOWORD

def build_ioword(log_blowup: int):
    b = AirBuilder("rv32_ioword")
    clk, k_in, k_out, wa, pos, rem = (b.main(n) for n in ("clk", "k_in", "k_out", "wa", "pos",
                                                            "rem"))
    o0, o1 = b.main("o0"), b.main("o1")
    h, f = b.main_cols("h", 4), b.main_cols("f", 4)
    bb, aa = b.main_cols("b", 4), b.main_cols("a", 4)
    real = k_in + k_out
    kind = STREAM_IN * k_in + STREAM_OUT * k_out
    for name, x in (("k_in", k_in), ("k_out", k_out), ("o0", o0), ("o1", o1)):
        b.assert_bool(x, name=f"{name}_bool")
    b.assert_zero(k_in * k_out, name="one_kind")
    for j in range(4):
        b.assert_bool(h[j], name=f"h{j}_bool")
    for j in range(3):
        b.assert_zero(h[j + 1] * (1 - h[j]), name=f"h{j}_prefix")
    b.assert_zero(h[0] * (1 - real), name="h_real")      # padding rows move no byte
    g = [(1 - o0) * (1 - o1), 1 - o1, 1 - o0 * o1, 1]         # g_j = [off <= j]
    for j in range(4):
        b.assert_zero(f[j] - g[j] * h[j], name=f"f{j}")
    cnt = sum_of(f)
    b.assert_zero((rem - cnt) * (1 - h[3]), name="whole_word_unless_last")
    for j in range(4):
        b.assert_zero((1 - f[j]) * (aa[j] - bb[j]), name=f"keep{j}")
        b.assert_zero(k_out * (aa[j] - bb[j]), name=f"read_only{j}")
    b.receive(IOCHAIN, [clk, kind, wa, pos, rem, o0 + 2 * o1], multiplicity=real)
    b.send(IOCHAIN, [clk, kind, wa + 1, pos + cnt, rem - cnt, 0], multiplicity=real)
    access(b, "mem", MEMORY, wa, (bb[0] + 256 * bb[1], bb[2] + 256 * bb[3]),
           (aa[0] + 256 * aa[1], aa[2] + 256 * aa[3]), ts_of(clk, 2), real)
    b.send(PAIR8, [bb[0], bb[1]], multiplicity=real)
    b.send(PAIR8, [bb[2], bb[3]], multiplicity=real)
    for j in range(4):
        before = sum_of([0] + f[:j]) if j else 0
        b.send(IO, [kind, pos + before, aa[j]], multiplicity=f[j])
    return b.build(log_blowup=log_blowup)


def ioword_rows(clk, kind, wa, buf, n, cur, before, after) -> dict:
    """IOWORD columns for touched words (one entry per row; int64 arrays): the ECALL's
    clk, kind (1 in / 2 out), the word address, the buffer address a1, the byte count n,
    the cursor before the call, and the word before / after."""
    base = wa << 2
    s = np.maximum(base, buf)
    e = np.minimum(base + 4, buf + n)
    first = base <= buf
    off = np.where(first, buf - base, 0)
    cols = {"clk": clk, "k_in": (kind == STREAM_IN).astype(np.int64),
            "k_out": (kind == STREAM_OUT).astype(np.int64), "wa": wa, "pos": cur + (s - buf),
            "rem": n - (s - buf), "o0": off & 1, "o1": off >> 1}
    end = e - base
    for j in range(4):
        cols[f"h[{j}]"] = (j < end).astype(np.int64)
        cols[f"f[{j}]"] = ((j >= off) & (j < end)).astype(np.int64)
        cols[f"b[{j}]"] = (before >> (8 * j)) & 0xFF
        cols[f"a[{j}]"] = (after >> (8 * j)) & 0xFF
    return cols


__all__ = ["build_io", "io_prep", "io_trace", "pack_output", "unpack_output", "build_ioword",
           "ioword_rows", "BYTES_PER_PV"]
