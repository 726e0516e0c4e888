"""Twiddle and factor tables and argument checks shared by the host and device NTT.

Both :mod:`kernels.ntt_host` and :mod:`kernels.ntt_device` read the same Montgomery tables
(the device uploads them once) and validate sizes, shifts and blowups the same way, so
their errors and their bytes agree.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from .field import P, TWO_ADICITY, root_of_unity, to_mont_host

_TILE = 16                      # spans below 16 run in 16 x 16 tiles (the "lde" layout)


# --------------------------------------------------------------------------- tables
_LOCK = threading.Lock()
_TWIDDLES: dict[bool, np.ndarray] = {}          # inverse? -> tw[h + j] = w_{2h}^(+-j), Montgomery
_TABLES: OrderedDict = OrderedDict()             # (kind, log_n, shift) -> uint32[n], Montgomery
_MAX_TABLES = 8


def _powers(base: int, count: int) -> np.ndarray:
    """base^0, ..., base^(count-1) mod p as uint64 (vectorised by doubling)."""
    out = np.empty(max(count, 1), np.uint64)
    out[0] = 1
    m = 1
    while m < count:
        take = min(m, count - m)
        out[m:m + take] = out[:take] * np.uint64(pow(base, m, P)) % np.uint64(P)
        m += take
    return out[:count]


def _bitrev_powers(base: int, log_n: int) -> np.ndarray:
    """base^rev(j) mod p for j < 2^log_n (uint64): rev_l(2j) = rev_{l-1}(j) and
    rev_l(2j + 1) = rev_{l-1}(j) + 2^(l-1), so each level interleaves two copies."""
    out = np.ones(1, np.uint64)
    for level in range(log_n):
        nxt = np.empty(2 * out.size, np.uint64)
        nxt[0::2] = out
        nxt[1::2] = out * np.uint64(pow(base, 1 << level, P)) % np.uint64(P)
        out = nxt
    return out


def twiddles(log_n: int, inverse: bool = False) -> np.ndarray:
    """uint32 table with tw[h + j] = omega_{2h}^(+-j) (Montgomery) for every h < 2^log_n.

    The entry for a span h does not depend on the transform size, so the cached table
    is grown to the largest size asked for and serves every smaller one.
    """
    log_n = max(int(log_n), 3)
    with _LOCK:
        tab = _TWIDDLES.get(inverse)
        if tab is None or tab.size < (1 << log_n):
            n = 1 << log_n
            w = root_of_unity(log_n)
            if inverse:
                w = pow(w, P - 2, P)
            full = _powers(w, n // 2)                # w_n^i, i < n/2
            tab = np.empty(n, np.uint32)
            tab[0] = to_mont_host(1)
            h = 1
            while h < n:                             # w_{2h}^j = w_n^(j n / 2h)
                tab[h:2 * h] = to_mont_host(full[::n // (2 * h)][:h])
                h *= 2
            _TWIDDLES[inverse] = tab
        return tab


def _table(kind: str, log_n: int, shift: int) -> np.ndarray:
    """Cached per-index factor tables, Montgomery form:

    * ``pre``:  shift^j (natural order; coset_ntt scales coefficient j by it);
    * ``post``: shift^-j (coset_intt unscales coefficient j);
    * ``bitrev``: shift^rev(j) / n, the factors of the LDE's bit-reversed coefficients;
    * ``lde``: the same stored tile-transposed (entry 256 t + 16 p + g holds index
      256 t + 16 g + p) when n >= 256, as :func:`_lde_tiles` reads it;
    * ``pow`` (n >= 256): shift^j factored for the gather's mode 3 (16 + 16 + n/256
      entries): shift^a (a < 16), shift^(rev_4(b) 2^(log n - 4)) (b < 16), shift^(16 m)
      (m < n/256), so that shift^j = product of one of each.
    """
    key = (kind, log_n, shift)
    with _LOCK:
        tab = _TABLES.get(key)
        if tab is not None:
            _TABLES.move_to_end(key)
            return tab
    n = 1 << log_n
    if kind == "pre":
        tab = _powers(shift, n)
    elif kind == "post":
        tab = _powers(pow(shift, P - 2, P), n)
    elif kind == "pow":
        if n < _TILE * _TILE:
            raise ValueError(f"the pow table needs n >= 256, got {n}")
        rev4 = [int(f"{b:04b}"[::-1], 2) for b in range(_TILE)]
        tab = np.concatenate([_powers(shift, _TILE),
                              np.array([pow(shift, r << (log_n - 4), P) for r in rev4],
                                       np.uint64),
                              _powers(pow(shift, _TILE, P), n // (_TILE * _TILE))])
    elif kind == "bitrev":
        tab = _bitrev_powers(shift, log_n) * np.uint64(pow(n, P - 2, P)) % np.uint64(P)
    else:
        tab = _table("bitrev", log_n, shift)
        if n >= _TILE * _TILE:
            tab = np.ascontiguousarray(tab.reshape(-1, _TILE, _TILE).transpose(0, 2, 1)).reshape(n)
    if kind != "lde":
        tab = to_mont_host(tab)
    with _LOCK:
        _TABLES[key] = tab
        while len(_TABLES) > _MAX_TABLES:
            _TABLES.popitem(last=False)
    return tab



# --------------------------------------------------------------------------- validation
def _check_array(a, name: str) -> np.ndarray:
    """Check that ``a`` is a numpy uint32 array (TypeError naming what it is otherwise).

    Values are *not* checked against P here: this runs on the prover's hot paths, whose
    inputs are canonical by construction.  The public API (``kernels.ntt``, ``intt``,
    ``coset_lde``) adds the one-pass ``< P`` check before calling these kernels.
    """
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name}: expected a numpy uint32 array, got {type(a).__name__}")
    if a.dtype != np.uint32:
        raise TypeError(f"{name}: expected dtype uint32, got {a.dtype}")
    return a


def _log2_size(n: int, what: str, extra: int = 0) -> int:
    if n < 1 or n & (n - 1):
        raise ValueError(f"{what}: length {n} is not a power of two")
    log_n = n.bit_length() - 1
    if log_n + extra > TWO_ADICITY:
        raise ValueError(f"{what}: size 2^{log_n + extra} exceeds the two-adicity 2^{TWO_ADICITY}")
    return log_n


def _check_shift(shift) -> int:
    if isinstance(shift, (bool, np.bool_)) or not isinstance(shift, (int, np.integer)):
        raise TypeError(f"shift must be an integer field element, got {type(shift).__name__}")
    shift = int(shift)
    if not 0 < shift < P:
        raise ValueError(f"shift must be a nonzero canonical field element, got {shift}")
    return shift


def _check_blowup(log_blowup) -> int:
    if isinstance(log_blowup, (bool, np.bool_)) or not isinstance(log_blowup, (int, np.integer)):
        raise TypeError(f"log_blowup must be an integer, got {type(log_blowup).__name__}")
    if log_blowup < 0:
        raise ValueError(f"log_blowup must be >= 0, got {log_blowup}")
    return int(log_blowup)
