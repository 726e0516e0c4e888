"""Installing the stand-in: the ``cupy`` modules put in ``sys.modules`` and the patches
to numba's CUDA simulator (:func:`install`; the package docstring lists them)."""
from __future__ import annotations

import importlib.machinery
import sys
import threading
import types

import numpy as np

from .state import (CAPACITY, STREAM_USES, STRICT, _caller, _count, _defers, _drain,
                    _enqueue, _host_wait, _live_streams, _lock, _wait)
from .memory import (CUDADriverError, CUDARuntimeError, Device, MemoryPool,
                     OutOfMemoryError, Stream, get_current_stream, get_default_memory_pool,
                     using_allocator)
from .arrays import MemoryPointer, asarray, empty, ndarray, zeros
from .numba_emm import (GetIpcHandleMixin, HostOnlyCUDAMemoryManager, NumbaMemoryPointer,
                        _CTX, _NumbaDefaultManager, _numba_alloc, set_memory_manager)

# ---------------------------------------------------------------------------- installing

def _cupy_modules() -> tuple:
    """Module objects ``cupy``, ``cupy.cuda``, ``cupy.cuda.memory`` exposing only the
    modelled API (this module's helpers stay out of cupy's namespace)."""
    memory = types.ModuleType("cupy.cuda.memory")
    memory.OutOfMemoryError = OutOfMemoryError
    memory.MemoryPointer = MemoryPointer
    memory.MemoryPool = MemoryPool
    driver = types.ModuleType("cupy.cuda.driver")
    driver.CUDADriverError = CUDADriverError
    runtime = types.ModuleType("cupy.cuda.runtime")
    runtime.CUDARuntimeError = CUDARuntimeError
    cuda = types.ModuleType("cupy.cuda")
    cuda.driver, cuda.runtime = driver, runtime
    cuda.Stream = Stream
    cuda.Device = Device
    cuda.get_current_stream = get_current_stream
    cuda.memory = memory
    cuda.MemoryPointer = MemoryPointer
    cuda.MemoryPool = MemoryPool
    cuda.using_allocator = using_allocator
    cupy = types.ModuleType("cupy")
    cupy.__version__ = "0.0.0+fake"
    cupy.ndarray = ndarray
    cupy.empty, cupy.zeros, cupy.asarray = empty, zeros, asarray
    cupy.get_default_memory_pool = get_default_memory_pool
    cupy.uint8, cupy.uint32, cupy.uint64 = np.uint8, np.uint32, np.uint64
    cupy.cuda = cuda
    for mod, pkg in ((cupy, True), (cuda, True), (memory, False), (driver, False),
                     (runtime, False)):
        # importlib.util.find_spec reads sys.modules[name].__spec__ (kernels/backend.py)
        mod.__spec__ = importlib.machinery.ModuleSpec(mod.__name__, None, is_package=pkg)
        if pkg:
            mod.__path__ = []
    return cupy, cuda, memory

def _is_numba_stream(cuda, s) -> bool:
    return s is None or (isinstance(s, int) and s == 0) or isinstance(s, cuda.stream)


def _stream_use(cuda, site: str, s) -> None:
    """Check a stream argument the way numba-cuda does and log it (see STREAM_USES)."""
    if not _is_numba_stream(cuda, s):
        raise TypeError(f"{site}: expected a Stream object or 0, got {type(s).__name__}")
    ext = getattr(s, "ext_ptr", None) if s else 0
    cur = get_current_stream().ptr
    entry = (site, threading.current_thread().name, ext, cur, "" if ext == cur else _caller())
    with _lock:
        STREAM_USES.append(entry)


def install(strict: bool = False, capacity: int | None = None):
    """Register the fake as ``cupy`` and patch numba's CUDA simulator (see the package
    docstring).  Needs ``NUMBA_ENABLE_CUDASIM=1``; idempotent; returns the cupy module.

    ``strict``: the pool-accurate mode -- cupy allocations come from the modelled pool,
    numba's (simulator) allocations go through the installed EMM plugin or else count as
    numba's own memory outside the pool, the device has ``capacity`` bytes in all, and
    ``as_cuda_array(sync=True)`` / a cupy array handed to a launch / ``cupy.asarray`` of a
    numba array made on a stream count a host wait on the exporting stream
    (``CALLS["cai_sync"]``, ``SYNC_WAITS``), and stream work is deferred to sync points
    (``DEFER[0] = False`` turns that part off)."""
    STRICT[0] = STRICT[0] or bool(strict)
    if capacity is not None:
        CAPACITY[0] = int(capacity)
    if isinstance(sys.modules.get("cupy"), types.ModuleType) and \
            getattr(sys.modules["cupy"], "ndarray", None) is ndarray:
        return sys.modules["cupy"]
    from numba import cuda
    from numba.cuda.core import config
    if not config.ENABLE_CUDASIM:
        raise RuntimeError("fake_cupy needs numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1)")
    from numba.cuda.simulator import kernel as simkernel
    from numba.cuda.simulator.cudadrv import devicearray as simarray
    FakeCUDAArray = simarray.FakeCUDAArray

    cupy, cuda_mod, memory = _cupy_modules()
    sys.modules.update({"cupy": cupy, "cupy.cuda": cuda_mod, "cupy.cuda.memory": memory,
                        "cupy.cuda.driver": cuda_mod.driver, "cupy.cuda.runtime": cuda_mod.runtime})

    class ExternalStream(cuda.stream):
        """A numba stream wrapping a foreign (here: fake cupy) stream handle."""

        def __init__(self, ptr):
            self.ext_ptr = ptr

        def synchronize(self):
            _count("numba_stream_synchronize")
            _wait("numba stream")
            _drain(self.ext_ptr)

        def __repr__(self):
            return f"<numba external stream 0x{self.ext_ptr:x}>"

    def external_stream(ptr):
        _count("external_stream")
        if not isinstance(ptr, int):
            raise TypeError(f"ptr for an external stream must be an int, got {type(ptr).__name__}")
        if ptr and ptr not in _live_streams:
            raise ValueError(f"0x{ptr:x} is not a stream handle")
        return ExternalStream(ptr)

    def as_cuda_array(obj, sync=True):
        _count("as_cuda_array")
        if sync:
            _host_wait("as_cuda_array(sync=True)")
            _drain(get_current_stream().ptr)      # the exporting stream (cupy's current)
        if not isinstance(obj, ndarray):
            raise TypeError("*obj* doesn't implement the cuda array interface.")
        cai = obj.__cuda_array_interface__
        if cai["data"][0] != obj._a.ctypes.data or cai["shape"] != obj._a.shape:
            raise RuntimeError("fake cupy: inconsistent __cuda_array_interface__")
        view = FakeCUDAArray(obj._a)                 # zero-copy: shares the memory
        if obj._fk is not None:
            view._fk = obj._fk                       # numba's view keeps its owner alive
        return view

    class Event:
        def __init__(self, timing=True):
            self.timing = timing

        def record(self, stream=0):
            _stream_use(cuda, "event.record", stream)
            self.ptr = getattr(stream, "ext_ptr", 0) if stream else 0

        def wait(self, stream=0):
            # (conservative) the waiting stream's later work sees everything the
            # recording stream had queued: run it now
            _stream_use(cuda, "event.wait", stream)
            _drain(getattr(self, "ptr", 0))

        def synchronize(self):
            _wait("event")
            _drain(getattr(self, "ptr", 0))

        def elapsed_time(self, other):
            if not (self.timing and other.timing):
                raise RuntimeError("elapsed_time needs events created with timing=True")
            return 0.5

    orig_call = simkernel.FakeCUDAKernel.__call__
    orig_getitem = simkernel.FakeCUDAKernel.__getitem__

    def launch(self, *args):
        if self._device or simkernel._kernel_context:     # a device function call
            return orig_call(self, *args)
        conv = []
        for a in args:
            if isinstance(a, ndarray):
                _count("launch_with_cupy_arg")
                _host_wait("launch with a cupy argument (auto_device, sync)")
                a = FakeCUDAArray(a._a)
            elif isinstance(a, Stream):
                raise TypeError("a cupy stream passed as a kernel argument")
            conv.append(a)
        cfg = getattr(self, "_fake_config", None)
        ptr = getattr(cfg[2], "ext_ptr", 0) if cfg is not None and len(cfg) >= 3 and cfg[2] \
            else 0
        if not _defers(ptr) or any(isinstance(a, np.ndarray) for a in conv):
            # (host arrays as arguments: numba copies them synchronously around the launch)
            _drain(ptr)
            return orig_call(self, *conv)

        # a launch holds the memory it reads, never the allocations: fresh views without
        # the owner token (``_fk``), so a block whose last owner drops it goes back to the
        # pool while this launch is still queued, as on a GPU
        conv = tuple(FakeCUDAArray(a._ary, a.stream) if isinstance(a, FakeCUDAArray) else a
                     for a in conv)

        def run(kernel=self, cfg=cfg, conv=conv):
            orig_getitem(kernel, cfg)
            orig_call(kernel, *conv)
        _enqueue(ptr, "launch", run)

    def configure(self, config):                 # kernel[grid, block, stream, shared]
        _count("launch")
        _stream_use(cuda, "launch", config[2] if len(config) >= 3 else 0)
        self._fake_config = tuple(config)
        return orig_getitem(self, config)

    orig_to_device, orig_device_array = cuda.to_device, cuda.device_array
    orig_to_host = FakeCUDAArray.copy_to_host
    orig_from_host = FakeCUDAArray.copy_to_device

    def _ptr(stream):
        return getattr(stream, "ext_ptr", 0) if stream else 0

    def to_device(ary, stream=0, copy=True, to=None):
        _stream_use(cuda, "to_device", stream)
        ptr = _ptr(stream)
        if to is None and _defers(ptr) and isinstance(ary, np.ndarray):
            # a fresh buffer (not yet written: poison) and the copy queued on the stream
            host = np.array(ary, copy=True)
            poison = np.empty_like(host)
            poison.reshape(-1).view(np.uint8).fill(0xFF)     # all ones: not a field element
            out = orig_to_device(poison, stream=stream)
            _enqueue(ptr, "to_device", lambda: orig_from_host(out, host))
        else:
            _drain(ptr)
            out = orig_to_device(ary, stream=stream, copy=copy, to=to)
        if to is None:
            out._fake_stream_ptr = ptr
        return _numba_alloc(out) if STRICT[0] and to is None else out

    def device_array(*args, **kwargs):
        _stream_use(cuda, "device_array", kwargs.get("stream", 0))
        out = orig_device_array(*args, **kwargs)
        out._fake_stream_ptr = _ptr(kwargs.get("stream", 0))
        return _numba_alloc(out) if STRICT[0] else out

    def copy_to_host(self, ary=None, stream=0):
        _stream_use(cuda, "copy_to_host", stream)
        if ary is not None and not isinstance(ary, np.ndarray):
            raise TypeError(f"copy_to_host: destination must be a numpy array, got "
                            f"{type(ary).__name__}")
        ptr = _ptr(stream)
        if not stream:
            _wait("copy_to_host")                 # a synchronous copy: the host waits
        if not _defers(ptr):
            return orig_to_host(self, ary, stream=stream)
        # asynchronous: the destination holds the data only after the stream's sync
        dst = ary if ary is not None else np.empty(self.shape, self.dtype)
        _enqueue(ptr, "copy_to_host", lambda: orig_to_host(self, dst))
        return dst

    def copy_to_device(self, ary, stream=0):
        _stream_use(cuda, "copy_to_device", stream)
        if isinstance(ary, ndarray):     # numba-cuda would take it by its array interface
            ary = FakeCUDAArray(ary._a)
        ptr = _ptr(stream)
        if not _defers(ptr):
            return orig_from_host(self, ary, stream=stream)
        # a host source is read now (pageable memory); a device source when it runs
        src = np.array(ary, copy=True) if isinstance(ary, np.ndarray) else ary
        _enqueue(ptr, "copy_to_device", lambda: orig_from_host(self, src))

    cuda.HostOnlyCUDAMemoryManager = HostOnlyCUDAMemoryManager
    cuda.GetIpcHandleMixin = GetIpcHandleMixin
    cuda.MemoryPointer = NumbaMemoryPointer
    cuda.MemoryInfo = __import__("collections").namedtuple("MemoryInfo", "free,total")
    cuda.set_memory_manager = set_memory_manager
    cuda.current_context = lambda devnum=None: _CTX
    cuda.external_stream = external_stream
    cuda.as_cuda_array = as_cuda_array
    cuda.is_cuda_array = lambda obj: isinstance(obj, (ndarray, FakeCUDAArray))
    cuda.event = Event
    cuda.to_device = to_device
    def synchronize():
        _wait("device")
        _drain(None)
    cuda.synchronize = synchronize
    cuda.NumbaCUDAMemoryManager = _NumbaDefaultManager
    # numba's views keep their owner's allocation (``_fk``): every FakeCUDAArray method
    # that returns a view of the same memory passes the token on
    for meth in ("__getitem__", "reshape", "view", "ravel", "transpose", "bind", "split"):
        orig = getattr(FakeCUDAArray, meth)

        def keeping(self, *a, _orig=orig, **k):
            res = _orig(self, *a, **k)
            fk = getattr(self, "_fk", None)
            if fk is not None:
                for r in (res if isinstance(res, list) else (res,)):
                    if isinstance(r, FakeCUDAArray) and np.shares_memory(r._ary, self._ary):
                        r._fk = fk
            return res
        setattr(FakeCUDAArray, meth, keeping)
    FakeCUDAArray.T = property(lambda self: self.transpose())
    cuda.device_array = device_array
    simkernel.FakeCUDAKernel.__call__ = launch
    simkernel.FakeCUDAKernel.__getitem__ = configure
    FakeCUDAArray.copy_to_host = copy_to_host
    FakeCUDAArray.copy_to_device = copy_to_device
    return cupy
