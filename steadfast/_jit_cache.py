"""numba's on-disk cache hits without the compiler's start-up (issue #38, item 4).

Before every cache lookup numba "refreshes" its CPU target: it imports and installs every
typing and lowering registry it has (numpy's, the typed containers', jitclass, ...) and
initialises its runtime (NRT).  A compilation needs the registries; a cache *hit* needs
only the runtime -- what else a cached function needs at run time (the threading layer of a
``parallel=True`` kernel, the hashing symbols) numba stores with it and re-runs on load
(its ``reload_init``).  For a process that only loads cached kernels -- a warm ``verify`` --
the registries were ~0.1 s of its 0.75 s (docs/benchmarks.md, "verify as a whole process").

:func:`adopt` gives the ``cache=True`` dispatchers of one of our modules a cache whose
lookup initialises the runtime only.  A miss is unchanged: numba's compiler refreshes the
target itself before it compiles (``CompilerBase.__init__``), and then saves to the same
cache.  Nothing else in the process changes -- a host application's own kernels keep
numba's lookup -- and the compiled code is the same either way (the cache entry is one and
the same file).  Should numba's cache class ever lack the two methods used here, the
dispatchers are left as numba made them: slower to start, never different.
"""
from __future__ import annotations

import os

try:                                    # numba's internals, checked once
    from numba.core.caching import FunctionCache as _FunctionCache
    from numba.core.runtime import rtsys as _rtsys
    _USABLE = (hasattr(_FunctionCache, "_load_overload")
               and hasattr(_FunctionCache, "_guard_against_spurious_io_errors")
               and hasattr(_rtsys, "initialize"))
except ImportError:                     # pragma: no cover - a numba without these modules
    _FunctionCache, _rtsys, _USABLE = None, None, False


if _USABLE:
    class HitCache(_FunctionCache):
        """numba's FunctionCache whose lookup starts the runtime, not the compiler."""

        def load_overload(self, sig, target_context):
            _rtsys.initialize(target_context)
            with self._guard_against_spurious_io_errors():
                return self._load_overload(sig, target_context)
else:                                   # pragma: no cover
    HitCache = None

if _USABLE:
    class NoRuntimeHitCache(_FunctionCache):
        """A lookup that starts nothing: for kernels compiled without numba's runtime."""

        def load_overload(self, sig, target_context):
            with self._guard_against_spurious_io_errors():
                return self._load_overload(sig, target_context)
else:
    NoRuntimeHitCache = None


def _stamp(path: str) -> tuple:
    st = os.stat(path)
    return (os.path.basename(path), st.st_mtime, st.st_size)


def adopt(namespace: dict, depends: tuple = ()) -> int:
    """Give every ``cache=True`` CPU dispatcher in ``namespace`` (a module's globals) the
    :class:`HitCache` lookup; returns how many it changed.

    ``depends``: file names, beside the module's own file, whose code its kernels compile
    in -- the ``inline="always"`` field functions, the intrinsics' IR generators.  numba
    keys a cache index on the defining file's stamp (mtime, size) alone, so an edit to
    such a file left the old machine code in use (a git pull that changes only the lanes
    module, say); their stamps are added to the index's, and a change to any one is a
    miss, compiled and saved under the new stamp.  A dependency that cannot be read
    leaves the stamp as numba made it."""
    if not _USABLE:                     # pragma: no cover
        return 0
    extra = ()
    if depends:
        here = os.path.dirname(os.path.abspath(namespace.get("__file__", "")))
        try:
            extra = tuple(_stamp(os.path.join(here, d)) for d in depends)
        except OSError:                 # pragma: no cover - an installed tree without a file
            extra = ()
    n = 0
    for value in list(namespace.values()):
        cache = getattr(value, "_cache", None)
        if type(cache) is _FunctionCache:
            nrt = getattr(value, "targetoptions", {}).get("_nrt", True)
            cache.__class__ = HitCache if nrt else NoRuntimeHitCache  # same state, the one overridden method
            cfile = getattr(cache, "_cache_file", None)
            if extra and cfile is not None and hasattr(cfile, "_source_stamp"):
                cfile._source_stamp = (cfile._source_stamp, extra)
            n += 1
    return n


__all__ = ["HitCache", "adopt"]
