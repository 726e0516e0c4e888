"""BYTES: the byte and 16-bit lookup table every chip's range checks use.

2^16 preprocessed rows, row v holding x = v mod 256, y = v div 256 and x AND y; main
multiplicities ``m_and, m_pair, m_r16``.  It receives

* ``rv32_and8`` (x, y, x AND y): a bitwise AND of two bytes (and with it: x, y are bytes);
* ``rv32_pair8`` (x, y): x and y are both bytes;
* ``rv32_range16`` (x + 256 y): a value below 2^16.

Soundness: the table holds exactly these tuples, and a tuple sent on a bus is cancelled
only by receives of the same tuple; the multiplicities cannot wrap, as every table sends
fewer than p lookups (at most 2^24 rows of a few dozen lookups each, per table).
"""
from __future__ import annotations

import numpy as np

from ...air import AirBuilder

from .common import AND8, PAIR8, RANGE16

SIZE = 1 << 16
BUSES = (AND8, PAIR8, RANGE16)


def bytes_prep() -> np.ndarray:
    v = np.arange(SIZE, dtype=np.uint32)
    x, y = v & 0xFF, v >> 8
    return np.stack([x, y, x & y], axis=1).astype(np.uint32)


def build_bytes(log_blowup: int):
    b = AirBuilder("rv32_bytes")
    x, y, z = b.prep("x"), b.prep("y"), b.prep("and")
    m_and, m_pair, m_r16 = b.main("m_and"), b.main("m_pair"), b.main("m_r16")
    b.receive(AND8, [x, y, z], multiplicity=m_and)
    b.receive(PAIR8, [x, y], multiplicity=m_pair)
    b.receive(RANGE16, [x + 256 * y], multiplicity=m_r16)
    return b.build(preprocessed=bytes_prep(), log_blowup=log_blowup)


def bytes_trace(counts: dict) -> np.ndarray:
    """The three multiplicity columns from ``counts[bus]`` (int64[2^16] each: how often each
    row's tuple was sent)."""
    T = np.zeros((SIZE, 3), dtype=np.uint32)
    for j, bus in enumerate(BUSES):
        T[:, j] = counts[bus]
    return T


def row_of(bus: str, values: list) -> np.ndarray:
    """The BYTES row each sent tuple of ``bus`` hits (int64); ValueError for a tuple the
    table does not hold (a range check that cannot succeed)."""
    if bus == RANGE16:
        v = np.asarray(values[0], dtype=np.int64)
        ok = (v >= 0) & (v < SIZE)
        rows = v
    else:
        x, y = (np.asarray(values[k], dtype=np.int64) for k in range(2))
        ok = (x >= 0) & (x < 256) & (y >= 0) & (y < 256)
        if bus == AND8:
            ok &= np.asarray(values[2], dtype=np.int64) == (x & y)
        rows = x + 256 * y
    if not np.all(ok):
        bad = int(np.flatnonzero(~ok)[0])
        raise ValueError(f"{bus}: tuple {[int(np.asarray(v).reshape(-1)[bad]) for v in values]} "
                         "is not in the BYTES table")
    return rows


__all__ = ["build_bytes", "bytes_prep", "bytes_trace", "row_of", "SIZE", "BUSES"]
