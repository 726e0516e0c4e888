"""Shared pieces of bench/device_check.py: constants, sizes, the report, the time-budgeted
runner, the device handle (numba.cuda + cupy, or the simulator) and the check context."""
from __future__ import annotations

import gc
import os
import threading
import time
import traceback

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

import numpy as np  # noqa: E402

P = 2013265921
SPEC_IN = [894848333, 1437655012, 1200606629, 1690012884, 71131202, 1749206695, 1717947831,
           120589055, 19776022, 42382981, 1831865506, 724844064, 171220207, 1299207443,
           227047920, 1783754913]
SPEC_OUT = [516096821, 90309867, 1101817252, 1660784290, 360715097, 1789519026, 1788910906,
            563338433, 319524748, 1741414159, 1650859320, 894311162, 1121347488, 1692793758,
            1052633829, 1344246938]
P2_TARGET = 1e9             # Poseidon2 permutations per second
LDE_TARGET = 0.5            # coset LDE effective bandwidth / copy bandwidth
# bench/make_block.py's defaults (block format 2: 25 % of the cycles in Poseidon2 precompile
# calls, seed 1)
BLOCK_ARGS = dict(hash_share=0.25, seed=1)
# Host proving time per extra bit of k, from the host table of docs/benchmarks.md
# (2^12 -> 2^14: x1.8, 2^14 -> 2^16: x5.6, 2^16 -> 2^18: x6.0; above: assumed x6 per 2 bits).
PER_BIT = {11: 1.4, 12: 1.4, 13: 1.35, 14: 1.35, 15: 2.37, 16: 2.37, 17: 2.45, 18: 2.45}

# name -> sizes.  ntt: (rows, log n); lde: (columns, log n, log blowup); p2: log states;
# merkle: (log rows, width); stage: log n of the FRI layer / OOD polynomials; first_k: the
# block 2^k compared (device vs host proof bytes) before any microbenchmark.  hash_block:
# threads per block of the hash kernels in the simulator, whose per-module lock around
# every device-function call makes blocks of several hashing threads crawl (minutes).
SIZES = {
    # full: the multi-column NTT/LDE read 256 MB, several times the H200's 60 MB L2, so
    # repeated timed calls on one buffer measure device memory, not the cache (HOPPER.md,
    # METHOD.md); the single-column 2^22 transform (16 MB) is the long-stride case
    "full": dict(copy_mib=1024, h2d_mib=256, reps=5, ntt=[(64, 20), (1, 22)],
                 lde=[(64, 20, 1), (1, 22, 1)], p2=22, p2_sample=16, merkle=(22, 16),
                 stage=20, ood_cols=16, warm_k=10, first_k=10, e2e=[16, 18, 20]),
    "quick": dict(copy_mib=256, h2d_mib=64, reps=3, ntt=[(4, 16), (1, 18)],
                  lde=[(4, 16, 1), (1, 18, 1)], p2=18, p2_sample=14, merkle=(16, 16),
                  stage=16, ood_cols=4, warm_k=10, first_k=10, e2e=[12, 14]),
    "sim": dict(copy_mib=1, h2d_mib=1, reps=1, ntt=[(2, 9), (1, 10)],
                lde=[(2, 8, 1), (1, 9, 1)], p2=5, p2_sample=4, merkle=(4, 16),
                stage=9, ood_cols=2, warm_k=10, first_k=10, e2e=[11, 12], e2e_backend="emu",
                hash_block=1),
}
SECTIONS = ("copy", "ntt", "lde", "poseidon2", "merkle", "stage", "e2e")


#: the time budget of a lent machine's one command (600 s): no check is running past
#: HARD_S, and none starts after SOFT_S (device_check --budget / --soft)
HARD_S, SOFT_S = 590.0, 480.0


# ----------------------------------------------------------------------------- preflight
def preflight(sim: bool) -> dict:
    """What must hold before a device run spends its minutes, checked without a device:
    package versions; NVVM (numba-cuda's compiler; the simulator needs none); numba's
    threading layer in use (the host kernels are ``parallel=True`` and run from several
    pipeline threads: ``workqueue`` would abort the process); the kernel cache directory
    and whether it is writable.  -> {"ok": bool, "failures": [...], ...}."""
    import importlib.metadata as md
    out: dict = {"failures": []}
    fail = out["failures"].append
    for pkg in ("numba", "numba-cuda"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
            fail(f"{pkg} is not installed")
    cupy = next((v for v in (_version(n) for n in ("cupy-cuda13x", "cupy-cuda12x", "cupy"))
                 if v), None)
    if sim:
        out["cupy"] = cupy or "n/a (sim)"
        out["nvvm"] = "simulator (compiles nothing)"
    else:
        out["cupy"] = cupy
        if cupy is None:
            fail("cupy is not installed (pip install -e '.[gpu]', or '.[gpu12]' for CUDA 12)")
        try:
            from numba.cuda.cudadrv import nvvm
            if not nvvm.is_available():
                raise RuntimeError("libNVVM not found")
            v = nvvm.NVVM()
            out["nvvm"] = ".".join(map(str, v.get_version())) + \
                " (IR " + ".".join(map(str, v.get_ir_version())) + ")"
        except Exception as exc:  # noqa: BLE001 - report it
            out["nvvm"] = None
            fail(f"NVVM not usable ({type(exc).__name__}: {exc}); numba-cuda cannot compile "
                 "kernels: pip install 'numba-cuda[cu13]' (or [cu12])")
    from steadfast.kernels.backend import threading_layer
    layer, why = threading_layer()
    out["threading_layer"] = layer
    if why:
        fail(why)
    from steadfast.kernels import kernel_cache as kc
    try:
        root = kc.cache_root()
    except Exception as exc:  # noqa: BLE001 - a bad PROVER_KERNEL_CACHE
        root = None
        fail(f"kernel cache: {exc}")
    if root is None:
        out["kernel_cache"] = {"dir": None, "writable": False, "note": "disabled (cold compiles)"}
    else:
        d = kc.cache_dir()
        ok = False
        if d is not None:
            probe = d / f".preflight-{os.getpid()}"
            try:
                probe.write_bytes(b"ok")
                probe.unlink()
                ok = True
            except OSError:
                pass
        out["kernel_cache"] = {"dir": str(d or root), "writable": ok,
                               "warm": bool(d is not None and any(d.iterdir()))}
        if not ok:
            fail(f"kernel cache {d or root} is not writable (set PROVER_KERNEL_CACHE to a "
                 "writable folder, or 0 to compile without one)")
    try:
        from steadfast import _vector_width as vw
        out["cpu_features"] = vw.applied() or "numba's default"
    except Exception:  # noqa: BLE001 - informative only
        pass
    out["ok"] = not out["failures"]
    return out


def preflight_line(pf: dict) -> str:
    """The one line device_check prints."""
    kc = pf.get("kernel_cache") or {}
    cache = (f"{kc.get('dir')} ({'writable' if kc.get('writable') else 'NOT writable'}"
             f"{', warm' if kc.get('warm') else ', cold'})") if kc.get("dir") else "off"
    body = (f"numba {pf.get('numba')}, numba-cuda {pf.get('numba-cuda')}, cupy {pf.get('cupy')}, "
            f"NVVM {pf.get('nvvm')}, threading layer {pf.get('threading_layer')}, "
            f"kernel cache {cache}")
    if pf["ok"]:
        return "preflight: ok -- " + body
    return "preflight: FAILED -- " + "; ".join(pf["failures"]) + " -- " + body


def _version(pkg: str):
    import importlib.metadata as md
    try:
        return md.version(pkg)
    except md.PackageNotFoundError:
        return None


# ----------------------------------------------------------------------------- report
def fmt_s(s) -> str:
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    return f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.2f} s"


def fmt_bw(bps: float) -> str:
    return f"{bps / 1e9:.0f} GB/s" if bps >= 1e10 else f"{bps / 1e6:.3g} MB/s"


def yn(ok: bool) -> str:
    return "yes" if ok else "no"


class Report:
    """Rows of the summary (thread-safe); every row is also printed as it is added."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self.rows: list = []
        self.extra: dict = {}
        self.lock = threading.Lock()
        self.closed = False

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def add(self, check, size, identical, time_s=None, rate="", ratio="", note="", **data):
        row = dict(check=check, size=size, identical=identical, time_s=time_s, rate=rate,
                   ratio=ratio, note=note, at_s=round(self.elapsed(), 2), data=data)
        with self.lock:
            if self.closed:
                return
            self.rows.append(row)
        print(f"[{self.elapsed():6.1f}s] {check} {size}: identical {identical}, "
              f"{fmt_s(time_s)}, {rate} {ratio} {note}".rstrip(), flush=True)

    def table(self) -> str:
        head = ("check", "size", "identical", "time", "rate", "ratio", "note")
        body = [(r["check"], r["size"], r["identical"], fmt_s(r["time_s"]), r["rate"],
                 r["ratio"], r["note"]) for r in self.rows]
        w = [max(len(str(x)) for x in col) for col in zip(head, *body)]
        w[-1] = 0
        line = lambda r: " | ".join(str(x).ljust(n) for x, n in zip(r, w)).rstrip()  # noqa: E731
        return "\n".join([line(head), "-+-".join("-" * max(n, 4) for n in w)] +
                         [line(r) for r in body])


class Runner:
    """Runs each check in a daemon thread under the time budget (see the module docstring)."""

    def __init__(self, report: Report, soft: float, hard: float):
        self.report, self.soft, self.hard = report, soft, hard
        self.abandoned = False

    def left(self) -> float:
        return self.hard - self.report.elapsed()

    def call(self, name: str, fn, need: float = 0.0):
        """-> (status, value, note); status: ok | skipped | error | timeout."""
        el = self.report.elapsed()
        if self.abandoned:
            return "skipped", None, "an earlier check timed out and still runs"
        if el > self.soft:
            return "skipped", None, f"time budget: {el:.0f}s elapsed > {self.soft:.0f}s"
        if need and el + need > self.hard - 5:
            return "skipped", None, f"predicted {need:.0f}s does not fit the {self.left():.0f}s left"
        box: dict = {}

        def target():
            try:
                box["value"] = fn()
            except BaseException as exc:  # noqa: BLE001 - every failure becomes a row
                box["error"] = exc
                box["tb"] = traceback.format_exc()

        th = threading.Thread(target=target, name=f"check-{name}", daemon=True)
        th.start()
        th.join(max(1.0, self.left()))
        if th.is_alive():
            self.abandoned = True
            return "timeout", None, f"still running at {self.report.elapsed():.0f}s; abandoned"
        if "error" in box:
            print(f"--- {name} failed:\n{box['tb']}", flush=True)
            exc = box["error"]
            return "error", None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:160]
        return "ok", box.get("value"), ""

    def run(self, name: str, size: str, fn, need: float = 0.0):
        """``fn`` adds its own row(s); a skip, error or timeout adds one here."""
        status, value, note = self.call(name, fn, need)
        if status != "ok":
            self.report.add(name, size, status, note=note)
        return value


# ----------------------------------------------------------------------------- device
class Dev:
    """numba.cuda (+ cupy on a GPU): synchronisation, timing, VRAM sampling."""

    def __init__(self, sim: bool):
        self.sim = sim
        from numba import cuda
        self.cuda = cuda
        self.cp = None
        self.cp_error = "n/a (sim)" if sim else ""
        if not sim:
            try:
                import cupy
                self.cp = cupy
            except Exception as exc:  # noqa: BLE001
                self.cp_error = f"cupy unavailable: {exc}"
        try:
            from numba.core.errors import NumbaPerformanceWarning
            import warnings
            warnings.simplefilter("ignore", NumbaPerformanceWarning)
        except ImportError:
            pass
        self.cuda.to_device(np.zeros(1, np.uint32)).copy_to_host()    # create the context

    def sync(self) -> None:
        self.cuda.synchronize()

    def time(self, fn, reps: int):
        """(first-call seconds, [timed seconds]) -- events on a GPU, perf_counter in sim."""
        self.sync()
        t0 = time.perf_counter()
        fn()
        self.sync()
        first = time.perf_counter() - t0
        out = []
        for _ in range(max(1, reps)):
            if self.cp is not None:
                a, b = self.cp.cuda.Event(), self.cp.cuda.Event()
                a.record()
                fn()
                b.record()
                b.synchronize()
                out.append(self.cp.cuda.get_elapsed_time(a, b) / 1e3)
            else:
                self.sync()
                t0 = time.perf_counter()
                fn()
                self.sync()
                out.append(time.perf_counter() - t0)
        return first, out

    def free_all(self) -> None:
        gc.collect()
        try:                # numba's deferred frees of device memory, then its other cleanups
            ctx = self.cuda.current_context()
            ctx.memory_manager.deallocations.clear()
            ctx.deallocations.clear()
        except Exception:  # noqa: BLE001 - the simulator has no deallocation queue
            pass
        if self.cp is not None:
            self.cp.get_default_memory_pool().free_all_blocks()
            from steadfast.kernels.backend import trim_pools
            trim_pools()                 # each prover's DeviceMemory has its own pool

    def used(self):
        if self.cp is None:
            return None
        free, total = self.cp.cuda.runtime.memGetInfo()
        return total - free


class VramPeak:
    """Samples device memory in use (cudaMemGetInfo, every 10 ms) while the block runs."""

    def __init__(self, dev: Dev):
        self.dev, self.peak, self.base = dev, None, None
        self._stop = threading.Event()
        self._th = None

    def __enter__(self):
        if self.dev is None or self.dev.cp is None:
            return self
        self.base = self.peak = self.dev.used()

        def poll():
            try:
                self.dev.cp.cuda.Device(0).use()
                while not self._stop.wait(0.01):
                    self.peak = max(self.peak, self.dev.used())
            except Exception:  # noqa: BLE001 - sampling is best effort
                pass
        self._th = threading.Thread(target=poll, daemon=True)
        self._th.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._th is not None:
            self._th.join(1.0)
        return False

    @property
    def delta(self):
        return None if self.peak is None else self.peak - self.base


# ----------------------------------------------------------------------------- checks
class Ctx:
    def __init__(self, args, sizes, report, runner):
        self.args, self.S, self.report, self.runner = args, sizes, report, runner
        self.dev: Dev | None = None
        self.copy_bw = None          # bytes/s, read + write counted
        self.p2_rate = None
        self.rng = np.random.default_rng(args.seed)

    def rand(self, shape) -> np.ndarray:
        return self.rng.integers(0, P, shape, dtype=np.uint32)

    def vs_copy(self, bw) -> str:
        return "n/a" if not self.copy_bw else f"{bw / self.copy_bw:.0%} of copy"

    def timing(self, first: float, t: float, host_s: float | None = None) -> str:
        """'compile Xs; host Ys (xZ)': compile = first call - median timed call."""
        comp = "n/a (sim)" if self.dev.sim else f"{max(0.0, first - t):.2f}s"
        out = f"compile {comp}"
        if host_s is not None:
            r = host_s / t
            out += f"; host {fmt_s(host_s)} (x{r:.0f})" if r >= 10 else f"; host {fmt_s(host_s)} (x{r:.2g})"
        return out




# ----------------------------------------------------------------------------- warm-up
# The cold start is compilation: NVVM and ptxas for every device kernel (single-threaded,
# 246 s for the 60 kernels on the 2-core development VM) and numba's host kernels on a
# first proof.  A lent machine has 16 cores: device_check starts child processes right
# after the preflight that compile disjoint parts of the device kernels into the kernel
# cache (PROVER_KERNEL_CACHE) and, in one more, prove a small block on the host (numba's
# on-disk cache of the host kernels), while the parent initialises the device; the
# parent's precompile then waits for the parts and loads everything from the cache.

def warm_part(kind: str, part: int, parts: int, k: int, backend: str) -> None:
    """A warm-up child's work.  ``precompile``: ``Prover.precompile_txblock`` of the 2^k block,
    compiling only the kernels whose name hashes to ``part`` (mod ``parts``); ``host``:
    one host proof of that block."""
    from steadfast.prover.api import Prover, ProverConfig
    block = sized_block(k)
    if kind == "host":
        Prover(ProverConfig(backend="host")).prove_block(block)
        return
    partition_dispatchers(part, parts)
    Prover(ProverConfig(backend=backend)).precompile_txblock(block)


def sized_block(k: int):
    """``bench/make_block.py -k K`` at its defaults (BLOCK_ARGS): a block of RISC-V
    transactions (format 2) of about 2^k cycles (k >= 10), parsed
    (:class:`rv32.blockfile.Block`)."""
    from bench.make_block import v2_block
    from steadfast.rv32.blockfile import parse_block
    return parse_block(v2_block(int(k), **BLOCK_ARGS)[0])


def in_part(name: str, part: int, parts: int) -> bool:
    """Whether kernel ``name`` is compiled by warm-up part ``part`` of ``parts``."""
    import zlib
    return zlib.crc32(name.encode()) % parts == part


class _OtherPart:
    """A kernel another warm-up part compiles: ``compile`` does nothing here."""

    def compile(self, sig):
        return None


def partition_dispatchers(part: int, parts: int) -> None:
    """(A warm-up child only: process-wide) make ``devicelib.DISPATCHERS`` hand out the
    real dispatcher only for this part's kernels, so that ``Prover.precompile`` compiles
    just those (the generated kernels register into it as they are generated)."""
    from steadfast.kernels import devicelib

    class _Part(dict):
        def __getitem__(self, name):
            disp = dict.__getitem__(self, name)
            return disp if in_part(name, part, parts) else _OtherPart()
    devicelib.DISPATCHERS = _Part(devicelib.DISPATCHERS)


class Warmup:
    """The warm-up children (see above); ``jobs`` precompile parts (0: none) and one host
    proof when ``host``."""

    def __init__(self, jobs: int, k: int, backend: str, host: bool):
        import subprocess
        import sys
        import tempfile
        self.t0 = time.perf_counter()
        self.procs: dict = {}
        self.logs: dict = {}
        self._dir = tempfile.mkdtemp(prefix="device-check-warm-")
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
        env.setdefault("NUMBA_NUM_THREADS", "2")   # compiling is single-threaded
        work = [("precompile", i) for i in range(jobs)] + ([("host", 0)] if host else [])
        for kind, i in work:
            code = (f"from bench.device_common import warm_part; "
                    f"warm_part({kind!r}, {i}, {max(1, jobs)}, {int(k)}, {backend!r})")
            self.logs[(kind, i)] = path = os.path.join(self._dir, f"{kind}-{i}.log")
            with open(path, "w") as log:
                self.procs[(kind, i)] = subprocess.Popen([sys.executable, "-c", code], env=env,
                                                         cwd=root, stdout=log, stderr=log)

    def wait_precompile(self, timeout: float) -> dict:
        """Wait (at most ``timeout`` s) for the precompile parts -> {part: exit status or
        "running"}, the seconds since they started."""
        import subprocess
        end = time.perf_counter() + max(0.0, timeout)
        out = {}
        for (kind, i), p in self.procs.items():
            if kind != "precompile":
                continue
            try:
                out[i] = p.wait(max(0.0, end - time.perf_counter()))
            except subprocess.TimeoutExpired:
                out[i] = "running"
        return {"parts": out, "seconds": time.perf_counter() - self.t0}

    def status(self) -> dict:
        """{"KIND I": {"exit": status or "running", "tail": the log's last 400 chars}}."""
        out = {}
        for key, p in self.procs.items():
            try:
                with open(self.logs[key], errors="replace") as fh:
                    tail = fh.read()[-400:]
            except OSError:
                tail = ""
            out[f"{key[0]} {key[1]}"] = {"exit": p.poll() if p.poll() is not None else "running",
                                         "tail": tail}
        return out

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
