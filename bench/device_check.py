#!/usr/bin/env python3
"""The one prepared device check: bit-identity against the host and timings on a GPU.

    PYTHONPATH=. python3 bench/device_check.py                  # the H200 run (< 5 minutes)
    PYTHONPATH=. python3 bench/device_check.py --quick          # small sizes
    PYTHONPATH=. python3 bench/device_check.py --dry-run        # numba's CUDA simulator, tiny sizes
    PYTHONPATH=. python3 bench/device_check.py --json out.json  # every figure as JSON too

Each check runs the device kernel on fresh random inputs (``--seed``; default from the
clock, printed), compares the result bit for bit with the host kernel, then times it:
the first call (JIT compile, table uploads) is reported apart as "compile", the timed
calls are bracketed by CUDA events (cupy) and the median is reported.  Under the
simulator (``--dry-run`` = ``--backend sim``) the same code paths run at tiny sizes,
cupy is absent, timing falls back to ``perf_counter`` and the cupy-only parts (copy
bandwidth, peak VRAM) are marked ``n/a (sim)``.  The simulator cannot prove a block in
minutes (an 8-row table takes ~4 minutes on a 2-core machine), so the dry run's end-to-end
part proves 2^10..2^12-cycle blocks on the ``emu`` device backend (the same script path:
warm-up, ladder, predictions); ``--e2e-backend sim --e2e-k example`` proves an 8-row
Fibonacci table on the simulator instead.

Checks, in order: copy bandwidth (device-to-device and host-to-device: the reference of
every "achieved bandwidth" ratio); NTT; coset LDE (column-major, target >= 50 % of the
copy bandwidth); Poseidon2 (SPEC known answer, a random sample against the host, and
permutations/s, target >= 1 G/s); Merkle commit; the stage kernels (FRI fold and OOD
reduction, skipped if their API differs); end-to-end block proofs, cuda vs host, on
blocks of about 2^k cycles from ``bench/make_block.py``'s generator (same defaults),
comparing the proof bytes.

Time budget: every check runs in a worker thread; none starts after ``--soft`` seconds
(default 240) or when its predicted time does not fit, and one still running at
``--budget`` seconds (default 285) is abandoned, so the summary table -- printed last,
then ``device_check: N/M identical, elapsed Xs`` -- always appears.  Exit status: 0 all
identical, 1 a mismatch, 2 an error or timeout and no mismatch.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import threading
import time
import traceback
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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
# bench/make_block.py's defaults (25 % HASH, seed 0, 1024 memory cells, 8 transactions)
BLOCK_ARGS = dict(hash_share=0.25, seed=0, memory_size=1024, table_size=256, n_tx=8)
# Host proving time per extra bit of k, from the host table of docs/benchmarks.md
# (2^12 -> 2^14: x1.8, 2^14 -> 2^16: x5.6, 2^16 -> 2^18: x6.0; above: assumed x6 per 2 bits).
PER_BIT = {11: 1.4, 12: 1.4, 13: 1.35, 14: 1.35, 15: 2.37, 16: 2.37, 17: 2.45, 18: 2.45}

# name -> sizes.  ntt: (rows, log n); lde: (columns, log n, log blowup); p2: log states;
# merkle: (log rows, width); stage: log n of the FRI layer / OOD polynomials.  hash_block:
# threads per block of the hash kernels in the simulator, whose per-module lock around
# every device-function call makes blocks of several hashing threads crawl (minutes).
SIZES = {
    "full": dict(copy_mib=1024, h2d_mib=256, reps=5, ntt=[(16, 20), (1, 22)],
                 lde=[(16, 20, 1), (1, 22, 1)], p2=22, p2_sample=16, merkle=(22, 16),
                 stage=20, ood_cols=16, warm_k=10, e2e=[16, 18, 20]),
    "quick": dict(copy_mib=256, h2d_mib=64, reps=3, ntt=[(4, 16), (1, 18)],
                  lde=[(4, 16, 1), (1, 18, 1)], p2=18, p2_sample=14, merkle=(16, 16),
                  stage=16, ood_cols=4, warm_k=10, e2e=[12, 14]),
    "sim": dict(copy_mib=1, h2d_mib=1, reps=1, ntt=[(2, 9), (1, 10)],
                lde=[(2, 8, 1), (1, 9, 1)], p2=5, p2_sample=4, merkle=(4, 16),
                stage=9, ood_cols=2, warm_k=10, e2e=[11, 12], e2e_backend="emu",
                hash_block=1),
}
SECTIONS = ("copy", "ntt", "lde", "poseidon2", "merkle", "stage", "e2e")


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
        try:
            self.cuda.current_context().deallocations.clear()
        except Exception:  # noqa: BLE001 - the simulator has no deallocation queue
            pass
        if self.cp is not None:
            self.cp.get_default_memory_pool().free_all_blocks()

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


def _med(ts):
    return statistics.median(ts)


def check_copy(ctx: Ctx) -> None:
    cp, S, add = ctx.dev.cp, ctx.S, ctx.report.add
    if cp is None:
        add("copy D2D", f"{S['copy_mib']} MiB", "n/a", note=ctx.dev.cp_error)
        add("copy H2D", f"{S['h2d_mib']} MiB", "n/a", note=ctx.dev.cp_error)
        return
    nb = S["copy_mib"] << 20
    src = cp.arange(nb // 4, dtype=cp.uint32)
    dst = cp.empty_like(src)
    _, ts = ctx.dev.time(lambda: dst.data.copy_from_device_async(src.data, nb), S["reps"])
    ok = bool(cp.array_equal(dst, src))
    t = _med(ts)
    bw_memcpy = 2 * nb / t
    dst.fill(0)
    _, ts2 = ctx.dev.time(lambda: cp.copyto(dst, src), S["reps"])
    ok = ok and bool(cp.array_equal(dst, src))
    bw_kernel = 2 * nb / _med(ts2)
    ctx.copy_bw = max(bw_memcpy, bw_kernel)      # the reference: the faster of the two
    t = 2 * nb / ctx.copy_bw
    add("copy D2D", f"{S['copy_mib']} MiB", yn(ok), t, f"{ctx.copy_bw / 1e9:.0f} GB/s", "ref",
        f"read+write counted; memcpy {bw_memcpy / 1e9:.0f}, copy kernel {bw_kernel / 1e9:.0f} GB/s",
        memcpy_bw=bw_memcpy, kernel_bw=bw_kernel)
    src = dst = None                   # free the 2 x copy_mib before the next buffers
    hb = S["h2d_mib"] << 20
    pinned = cp.cuda.alloc_pinned_memory(hb)
    h = np.frombuffer(pinned, np.uint8, hb)
    h.view(np.uint32)[:] = np.arange(hb // 4, dtype=np.uint32) * np.uint32(2654435761)
    d = cp.empty(hb, cp.uint8)
    _, ts = ctx.dev.time(lambda: d.set(h), S["reps"])
    ok = np.array_equal(cp.asnumpy(d), h)
    t = _med(ts)
    notes = []
    pageable = np.array(h)
    try:
        _, tp = ctx.dev.time(lambda: d.set(pageable), S["reps"])
        notes.append(f"pageable {hb / _med(tp) / 1e9:.1f} GB/s")
    except Exception as exc:  # noqa: BLE001
        notes.append(f"pageable n/a ({type(exc).__name__})")
    try:
        back = np.empty_like(h)
        _, td = ctx.dev.time(lambda: d.get(out=back), S["reps"])
        notes.append(f"D2H {hb / _med(td) / 1e9:.1f} GB/s (pageable)")
    except Exception as exc:  # noqa: BLE001
        notes.append(f"D2H n/a ({type(exc).__name__})")
    add("copy H2D", f"{S['h2d_mib']} MiB", yn(ok), t, f"{hb / t / 1e9:.1f} GB/s", "",
        "pinned; " + ", ".join(notes))


def _identity_and_time(ctx, run, fetch, ref):
    """First call (compile) -> compare; timed calls -> compare again.  -> (ok, first, ts)."""
    dev = ctx.dev
    dev.sync()
    t0 = time.perf_counter()
    run()
    dev.sync()
    first = time.perf_counter() - t0
    ok = np.array_equal(fetch(), ref)
    _, ts = dev.time(run, ctx.S["reps"])
    ok = ok and np.array_equal(fetch(), ref)
    return ok, first, ts


def _host(fn, *a):
    t0 = time.perf_counter()
    out = fn(*a)
    return out, time.perf_counter() - t0


def check_ntt(ctx: Ctx, rows: int, log_n: int) -> None:
    from kernels import ntt_device as nd, ntt_host
    a = ctx.rand((rows, 1 << log_n))
    ref, host_first = _host(ntt_host.ntt, a)
    _, host_s = _host(ntt_host.ntt, a)
    d_a = ctx.dev.cuda.to_device(a)
    d_o = ctx.dev.cuda.device_array_like(d_a)
    ok, first, ts = _identity_and_time(ctx, lambda: nd.ntt_device(d_a, out=d_o), d_o.copy_to_host, ref)
    t = _med(ts)
    eff = 2 * a.nbytes / t
    try:
        passes = 1 + len(nd._stage_groups(0, log_n))
        traffic = f"; est. traffic {passes} passes, {fmt_bw(passes * eff)}"
    except Exception:  # noqa: BLE001 - internal helper, informative only
        passes, traffic = None, ""
    ctx.report.add("ntt", f"{rows}x2^{log_n}", yn(ok), t, f"{fmt_bw(eff)} eff",
                   ctx.vs_copy(eff), f"{ctx.timing(first, t, host_s)}{traffic}", first_s=first, times_s=ts, host_s=host_s,
                   host_first_s=host_first, passes=passes)


def check_lde(ctx: Ctx, cols: int, log_n: int, k: int) -> None:
    from kernels import ntt_device as nd, ntt_host
    a = ctx.rand((cols, 1 << log_n))
    ref, host_first = _host(ntt_host.lde_columns, a, k)
    _, host_s = _host(ntt_host.lde_columns, a, k)
    cuda = ctx.dev.cuda
    d_a = cuda.to_device(a)
    d_o = cuda.device_array((cols, (1 << log_n) << k), dtype=np.uint32)
    d_t = cuda.device_array_like(d_a)
    ok, first, ts = _identity_and_time(
        ctx, lambda: nd.coset_lde_device(d_a, k, out=d_o, scratch=d_t), d_o.copy_to_host, ref)
    t = _med(ts)
    eff = (a.nbytes + ref.nbytes) / t            # read the input once, write the LDE once
    ratio = "n/a" if not ctx.copy_bw else f"{eff / ctx.copy_bw / LDE_TARGET:.2f} of target"
    ctx.report.add("coset LDE", f"{cols}x2^{log_n}->2^{log_n + k}", yn(ok), t,
                   f"{fmt_bw(eff)} eff", ratio,
                   f"{ctx.vs_copy(eff)} (target 50%); {ctx.timing(first, t, host_s)}", first_s=first, times_s=ts,
                   host_s=host_s, host_first_s=host_first)


def check_p2_kat(ctx: Ctx) -> None:
    from kernels.poseidon2 import poseidon2_permute
    from kernels.poseidon2_device import permute_device
    x = np.array([SPEC_IN], dtype=np.uint32)
    host = poseidon2_permute(x)[0].tolist()
    dev = permute_device(ctx.dev.cuda.to_device(x)).copy_to_host()[0].tolist()
    ok = host == SPEC_OUT and dev == SPEC_OUT
    ctx.report.add("poseidon2 KAT", "1 state", yn(ok), note=f"SPEC vector: host {yn(host == SPEC_OUT)},"
                   f" device {yn(dev == SPEC_OUT)}")


def check_p2(ctx: Ctx) -> None:
    from kernels.poseidon2 import poseidon2_permute
    from kernels.poseidon2_device import DEFAULT_BLOCK, permute_device
    S = ctx.S
    n = 1 << S["p2"]
    states = ctx.rand((n, 16))
    idx = np.sort(ctx.rng.choice(n, min(n, 1 << S["p2_sample"]), replace=False))
    ref, host_s = _host(poseidon2_permute, states[idx])
    d_s = ctx.dev.cuda.to_device(states)
    d_o = ctx.dev.cuda.device_array_like(d_s)
    blk = S.get("hash_block") or DEFAULT_BLOCK
    ok, first, ts = _identity_and_time(ctx, lambda: permute_device(d_s, out=d_o, block=blk),
                                       lambda: d_o.copy_to_host()[idx], ref)
    t = _med(ts)
    rate = n / t
    blocks = {}
    for alt_blk in (() if ctx.dev.sim else (64, 256)):
        try:
            _, tb = ctx.dev.time(lambda: permute_device(d_s, out=d_o, block=alt_blk), S["reps"])
            blocks[alt_blk] = n / _med(tb)
        except Exception as exc:  # noqa: BLE001
            blocks[alt_blk] = f"{type(exc).__name__}"
    ctx.p2_rate = rate
    alt = ", ".join(f"block {b}: {v / 1e6:.0f} M/s" if isinstance(v, float) else f"block {b}: {v}"
                    for b, v in blocks.items())
    ctx.report.add("poseidon2", f"2^{S['p2']} states", yn(ok), t, f"{rate / 1e6:.3g} M perm/s",
                   f"{rate / P2_TARGET:.2f} of 1 G/s", f"sample 2^{S['p2_sample']} vs host; "
                   f"{ctx.timing(first, t)}; host {len(idx) / host_s / 1e6:.2g} M/s" + (f"; {alt}" if alt else ""),
                   first_s=first, times_s=ts, block_rates=blocks)


def check_merkle(ctx: Ctx) -> None:
    from kernels import merkle
    from kernels.merkle_device import commit_device
    from kernels.poseidon2_device import DEFAULT_BLOCK
    log_n, w = ctx.S["merkle"]
    blk = ctx.S.get("hash_block") or DEFAULT_BLOCK
    n = 1 << log_n
    m = ctx.rand((n, w))
    ref_tree, host_s = _host(merkle.commit, m)
    ref = np.asarray(ref_tree.root)
    del ref_tree
    cuda = ctx.dev.cuda
    d_m = cuda.to_device(m)
    nodes = cuda.device_array((2 * n - 1, 8), dtype=np.uint32)
    box = {}

    def run():
        box["root"] = commit_device(d_m, out=nodes, block=blk).root
    ok, first, ts = _identity_and_time(ctx, run, lambda: box["root"], ref)
    t = _med(ts)
    perms = n * -(-w // 8) + (n - 1)
    bw = (m.nbytes + nodes.size * 4) / t
    ctx.report.add("merkle commit", f"2^{log_n}x{w}", yn(ok), t, f"{perms / t / 1e6:.3g} M perm/s",
                   f"{perms / t / P2_TARGET:.2f} of 1 G/s", f"{fmt_bw(bw)} ({ctx.vs_copy(bw)});"
                   f" {ctx.timing(first, t, host_s)}",
                   first_s=first, times_s=ts, host_s=host_s)


def _stage_api():
    """kernels.stage_device if it has the wrappers this check knows, else a reason."""
    import inspect
    from kernels import stage_device as sd
    want = {"fri_fold_device": ("values", "beta", "layer", "shape"),
            "ood_device": ("coeffs", "point")}
    for fn, params in want.items():
        if not hasattr(sd, fn):
            return None, f"kernels.stage_device has no {fn}"
        got = tuple(inspect.signature(getattr(sd, fn)).parameters)[:len(params)]
        if got != params:
            return None, f"{fn}{got} differs from the expected {params}"
    return sd, ""


def check_fri_fold(ctx: Ctx) -> None:
    sd, why = _stage_api()
    log_n = ctx.S["stage"]
    if sd is None:
        ctx.report.add("FRI fold", f"2^{log_n}", "skipped", note=why)
        return
    from prover.stages import HostStages
    vals = ctx.rand((1 << log_n, 4))
    beta = ctx.rand(4).tolist()
    shape = SimpleNamespace(log_n=log_n - 1, log_blowup=1, log_lde=log_n)
    ref, host_s = _host(HostStages().fri_fold, vals, beta, 0, shape)
    cuda = ctx.dev.cuda
    d_v = cuda.to_device(vals)
    d_o = cuda.device_array(((1 << log_n) // 2, 4), dtype=np.uint32)
    ok, first, ts = _identity_and_time(
        ctx, lambda: sd.fri_fold_device(d_v, beta, 0, shape, out=d_o), d_o.copy_to_host, ref)
    t = _med(ts)
    bw = (vals.nbytes + ref.nbytes) / t
    ctx.report.add("FRI fold", f"2^{log_n} EF", yn(ok), t, f"{fmt_bw(bw)} eff",
                   ctx.vs_copy(bw), f"layer 0; {ctx.timing(first, t, host_s)}", first_s=first, times_s=ts, host_s=host_s)


def check_ood(ctx: Ctx) -> None:
    sd, why = _stage_api()
    log_n, c = ctx.S["stage"], ctx.S["ood_cols"]
    if sd is None:
        ctx.report.add("OOD reduction", f"{c}x2^{log_n}", "skipped", note=why)
        return
    from prover.stages import HostStages
    coeffs = ctx.rand((c, 1 << log_n))
    point = ctx.rand(4).tolist()
    ref, host_s = _host(HostStages().ood, SimpleNamespace(coeffs=coeffs), point)
    cuda = ctx.dev.cuda
    d_c = cuda.to_device(coeffs)
    d_o = cuda.device_array((c, 4), dtype=np.uint32)
    ok, first, ts = _identity_and_time(ctx, lambda: sd.ood_device(d_c, point, out=d_o),
                                       d_o.copy_to_host, np.asarray(ref, np.uint32))
    t = _med(ts)
    bw = coeffs.nbytes / t
    ctx.report.add("OOD reduction", f"{c}x2^{log_n}", yn(ok), t, f"{fmt_bw(bw)} eff",
                   ctx.vs_copy(bw), f"EF point; {ctx.timing(first, t, host_s)}", first_s=first, times_s=ts, host_s=host_s)


# ----------------------------------------------------------------------------- end to end
def growth(k0: int, k1: int, per_bit: float | None = None) -> float:
    """Predicted t(2^k1) / t(2^k0) (``per_bit``: a measured factor per bit of k)."""
    f = 1.0
    for b in range(k0 + 1, k1 + 1):
        f *= per_bit if per_bit else PER_BIT.get(b, 1.4 if b < 11 else 2.45)
    return f


def _stage_note(r: dict) -> str:
    dev = r.get("device") or {}
    stage: dict = {}
    for t in (dev.get("tables") or {}).values():
        for s, v in (t.get("stage_s") or {}).items():
            stage[s] = stage.get(s, 0.0) + v
    src, d = ("device stages", stage) if stage else ("rounds", r.get("rounds") or {})
    top = sorted(d.items(), key=lambda kv: -kv[1])[:3]
    return f"{src}: " + ", ".join(f"{k} {v:.2f}s" for k, v in top) if top else ""


def _find(d, key):
    if isinstance(d, dict):
        if key in d and d[key]:
            return d[key]
        for v in d.values():
            got = _find(v, key)
            if got:
                return got
    return None


class E2E:
    """End-to-end proofs: device backend vs host on the same inputs, proof bytes compared."""

    def __init__(self, ctx: Ctx):
        self.ctx, self.runner = ctx, ctx.runner
        self.dev = ctx.args.e2e_backend or ctx.S.get("e2e_backend") or ctx.args.backend
        self.host_max_k = ctx.args.host_max_k
        self.provers: dict = {}
        self.hist: dict = {"host": [], self.dev: []}        # warm (k, seconds)
        self.broken = ""                                    # why the device backend is out
        self.details: dict = {}
        ctx.report.extra["e2e"] = self.details

    def _measured(self, backend: str, run):
        """Run one proof; a device backend's memory pool is emptied first so that the
        sampled peak is this proof's."""
        dev = self.ctx.dev if backend != "host" else None
        if dev is not None:
            dev.free_all()
        t0 = time.perf_counter()
        with VramPeak(dev) as vp:
            res = run()
        res.setdefault("total_s", time.perf_counter() - t0)
        res["vram_peak"] = vp.delta
        return res

    def prove_block(self, block, backend: str) -> dict:
        from prover.api import Prover, ProverConfig
        if backend not in self.provers:
            self.provers[backend] = Prover(ProverConfig(backend=backend))

        def run():
            proof = self.provers[backend].prove_block(block)
            st = proof.stats
            return dict(bytes=proof.to_bytes(), total_s=st.phases.get("total"),
                        prove_s=st.phases.get("prove"), rounds=st.rounds(), cycles=st.cycles,
                        device=st.counters.get("device"), tables={t.name: t.rows for t in st.tables})
        return self._measured(backend, run)

    def prove_example(self, backend: str) -> dict:
        # The simulator cannot prove a block in minutes (its RANGE table alone has 2^16
        # rows; even three 16-row tables take ~6 minutes), so `--e2e-k example` proves the
        # 8-row Fibonacci example through prover.prove: the same pipeline, one table.
        from air import examples as ex
        from prover import Params, Spans, prove
        from prover.pipeline import PipelineConfig
        trace, pv = ex.fibonacci_trace(3)
        spans, stats = Spans(), []
        device = None if backend == "host" else PipelineConfig.from_env(backend)

        def run():
            proof = prove([trace], [ex.fibonacci_air()], [pv], Params(num_queries=8, pow_bits=2),
                          spans=spans, check=False, device=device, device_stats=stats)
            return dict(bytes=proof, rounds={k: v for k, v in spans.stats.by_round().items()
                                             if k != "table"}, cycles=0, tables={"fibonacci": 8},
                        device=stats[0].as_dict() if stats else None)
        res = self._measured(backend, run)
        res["prove_s"] = res["total_s"]
        return res

    def predict(self, backend: str, k: int | None):
        """(seconds, basis) for a proof of 2^k cycles from this run's warm proofs."""
        h = sorted(self.hist[backend])
        if not h or k is None:
            return 0.0, "no measurement"
        k0, t0 = h[-1]
        per_bit, basis = None, f"2^{k0} measured {t0:.1f}s x docs/benchmarks.md host scaling"
        if len(h) >= 2 and h[-2][0] >= 14 and k0 > h[-2][0]:
            per_bit = min(3.0, max(1.5, (t0 / h[-2][1]) ** (1.0 / (k0 - h[-2][0]))))
            basis = f"2^{k0} measured {t0:.1f}s x {per_bit:.2f}/bit (measured 2^{h[-2][0]}->2^{k0})"
        f = growth(k0, k, per_bit)
        return t0 * f, f"{basis} = x{f:.1f}"

    def _prove(self, backend: str, size: str, fn, k: int | None):
        """-> (status, result, note) of one proof, within the budget."""
        if backend != "host" and self.broken:
            return "skipped", None, self.broken
        if backend == "host" and k is not None and k > self.host_max_k:
            return "skipped", None, f"host proofs above 2^{self.host_max_k} are not run (--host-max-k)"
        pred, _ = self.predict(backend, k)
        st, res, note = self.runner.call(f"prove {backend} {size}", lambda: fn(backend), 1.25 * pred)
        if st == "ok" and k is not None:
            self.hist[backend].append((k, res["total_s"]))
        if st == "error" and backend != "host":
            self.broken = f"{backend} failed earlier ({note})"
        self.details.setdefault(size, {})[backend] = dict(
            status=st, note=note, predicted_s=pred,
            **{x: y for x, y in (res or {}).items() if x != "bytes"})
        return st, res, note

    def warmup(self, k: int) -> None:
        """Each backend twice at 2^k: the first run compiles, the second is warm."""
        from vm.programs import sized_block
        block = sized_block(k, **BLOCK_ARGS)
        size = f"2^{k} cycles"
        runs, notes, failed = {}, [], False
        for backend in (self.dev, "host"):
            for i in (0, 1):
                st, res, note = self._prove(backend, f"{size} #{i}",
                                            lambda b: self.prove_block(block, b), k if i else None)
                if st != "ok":
                    notes.append(f"{backend} #{i} {st}: {note}")
                    failed = failed or st in ("error", "timeout")
                    break
                runs[(backend, i)] = res
        blobs = [v["bytes"] for v in runs.values()]
        both = {b for b, _ in runs} == {self.dev, "host"}
        ident = yn(all(x == blobs[0] for x in blobs)) if both else ("error" if failed else "skipped")
        warm = runs.get((self.dev, 1)) or runs.get((self.dev, 0))
        first = ", ".join(f"{b} {runs[(b, 0)]['total_s']:.1f}s" for b in (self.dev, "host")
                          if (b, 0) in runs)
        if ("host", 1) in runs:
            notes.insert(0, f"host warm {runs[('host', 1)]['total_s']:.2f}s")
        self.ctx.report.add(f"prove warm-up ({self.dev})", size, ident,
                            warm["total_s"] if warm else None, "", "",
                            "; ".join([f"{len(runs)} proofs" + (f"; first runs (compile): {first}"
                                                                if first else "")] + notes))

    def one(self, label: str, size: str, k: int | None, fn) -> None:
        """Device proof then host proof of one input (each if its prediction fits), one row."""
        add = self.ctx.report.add
        sd, rd, nd = self._prove(self.dev, size, fn, k)
        if rd is None:
            add(label, size, sd if sd in ("error", "timeout") else "skipped", note=f"{self.dev}: {nd}")
            return
        sh, rh, nh = self._prove("host", size, fn, k)
        t = rd["total_s"]
        rate = f"{rd['cycles'] / t:,.0f} cycles/s" if rd["cycles"] else ""
        if rh is not None:
            ident, ratio = yn(rh["bytes"] == rd["bytes"]), f"x{rh['total_s'] / t:.1f} vs host"
            notes = [f"host {rh['total_s']:.2f}s (prove {rh['prove_s']:.2f}s)"]
        else:                       # the identity was not checked: not a device failure
            ident, ratio = "skipped", ""
            est, basis = self.predict("host", k)
            notes = [f"host proof {sh} ({nh})"]
            if est:
                ratio = f"x{est / t:.1f} vs host (extrapolated)"
                notes.append(f"host ~{est:.0f}s EXTRAPOLATED from {basis}")
        notes.append(f"{self.dev} prove {rd['prove_s']:.2f}s, {len(rd['bytes']):,} B")
        dev = rd.get("device") or {}
        vram = [f"sampled {rd['vram_peak'] / 2**30:.2f} GiB" if rd.get("vram_peak") is not None
                else "sampled n/a" + (" (sim)" if self.ctx.dev.sim else "")]
        if dev.get("peak_device_bytes"):
            vram.append(f"ledger {dev['peak_device_bytes'] / 2**30:.2f} GiB")
        notes.append("peak VRAM " + ", ".join(vram))
        rec = sum(sum(v.values()) for v in (dev.get("recovery") or {}).values() if isinstance(v, dict))
        if rec:
            notes.append(f"{rec} recoveries")
        assisted = _find(dev, "host_assisted")
        if assisted:
            notes.append(f"host-assisted: {assisted}")
        notes.append(_stage_note(rd))
        add(label, size, ident, t, rate, ratio, "; ".join(n for n in notes if n),
            proof_bytes=len(rd["bytes"]))

    def run(self, ladder, warm_k) -> None:
        if "example" in ladder:
            self.one("prove fibonacci", "1 table 2^3 rows", None, self.prove_example)
            return
        from vm.programs import sized_block
        if warm_k:
            self.warmup(warm_k)
        for k in sorted({int(x) for x in ladder}):
            block = sized_block(k, **BLOCK_ARGS)
            self.one(f"prove block ({self.dev})", f"2^{k} cycles", k,
                     lambda b, blk=block: self.prove_block(blk, b))


# ----------------------------------------------------------------------------- main
def env_info(dev: Dev) -> dict:
    import importlib.metadata as md
    import numba
    info = dict(python=platform.python_version(), cpus=os.cpu_count(), numpy=np.__version__,
                numba_threads=numba.config.NUMBA_NUM_THREADS, simulator=dev.sim)
    for pkg in ("numba", "numba-cuda", "cupy-cuda13x", "cupy-cuda12x", "cupy"):
        try:
            info[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    if not dev.sim:
        d = dev.cuda.get_current_device()
        name = d.name.decode() if isinstance(d.name, bytes) else str(d.name)
        info.update(gpu=name, compute_capability=".".join(map(str, d.compute_capability)))
    if dev.cp is not None:
        rt = dev.cp.cuda.runtime
        info.update(driver=rt.driverGetVersion(), runtime=rt.runtimeGetVersion(),
                    vram_total_gib=round(rt.memGetInfo()[1] / 2**30, 1))
    return info


def finish(report: Report, args) -> int:
    with report.lock:
        report.closed = True
        rows = list(report.rows)
    el = report.elapsed()
    tried = [r for r in rows if r["identical"] in ("yes", "no", "error", "timeout")]
    yes = sum(r["identical"] == "yes" for r in tried)
    bad = sum(r["identical"] in ("error", "timeout") for r in tried)
    skipped = sum(r["identical"] == "skipped" for r in rows)
    if args.json:
        try:
            with open(args.json, "w") as fh:
                json.dump({"args": vars(args), "elapsed_s": el, "rows": rows, **report.extra},
                          fh, indent=1, default=str)
            print(f"figures written to {args.json}")
        except Exception as exc:  # noqa: BLE001
            print(f"could not write {args.json}: {exc}")
    extra = [f"{bad} errors/timeouts"] * bool(bad) + [f"{skipped} skipped"] * bool(skipped)
    print("\n== device_check summary ==")
    print(report.table())
    print(f"device_check: {yes}/{len(tried)} identical, elapsed {el:.1f}s"
          + (f" ({', '.join(extra)})" if extra else ""), flush=True)
    if any(r["identical"] == "no" for r in tried):
        return 1
    return 2 if bad else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("cuda", "sim"), default="cuda")
    ap.add_argument("--dry-run", action="store_true", help="= --backend sim (tiny sizes)")
    ap.add_argument("--quick", action="store_true", help="small sizes on a GPU")
    ap.add_argument("--json", metavar="FILE", help="write every figure to FILE")
    ap.add_argument("--seed", type=int, help="random inputs (default: from the clock)")
    ap.add_argument("--budget", type=float, help="hard limit, s (default 285; sim 600)")
    ap.add_argument("--soft", type=float, help="no check starts after this, s (default budget-45)")
    ap.add_argument("--sections", default=",".join(SECTIONS),
                    help=f"comma-separated subset of {','.join(SECTIONS)}")
    ap.add_argument("--e2e-k", nargs="+", metavar="K",
                    help="block sizes 2^K for the end-to-end proofs, or 'example'")
    ap.add_argument("--e2e-backend", choices=("cuda", "sim", "emu"),
                    help="device backend of the end-to-end proofs (default: --backend; sim: emu)")
    ap.add_argument("--warm-k", type=int, help="warm-up block 2^K (0: none; default 10)")
    ap.add_argument("--host-max-k", type=int, default=18,
                    help="no host proof above 2^K cycles: extrapolated instead (default 18)")
    args = ap.parse_args(argv)
    if args.dry_run:
        args.backend = "sim"
    sim = args.backend == "sim"
    if sim:
        from kernels.backend import enable_simulator
        enable_simulator()                   # before anything imports numba.cuda
    if args.seed is None:
        args.seed = time.time_ns() % (1 << 31)
    size_name = "sim" if sim else ("quick" if args.quick else "full")
    S = SIZES[size_name]
    hard = args.budget or (600.0 if sim else 285.0)
    soft = args.soft or max(hard - 45.0, hard * 0.8)
    report = Report()
    runner = Runner(report, soft, hard)
    ctx = Ctx(args, S, report, runner)
    wanted = {s.strip() for s in args.sections.split(",") if s.strip()}
    unknown = wanted - set(SECTIONS)
    if unknown:
        ap.error(f"unknown sections {sorted(unknown)}; choose from {','.join(SECTIONS)}")
    print(f"device_check: backend {args.backend}, sizes {size_name}, seed {args.seed}, "
          f"budget {soft:.0f}s soft / {hard:.0f}s hard", flush=True)
    st, dev, note = runner.call("init", lambda: Dev(sim))
    if st != "ok":
        report.add("device init", "-", st, note=note)
    else:
        ctx.dev = dev
        try:
            report.extra["env"] = env_info(dev)
            print("env: " + ", ".join(f"{k}={v}" for k, v in report.extra["env"].items()), flush=True)
        except Exception as exc:  # noqa: BLE001
            print(f"env info failed: {exc}")
        plan = []
        if "copy" in wanted:
            plan.append(("copy", f"{S['copy_mib']} MiB", lambda: check_copy(ctx)))
        if "ntt" in wanted:
            plan += [("ntt", f"{r}x2^{n}", lambda r=r, n=n: check_ntt(ctx, r, n)) for r, n in S["ntt"]]
        if "lde" in wanted:
            plan += [("coset LDE", f"{c}x2^{n}->2^{n + k}", lambda c=c, n=n, k=k: check_lde(ctx, c, n, k))
                     for c, n, k in S["lde"]]
        if "poseidon2" in wanted:
            plan += [("poseidon2 KAT", "1 state", lambda: check_p2_kat(ctx)),
                     ("poseidon2", f"2^{S['p2']} states", lambda: check_p2(ctx))]
        if "merkle" in wanted:
            plan.append(("merkle commit", "2^%dx%d" % S["merkle"], lambda: check_merkle(ctx)))
        if "stage" in wanted:
            plan += [("FRI fold", f"2^{S['stage']}", lambda: check_fri_fold(ctx)),
                     ("OOD reduction", f"{S['ood_cols']}x2^{S['stage']}", lambda: check_ood(ctx))]
        for name, size, fn in plan:
            runner.run(name, size, fn)
            if not runner.abandoned:
                try:
                    dev.free_all()
                except Exception as exc:  # noqa: BLE001 - e.g. a sticky CUDA error
                    print(f"freeing device memory failed: {exc}", flush=True)
        if "e2e" in wanted:
            try:
                warm = S["warm_k"] if args.warm_k is None else args.warm_k
                E2E(ctx).run(args.e2e_k or S["e2e"], warm)
            except Exception as exc:  # noqa: BLE001
                traceback.print_exc()
                report.add("end-to-end", "-", "error", note=f"{type(exc).__name__}: {exc}"[:160])
    return finish(report, args)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)          # do not wait for an abandoned (timed-out) check's thread
