"""A proof's host buffers on ordinary pages: numpy's transparent-huge-page advice paused.

numpy advises the kernel to back every allocation of 4 MB or more with transparent huge
pages (``madvise(MADV_HUGEPAGE)``).  Where the kernel's THP setting is ``madvise`` (the
common distribution default) and so is its ``defrag`` setting, the first touch of such a
buffer waits for the kernel to find -- compact, if need be -- and zero whole 2 MB pages.
A proof allocates several GB of short-lived buffers (traces, LDEs, trees, quotient parts)
and touches each once: measured on this project's 2-core host (docs/benchmarks.md, "A
proof's buffers on ordinary pages"), the 2^20 program's proof spent 8.5-9.8 s of system
time with the advice and 3.5-4.3 s without, and the 2^18 block's prove phase went
7.0-8.1 -> 5.8-7.5 s.

:func:`small_pages` pauses the advice for the duration of a proof and restores the
caller's setting afterwards; nested and concurrent proofs in one process count their
entries, and the last one out restores it.  ``STEADFAST_HUGEPAGES=numpy`` leaves numpy's
advice alone (docs/diagnostics.md).  The proof bytes do not depend on it: the pages are
the same memory.  While a proof runs, other threads of the process allocating 4 MB or
more also get ordinary pages.
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager

_MODES = ("off", "numpy")

_lock = threading.Lock()
_depth = 0
_saved: bool | None = None


def mode() -> str:
    """``STEADFAST_HUGEPAGES``: ``off`` (the default: a proof pauses numpy's huge-page
    advice) or ``numpy`` (numpy's own behaviour)."""
    m = os.environ.get("STEADFAST_HUGEPAGES", "off").strip().lower() or "off"
    if m not in _MODES:
        from ..common.errors import ConfigError          # a ValueError
        raise ConfigError(f"STEADFAST_HUGEPAGES must be 'off' or 'numpy', got {m!r}")
    return m


def _switch():
    """numpy's (getter, setter) of its huge-page advice, or None where it has none."""
    try:
        from numpy._core import multiarray as ma
    except ImportError:                                   # numpy < 2
        from numpy.core import multiarray as ma           # type: ignore[no-redef]
    get = getattr(ma, "_get_madvise_hugepage", None)
    put = getattr(ma, "_set_madvise_hugepage", None)
    return None if get is None or put is None else (get, put)


@contextmanager
def small_pages():
    """Within: numpy allocates without the huge-page advice (unless
    ``STEADFAST_HUGEPAGES=numpy``)."""
    global _depth, _saved
    sw = _switch() if mode() == "off" else None
    if sw is None:
        yield
        return
    get, put = sw
    with _lock:
        if _depth == 0:
            _saved = bool(get())
            put(False)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                put(_saved)
                _saved = None


def process_small_pages() -> None:
    """For a process that only proves (a cluster worker): the advice off for good (unless
    ``STEADFAST_HUGEPAGES=numpy``)."""
    sw = _switch() if mode() == "off" else None
    if sw is not None:
        sw[1](False)
