"""The on-disk kernel cache: compile each device kernel once per machine, toolchain and AIR.

Two layers, one directory (``PROVER_KERNEL_CACHE``; see :func:`cache_root`):

* **generated sources** (``<dir>/gen/``): the per-AIR kernels of
  :mod:`kernels.constraint_device` are written to a real module file
  ``<air>_<digest>.py`` (its first line holds the sha256 of the rest) and an index
  ``fp-<sha of the AIR fingerprint>.txt`` names the file of each fingerprint.  A second
  process finds the file by the fingerprint, checks the hash and execs it: no code
  generation.  An entry whose hash or index does not check out is ignored and rebuilt
  (:data:`STATS` counts ``gen_hit``, ``gen_miss``, ``gen_rebuilt``).
* **compiled kernels** (``<dir>/numba/``): every device kernel declared with
  :func:`kernels.devicelib.kernel` -- the stage kernels and the generated ones, which now
  live in real files -- gets numba-cuda's disk cache (:class:`KernelCache`: numba's
  index/data files, which hold the PTX and the cubin, keyed by the signature, the CUDA
  runtime version and the device's compute capability, the numba-cuda version, the
  function's bytecode and its source file's mtime and size).  A corrupt or unreadable
  entry is dropped and the kernel compiled again, never trusted.  Off the simulator
  only (the simulator compiles nothing).

``<dir>`` is ``<root>/<toolchain key>``: the key hashes the python, numba and numba-cuda
versions, :data:`GENERATOR_VERSION` and the contents of every ``kernels/*.py`` (numba's
own key does not see a change in a called device function, e.g. the field arithmetic),
so a new toolchain or kernel source gets a fresh directory and never reads an old one.
Every file is written to a unique temporary name and renamed into place (atomic on
POSIX), so concurrent writers cannot leave a torn file.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import uuid
from pathlib import Path

ENV = "PROVER_KERNEL_CACHE"
#: bump when the code generator's output changes in a way the sources hash cannot see
GENERATOR_VERSION = 3
_OFF = ("0", "off", "no", "false", "none")

#: counters of this process (tests and ``prove --precompile`` read them)
STATS = {"gen_hit": 0, "gen_miss": 0, "gen_rebuilt": 0, "codegen": 0, "numba_dropped": 0}
_LOCK = threading.Lock()


class KernelCacheError(ValueError):
    """A bad ``PROVER_KERNEL_CACHE`` value."""


def cache_root() -> Path | None:
    """The cache root, or None when disabled: ``PROVER_KERNEL_CACHE`` unset or empty ->
    ``$XDG_CACHE_HOME/steadfast/kernels`` (``~/.cache/steadfast/kernels``); ``0`` / ``off``
    -> disabled; anything else is the directory."""
    v = os.environ.get(ENV, "").strip()
    if v.lower() in _OFF:
        return None
    if v:
        return Path(v).expanduser()
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(Path.home(), ".cache")
    return Path(base) / "steadfast" / "kernels"


def _sources_digest() -> str:
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for p in sorted(here.glob("*.py")):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


_TOOLCHAIN: dict | None = None


def toolchain() -> dict:
    """What a cached kernel depends on besides its own source (computed once)."""
    global _TOOLCHAIN
    if _TOOLCHAIN is None:
        import importlib.metadata as md
        info = {"python": "%d.%d" % sys.version_info[:2], "generator": GENERATOR_VERSION,
                "sources": _sources_digest()}
        for pkg in ("numba", "numba-cuda"):
            try:
                info[pkg] = md.version(pkg)
            except md.PackageNotFoundError:
                info[pkg] = "none"
        _TOOLCHAIN = info
    return dict(_TOOLCHAIN)


def toolchain_key(info: dict | None = None) -> str:
    """16 hex digits naming the cache directory of a toolchain (:func:`toolchain`)."""
    blob = json.dumps(info if info is not None else toolchain(), sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def cache_dir() -> Path | None:
    """``<root>/<toolchain key>`` (created), or None when disabled or not creatable."""
    root = cache_root()
    if root is None:
        return None
    d = root / f"g{GENERATOR_VERSION}-{toolchain_key()}"
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return d


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a unique temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def count(key: str) -> None:
    with _LOCK:
        STATS[key] += 1


# ----------------------------------------------------------------------------- sources

_HEADER = "# steadfast generated kernels sha256="


def fingerprint_name(fingerprint) -> str:
    """The index file name of an AIR fingerprint."""
    return "fp-" + hashlib.sha256(repr(tuple(fingerprint)).encode()).hexdigest()[:32] + ".txt"


def load_source(fingerprint) -> tuple[str, Path] | None:
    """(source, module path) cached for this AIR fingerprint, or None (miss, disabled,
    or an entry that does not check out: counted in ``gen_rebuilt``, rebuilt by the caller)."""
    d = cache_dir()
    if d is None:
        return None
    idx = d / "gen" / fingerprint_name(fingerprint)
    try:
        name = idx.read_text().strip()
    except (OSError, UnicodeDecodeError):
        count("gen_miss")
        return None
    try:
        if not name.endswith(".py") or "/" in name or name.startswith("."):
            raise ValueError("bad index")
        path = d / "gen" / name
        text = path.read_text()
        head, _, body = text.partition("\n")
        if not head.startswith(_HEADER) or \
                head[len(_HEADER):] != hashlib.sha256(body.encode()).hexdigest():
            raise ValueError("hash mismatch")
    except (OSError, UnicodeDecodeError, ValueError):
        count("gen_rebuilt")
        return None
    count("gen_hit")
    return body, path


def store_source(fingerprint, name: str, source: str) -> Path | None:
    """Write the module ``<name>.py`` (unless an intact copy is there) and the
    fingerprint's index entry; -> the module path, or None when disabled / not writable."""
    d = cache_dir()
    if d is None:
        return None
    path = d / "gen" / f"{name}.py"
    text = _HEADER + hashlib.sha256(source.encode()).hexdigest() + "\n" + source
    try:
        try:
            same = path.read_text() == text
        except (OSError, UnicodeDecodeError):
            same = False
        if not same:
            atomic_write(path, text.encode())
        atomic_write(d / "gen" / fingerprint_name(fingerprint), (path.name + "\n").encode())
    except OSError:
        return None
    return path


# ----------------------------------------------------------------------------- numba layer

def numba_cache(py_func):
    """numba-cuda's disk cache for ``py_func`` in ``<dir>/numba``, or None (disabled, no
    cache directory, or a numba-cuda without the expected cache classes)."""
    d = cache_dir()
    if d is None:
        return None
    try:
        cls = _cache_class()
        return cls(py_func, str(d / "numba"))
    except Exception:  # noqa: BLE001 - no disk cache is slower, never wrong
        return None


_CLS = None


def _cache_class():
    global _CLS
    if _CLS is not None:
        return _CLS
    from numba.cuda.core import caching
    from numba.cuda.dispatcher import CUDACache, CUDACacheImpl

    class _Locator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
        path = None                        # set per cache (see KernelCache.__init__)

        def __init__(self, py_func, py_file):
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            self._cache_path = type(self).path

        def get_cache_path(self):
            return self._cache_path

    class KernelCache(CUDACache):
        """numba-cuda's CUDACache, located in the steadfast cache directory; a load
        that fails (torn, corrupt or foreign files) drops the index and compiles anew."""

        def __init__(self, py_func, path):
            loc = type("_Loc", (_Locator,), {"path": path})

            class _Impl(CUDACacheImpl):
                _locator_classes = [loc]
            self._impl_class = _Impl
            super().__init__(py_func)

        def load_overload(self, sig, target_context):
            try:
                return super().load_overload(sig, target_context)
            except Exception:  # noqa: BLE001 - unpickling garbage raises anything
                count("numba_dropped")
                self._drop()
                return None

        def save_overload(self, sig, data):
            try:
                super().save_overload(sig, data)
            except Exception:  # noqa: BLE001 - e.g. an unreadable index: start it afresh
                self._drop()
                try:
                    super().save_overload(sig, data)
                except Exception:  # noqa: BLE001 - no cache entry: slower, not wrong
                    pass

        def _drop(self):
            try:
                self._cache_file.flush()           # an empty index replaces the bad one
            except Exception:  # noqa: BLE001
                pass

    _CLS = KernelCache
    return _CLS
