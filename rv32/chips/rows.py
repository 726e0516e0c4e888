"""Trace-side helpers: a chip's rows as named columns, and the memory argument's witness.

* :class:`Rows` collects a table's real rows column by column (int64 arrays, named as the
  AIR's main columns) and turns them into the uint32 trace, padded with zero rows to a
  power of two (every AIR here holds on an all-zero row).
* :class:`Accesses` gathers every access of an execution -- (space, address, ts, value
  after) -- from all tables, in any order, then resolves each one's previous value and
  timestamp (the address's previous access, or its initial value at ts 0) with one sort,
  and the final value and timestamp of every address (the boundary tables).  Reads are
  checked against the value the address held: a disagreement is a trace builder's bug.
"""
from __future__ import annotations

import numpy as np

from .common import MEMORY, P, REG, TS_GAP_BITS, pow2_rows
from .slots import base_names


class Rows:
    """The real rows of one table: ``rows[name] = values`` (length ``m``; scalars
    broadcast), ``rows.access(...)`` for the memory-argument columns."""

    def __init__(self, m: int):
        self.m = int(m)
        self.cols: dict = {}
        self._pending: list = []

    def __setitem__(self, name: str, values) -> None:
        v = np.asarray(values, dtype=np.int64)
        if v.ndim == 0:
            v = np.full(self.m, int(v), dtype=np.int64)
        if v.shape != (self.m,):
            raise ValueError(f"column {name}: {v.shape} values for {self.m} rows")
        self.cols[name] = v

    def __getitem__(self, name: str) -> np.ndarray:
        return self.cols[name]

    def update(self, cols: dict) -> None:
        for k, v in cols.items():
            self[k] = v

    def access(self, acc: "Accesses", name: str, space, addr, ts, new_lo, new_hi,
               old=None, witness_old: bool = False, rows=None) -> None:
        """Register this table's access ``name`` (rows ``rows``, default all) and fill its
        columns ``{name}_pts``, the ts-gap limbs and, with ``witness_old``, ``{name}_plo``
        / ``{name}_phi`` once :meth:`Accesses.resolve` ran.  The previous value is checked
        against ``old`` (lo, hi) if given, else (unless witness_old) against the new value
        (a read)."""
        sel = np.arange(self.m) if rows is None else np.asarray(rows, dtype=np.int64)
        if old is None and not witness_old:
            old = (new_lo, new_hi)
        handle = acc.add(space, addr, ts, new_lo, new_hi, old)
        self._pending.append((name, handle, sel, witness_old))

    def finish(self, acc: "Accesses") -> None:
        for name, handle, sel, witness_old in self._pending:
            pts, plo, phi, ts = acc.previous(handle)
            for col in (f"{name}_pts", f"{name}_dlo", f"{name}_dh") + (
                    (f"{name}_plo", f"{name}_phi") if witness_old else ()):
                if col not in self.cols:
                    self.cols[col] = np.zeros(self.m, dtype=np.int64)
            gap = ts - pts - 1
            self.cols[f"{name}_pts"][sel] = pts
            self.cols[f"{name}_dlo"][sel] = gap & 0xFFFF
            self.cols[f"{name}_dh"][sel] = gap >> 16
            if witness_old:
                self.cols[f"{name}_plo"][sel] = plo
                self.cols[f"{name}_phi"][sel] = phi
        self._pending = []

    def trace(self, air, height: int | None = None, k: int = 1, lo: int = 0,
              hi: int | None = None) -> np.ndarray:
        """uint32[n, width] in the AIR's column order, row i of the table's items [lo, hi)
        (default all) in row i // k, slot i % k (chips/slots.py); n = ``height`` or
        pow2_rows(ceil((hi - lo) / k)); columns not set are zero."""
        hi = self.m if hi is None else int(hi)
        lo = int(lo)
        if not 0 <= lo <= hi <= self.m:
            raise ValueError(f"{air.name}: items [{lo}, {hi}) of {self.m}")
        m = hi - lo
        n = pow2_rows(-(-m // k)) if height is None else int(height)
        names = {name: j for j, name in enumerate(base_names(air, k))}
        unknown = set(self.cols) - set(names)
        if unknown:
            raise ValueError(f"{air.name}: no columns {sorted(unknown)}")
        # the host pool's tiled transpose; imported here, not with the module: the
        # verifier imports the chips (their AIRs) and never builds a trace
        from ...kernels.ntt_host import transpose
        U = np.zeros((len(names), n * k), dtype=np.uint32)
        for name, v in self.cols.items():
            v = v[lo:hi] if (lo, hi) != (0, self.m) else v
            if v.size and (v.min() < 0 or v.max() >= P):
                v = v % P
            U[names[name], :m] = v
        return transpose(U).reshape(n, k * len(names))


class Accesses:
    """Every memory-argument access of an execution (module docstring)."""

    def __init__(self, reg_init: np.ndarray, image_wa: np.ndarray, image_word: np.ndarray):
        self.reg_init = np.asarray(reg_init, dtype=np.int64)
        self.image_wa = image_wa
        self.image_word = image_word.astype(np.int64)
        self._parts: list = []
        self._resolved = None

    def add(self, space, addr, ts, lo, hi, old=None) -> int:
        """Accesses producing (lo, hi) at ts; ``old`` = the (lo, hi) they must find (None:
        unchecked, a write whose old value is witnessed)."""
        n = np.asarray(ts).size
        chk = old is not None
        old = old if chk else (0, 0)
        arr = [np.broadcast_to(np.asarray(x, dtype=np.int64), (n,)) for x in
               (space, addr, ts, lo, hi, old[0], old[1])]
        self._parts.append(arr + [np.full(n, chk)])
        return len(self._parts) - 1

    def resolve(self) -> None:
        if not self._parts:
            self._parts.append([np.zeros(0, np.int64)] * 7 + [np.zeros(0, bool)])
        space, addr, ts, lo, hi, olo, ohi, chk = (np.concatenate([p[k] for p in self._parts])
                                                  for k in range(8))
        if ts.size and (ts.min() < 1 or ts.max() >= 1 << TS_GAP_BITS):
            raise ValueError("a timestamp outside [1, 2^26)")
        key = (space << 30) | addr
        order = np.argsort((key << TS_GAP_BITS) | ts, kind="stable")
        k, t = key[order], ts[order]
        first = np.ones(k.size, dtype=bool)
        first[1:] = k[1:] != k[:-1]
        if np.any((k[1:] == k[:-1]) & (t[1:] == t[:-1])):
            raise ValueError("two accesses to one address at one timestamp")
        slo, shi = lo[order], hi[order]
        # an address's first access finds its initial value, the others their predecessor's
        # (the initial values of the distinct addresses only)
        fi = np.flatnonzero(first)
        plo, phi, pts = _previous(slo), _previous(shi), _previous(t)
        plo[fi], phi[fi] = self._init(k[fi])
        pts[fi] = 0
        c, xlo, xhi = chk[order], olo[order], ohi[order]
        bad = c & ((plo != xlo) | (phi != xhi))
        if np.any(bad):
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"trace: an access to space {k[i] >> 30} address "
                             f"{k[i] & (2**30 - 1)} at ts {t[i]} expects ({xlo[i]}, {xhi[i]}), "
                             f"the memory holds ({plo[i]}, {phi[i]})")
        inv = np.empty_like(order)
        inv[order] = np.arange(order.size)
        last = np.ones(k.size, dtype=bool)
        last[:-1] = k[1:] != k[:-1]
        self._resolved = (inv, pts, plo, phi, ts)
        self.final = (k[last], slo[last], shi[last], t[last])
        self._offsets = np.cumsum([0] + [p[0].size for p in self._parts])

    def _init(self, key):
        space, addr = key >> 30, key & ((1 << 30) - 1)
        lo = np.zeros(key.size, np.int64)
        hi = np.zeros(key.size, np.int64)
        reg = space == REG
        lo[reg] = self.reg_init[addr[reg]] & 0xFFFF
        hi[reg] = self.reg_init[addr[reg]] >> 16
        cur = reg & (addr >= 33)            # the cursors: one element in the lo slot
        lo[cur], hi[cur] = self.reg_init[addr[cur]], 0
        mem = np.flatnonzero(space == MEMORY)
        if mem.size and self.image_wa.size:
            j = np.minimum(np.searchsorted(self.image_wa, addr[mem]), self.image_wa.size - 1)
            hit = self.image_wa[j] == addr[mem]
            w = np.where(hit, self.image_word[j], 0)
            lo[mem], hi[mem] = w & 0xFFFF, w >> 16
        return lo, hi

    def previous(self, handle: int):
        """(prev_ts, prev_lo, prev_hi, ts) of the accesses added under ``handle``."""
        inv, pts, plo, phi, ts = self._resolved
        s = slice(self._offsets[handle], self._offsets[handle + 1])
        j = inv[s]
        return pts[j], plo[j], phi[j], ts[s]

    def finals(self, space: int):
        """(addresses, final lo, final hi, final ts) of every accessed address of a space."""
        k, lo, hi, t = self.final
        sel = (k >> 30) == space
        return k[sel] & ((1 << 30) - 1), lo[sel], hi[sel], t[sel]


def _previous(a: np.ndarray) -> np.ndarray:
    """a shifted by one (a[-1] first): np.roll(a, 1) without its index arithmetic."""
    out = np.empty_like(a)
    out[1:] = a[:-1]
    if a.size:
        out[0] = a[-1]
    return out


__all__ = ["Rows", "Accesses"]
