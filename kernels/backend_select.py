"""Backend resolution: which backend a prover runs on (``PROVER_BACKEND``: argument, else
environment, else ``auto``), whether this machine can run it (a CUDA driver, cupy, the
simulator switched on in time), and the check every backend shares -- a thread-safe numba
threading layer."""
from __future__ import annotations

import importlib.util
import os
import sys

from steadfast.errors import SteadfastError

BACKEND_NAMES = ("host", "cuda", "sim", "emu")


class BackendError(SteadfastError, RuntimeError):
    """A backend was requested that cannot be used here (message says why)."""


def _cuda_driver_usable() -> bool:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return False
    try:
        from numba import cuda
        return bool(cuda.is_available())
    except Exception:  # pragma: no cover - depends on the machine
        return False


def _cupy_installed() -> bool:
    """True if cupy (the ``gpu``/``gpu12`` extra, needed for backend ``cuda``) can be imported."""
    try:
        return importlib.util.find_spec("cupy") is not None
    except (ImportError, ValueError):  # pragma: no cover - a broken install
        return False


_NO_CUPY = ("backend 'cuda' needs cupy for device memory and streams, which is not installed; "
            "install the gpu extra: pip install -e '.[gpu]' (CUDA 13) or "
            "pip install -e '.[gpu12]' (CUDA 12)")


def enable_simulator() -> None:
    """Switch numba.cuda to its simulator; must happen before numba.cuda is imported."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return
    if "numba.cuda" in sys.modules:
        raise BackendError("backend 'sim' must be chosen before numba.cuda is imported "
                           "(set PROVER_BACKEND=sim or NUMBA_ENABLE_CUDASIM=1 at start-up)")
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"


def resolve_backend(name: str | None = None) -> str:
    """Resolve a backend name (argument, else ``PROVER_BACKEND``, else ``auto``)."""
    raw = name if name is not None else os.environ.get("PROVER_BACKEND", "auto")
    choice = raw.strip().lower()
    if choice == "auto":
        # a GPU without cupy (plain `pip install -e .`) falls back to the host, never crashes;
        # cupy first: without it the driver probe (importing numba.cuda, ~0.3 s) is moot
        choice = "cuda" if _cupy_installed() and _cuda_driver_usable() else "host"
        require_threadsafe_layer()
        return choice
    if choice not in BACKEND_NAMES:
        raise BackendError(f"unknown backend {raw!r}; choose one of "
                           f"{', '.join(BACKEND_NAMES + ('auto',))}")
    if choice == "sim":
        enable_simulator()
    elif choice == "cuda" and not _cuda_driver_usable():
        raise BackendError("backend 'cuda' requested but no usable CUDA device/driver was found")
    elif choice == "cuda" and not _cupy_installed():
        raise BackendError(_NO_CUPY)
    require_threadsafe_layer()          # every backend runs the parallel host kernels
    return choice


# ----------------------------------------------------------- numba's threading layer
#: numba's threading layers that are safe to drive from several threads at once: the host
#: kernels are ``parallel=True`` and the pipeline calls them from several table workers;
#: ``workqueue`` is not thread-safe (a concurrent launch aborts the process)
THREADSAFE_LAYERS = ("tbb", "omp")
_LAYER: list = []                  # [(layer, error or "")] once checked


def threading_layer() -> tuple[str, str]:
    """(numba's threading layer in use, "" or why it cannot be used).  Starts numba's
    thread pool if nothing has yet (the first ``parallel=True`` kernel would), so the
    answer is the layer this process really uses."""
    if _LAYER:
        return _LAYER[0]
    import numba
    try:
        from numba.np.ufunc import parallel
        parallel._launch_threads()
        layer = str(numba.threading_layer())
    except Exception as exc:  # noqa: BLE001 - e.g. NUMBA_THREADING_LAYER=tbb without tbb
        res = ("none", f"numba could not start a threading layer ({exc}); "
               f"{_LAYER_FIX}")
    else:
        res = (layer, "" if layer in THREADSAFE_LAYERS else
               f"numba's threading layer is {layer!r}, which is not thread-safe: steadfast "
               f"runs parallel host kernels from several pipeline threads at once, which "
               f"aborts the process under it; {_LAYER_FIX}")
    _LAYER.append(res)
    return res


_LAYER_FIX = ("use NUMBA_THREADING_LAYER=omp (GNU OpenMP: libgomp, e.g. apt-get install "
              "libgomp1) or tbb (pip install tbb), or leave it unset (numba then picks tbb "
              "or omp when either loads)")


def require_threadsafe_layer() -> str:
    """The threading layer in use; :class:`BackendError` (one line saying how to fix it)
    when it is not thread-safe (every backend: the host kernels run on the host ones)."""
    layer, why = threading_layer()
    if why:
        raise BackendError(why)
    return layer
