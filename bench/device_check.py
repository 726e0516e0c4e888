#!/usr/bin/env python3
"""The one prepared device check: bit-identity against the host and timings on a GPU.

    PYTHONPATH=. python3 bench/device_check.py                  # the H200 run (< 10 minutes)
    PYTHONPATH=. python3 bench/device_check.py --quick          # small sizes
    PYTHONPATH=. python3 bench/device_check.py --dry-run        # numba's CUDA simulator, tiny sizes
    PYTHONPATH=. python3 bench/device_check.py --json out.json  # every figure as JSON too
    PYTHONPATH=. python3 bench/device_check.py --preflight-only # the preflight, then exit

The first GPU run, as one command, and its expected timeline: docs/benchmarks.md ("The
first GPU run").

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

Order -- what matters most first, so that a short or failing first run still answers it:

0. preflight, without a device (the dry run too): numba, numba-cuda and cupy versions,
   NVVM and its version (or the simulator), numba's threading layer in use (must be
   ``omp`` or ``tbb``: the host kernels run from several threads and ``workqueue`` aborts
   the process), the kernel cache directory and whether it is writable.  A failure is
   one line, ``preflight: FAILED -- ...``, exit status 2 at once (recorded in the JSON
   under ``preflight``).  Unless ``PROVER_KERNEL_CACHE`` is set, the kernel cache is the
   checkout's git-ignored ``.kernel-cache/`` folder, so a second command on the same lent
   machine starts warm.  Then the warm-up (``--warm-jobs``; on cuda half the cores, at most
   8): child processes compile disjoint parts of the device kernels into that cache and
   one proves a small block on the host (numba's cache of the host kernels), while this
   process initialises the device; its precompile waits for the parts and loads them;
1. versions (python, numpy, numba, numba-cuda, cupy, CUDA driver/runtime, device) and a
   sanity launch (a field multiply kernel against numpy);
2. precompile: every kernel a block proof launches (``Prover.precompile_txblock``: the
   generated per-AIR kernels of the RV32IM tables and the stage kernels), timed apart -- warm from the kernel cache
   (``PROVER_KERNEL_CACHE``) on a second run;
3. the first end-to-end comparison: one small real block of RISC-V transactions (block
   format 2, 2^``first_k`` cycles, 2^10) proved on the device backend and on the host,
   proof bytes compared;
4. the microbenchmarks: copy bandwidth (device-to-device and host-to-device: the
   reference of every "achieved bandwidth" ratio); NTT; coset LDE (column-major, target
   >= 50 % of the copy bandwidth); Poseidon2 (SPEC known answer, a random sample against
   the host, and permutations/s, target >= 1 G/s); Merkle commit; the stage kernels (FRI
   fold and OOD reduction, skipped if their API differs);
5. the rest of the end-to-end ladder, cuda vs host, on blocks of RISC-V transactions of
   about 2^k cycles from ``bench/make_block.py``'s generator (``v2_block``, same defaults:
   hash share 0.25, seed 1), comparing the proof bytes;
6. if time is left, the first block again under ``--profile fastest`` (log_blowup 1,
   slots "cells-split": the chips' tables hold up to 4 instructions a row, with their own
   generated kernels), device vs host, proof bytes compared.

Time budget (sized for a lent machine's one 600 s command): every check runs in a worker
thread; none starts after ``--soft`` seconds (default 480) or when its predicted time does
not fit, and one still running at ``--budget`` seconds (default 590) is abandoned, so the
summary table -- printed last, then ``device_check: N/M identical, elapsed Xs`` -- always
appears.  ``--json FILE`` records the budget as ``budget_s``.  Exit status: 0 all
identical, 1 a mismatch, 2 an error, a timeout or a failed preflight, and no mismatch.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import traceback
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

import numpy as np  # noqa: E402

from bench.device_common import (  # noqa: E402
    P, SPEC_IN, SPEC_OUT, P2_TARGET, LDE_TARGET, SIZES, SECTIONS, HARD_S, SOFT_S, fmt_bw, yn,
    Report, Runner, Dev, Ctx, preflight, preflight_line)
from bench.device_e2e import E2E  # noqa: E402


def _med(ts):
    return statistics.median(ts)


def check_sanity(ctx: Ctx) -> None:
    """One small kernel launch (field multiply) against numpy: the device works at all."""
    from steadfast.kernels import field_device as fd
    a, b = ctx.rand(256), ctx.rand(256)
    want = (a.astype(np.uint64) * b.astype(np.uint64) % np.uint64(P)).astype(np.uint32)
    cuda = ctx.dev.cuda
    t0 = time.perf_counter()
    got = fd.mul(cuda.to_device(a), cuda.to_device(b)).copy_to_host()
    dt = time.perf_counter() - t0
    ctx.report.add("sanity launch", "256 elements", yn(np.array_equal(got, want)), dt,
                   note="field mul kernel vs numpy (time includes its compile)")


def check_precompile(ctx: Ctx, block, warm=None) -> None:
    """Compile every kernel a proof of ``block`` launches, timed apart
    (Prover.precompile_txblock: a block of RISC-V transactions);
    with warm-up children, after waiting for their parts (the precompile then loads them)."""
    from steadfast.kernels.kernel_cache import cache_dir
    from steadfast.prover.api import Prover, ProverConfig
    waited = ""
    if warm is not None and warm.procs:
        w = warm.wait_precompile(ctx.runner.left() - 60.0)
        ctx.report.extra["warmup"] = {**w, "children": warm.status()}
        waited = (f"; {len(w['parts'])} warm-up processes, done at {w['seconds']:.0f}s "
                  f"(exit {sorted(set(map(str, w['parts'].values())))})")
    t0 = time.perf_counter()
    rows = Prover(ProverConfig(backend=ctx.args.backend)).precompile_txblock(block)
    dt = time.perf_counter() - t0
    how: dict = {}
    for r in rows:
        how[r["how"]] = how.get(r["how"], 0) + 1
    slow = sorted(rows, key=lambda r: -r["seconds"])[:3]
    note = (", ".join(f"{n} {h}" for h, n in sorted(how.items())) +
            "; slowest " + ", ".join(f"{r['name'].split('.')[-1][:32]} {r['seconds']:.1f}s"
                                     for r in slow) + f"; cache {cache_dir() or 'off'}" + waited)
    ctx.report.add("precompile", f"{len(rows)} steps", "n/a", dt, note=note, steps=rows)


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
    from steadfast.kernels import ntt_device as nd, ntt_host
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
    from steadfast.kernels import ntt_device as nd, ntt_host
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
    from steadfast.kernels.poseidon2 import poseidon2_permute
    from steadfast.kernels.poseidon2_device import permute_device
    x = np.array([SPEC_IN], dtype=np.uint32)
    host = poseidon2_permute(x)[0].tolist()
    dev = permute_device(ctx.dev.cuda.to_device(x)).copy_to_host()[0].tolist()
    ok = host == SPEC_OUT and dev == SPEC_OUT
    ctx.report.add("poseidon2 KAT", "1 state", yn(ok), note=f"SPEC vector: host {yn(host == SPEC_OUT)},"
                   f" device {yn(dev == SPEC_OUT)}")


def check_p2(ctx: Ctx) -> None:
    from steadfast.kernels.poseidon2 import poseidon2_permute
    from steadfast.kernels.poseidon2_device import DEFAULT_BLOCK, permute_device
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
    from steadfast.kernels import merkle
    from steadfast.kernels.merkle_device import commit_device
    from steadfast.kernels.poseidon2_device import DEFAULT_BLOCK
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
    """(kernels.stage_device, kernels.fri_device) if they have the wrappers this check
    knows, else a reason."""
    import inspect
    from steadfast.kernels import fri_device as fd
    from steadfast.kernels import stage_device as sd
    want = {(sd, "ood_device"): ("coeffs", "point"),
            (fd, "fri_fold_arity_device"): ("values", "beta", "log_arity", "roll")}
    for (mod, fn), params in want.items():
        if not hasattr(mod, fn):
            return None, f"{mod.__name__} has no {fn}"
        got = tuple(inspect.signature(getattr(mod, fn)).parameters)[:len(params)]
        if got != params:
            return None, f"{fn}{got} differs from the expected {params}"
    return (sd, fd), ""


def check_fri_fold(ctx: Ctx) -> None:
    """The v3 join's fold: arity 2^log_fri_arity (the default parameters') on the rescaled
    domain, with a roll-in, vs HostStages.fri_fold."""
    mods, why = _stage_api()
    log_n = ctx.S["stage"]
    if mods is None:
        ctx.report.add("FRI fold", f"2^{log_n}", "skipped", note=why)
        return
    _, fd = mods
    from steadfast.prover.core.stages import HostStages
    from steadfast.verifier.proof_format import Params
    k = Params().log_fri_arity
    vals = ctx.rand((1 << log_n, 4))
    roll = ctx.rand((1 << (log_n - k), 4))
    beta = ctx.rand(4)
    ref, host_s = _host(HostStages().fri_fold, vals, beta, k, log_n, roll)
    cuda = ctx.dev.cuda
    d_v = cuda.to_device(vals)
    d_r = cuda.to_device(roll)
    d_o = cuda.device_array(((1 << log_n) >> k, 4), dtype=np.uint32)
    ok, first, ts = _identity_and_time(
        ctx, lambda: fd.fri_fold_arity_device(d_v, beta, k, roll=d_r, out=d_o), d_o.copy_to_host,
        ref)
    t = _med(ts)
    bw = (vals.nbytes + roll.nbytes + ref.nbytes) / t
    ctx.report.add("FRI fold", f"2^{log_n} EF", yn(ok), t, f"{fmt_bw(bw)} eff",
                   ctx.vs_copy(bw), f"arity {1 << k} + roll-in; {ctx.timing(first, t, host_s)}",
                   first_s=first, times_s=ts, host_s=host_s)


def check_checksum(ctx: Ctx) -> None:
    """XCHECK's integrity tag reduced on the device vs the host's fused pass."""
    from steadfast.kernels.hostlib import checksum_words
    from steadfast.kernels.layout_device import checksum_device
    log_n = ctx.S["stage"] + 4
    a = ctx.rand((16, 1 << (log_n - 4)))
    ref, host_s = _host(checksum_words, a)
    d_a = ctx.dev.cuda.to_device(a)
    kw = dict(max_blocks=1, block=8) if ctx.dev.sim else {}
    got = {}
    ok, first, ts = _identity_and_time(
        ctx, lambda: got.__setitem__("v", checksum_device(d_a, **kw)),
        lambda: np.array(got["v"], dtype=np.uint64), np.array(ref, dtype=np.uint64))
    t = _med(ts)
    bw = a.nbytes / t
    ctx.report.add("integrity tag", f"16x2^{log_n - 4}", yn(ok), t, f"{fmt_bw(bw)} eff",
                   ctx.vs_copy(bw), f"sum+xor; {ctx.timing(first, t, host_s)}", first_s=first,
                   times_s=ts, host_s=host_s)


def check_ood(ctx: Ctx) -> None:
    mods, why = _stage_api()
    sd = mods[0] if mods is not None else None
    log_n, c = ctx.S["stage"], ctx.S["ood_cols"]
    if sd is None:
        ctx.report.add("OOD reduction", f"{c}x2^{log_n}", "skipped", note=why)
        return
    from steadfast.prover.core.stages import HostStages
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

def env_info(dev: Dev | None = None, sim: bool = False) -> dict:
    """Package versions (no device needed); with ``dev`` also the device, driver, runtime."""
    import importlib.metadata as md
    import numba
    info = dict(python=platform.python_version(), cpus=os.cpu_count(), numpy=np.__version__,
                numba_threads=numba.config.NUMBA_NUM_THREADS, simulator=sim)
    for pkg in ("numba", "numba-cuda", "cupy-cuda13x", "cupy-cuda12x", "cupy", "cuda-bindings"):
        try:
            info[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    if dev is None:
        return info
    info = {}
    if not dev.sim:
        d = dev.cuda.get_current_device()
        name = d.name.decode() if isinstance(d.name, bytes) else str(d.name)
        info.update(gpu=name, compute_capability=".".join(map(str, d.compute_capability)))
    if dev.cp is not None:
        rt = dev.cp.cuda.runtime
        info.update(driver=rt.driverGetVersion(), runtime=rt.runtimeGetVersion(),
                    vram_total_gib=round(rt.memGetInfo()[1] / 2**30, 1))
    return info


def write_json(report: Report, args, el: float, rows: list) -> None:
    if not args.json:
        return
    try:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "elapsed_s": el, "rows": rows, **report.extra},
                      fh, indent=1, default=str)
        print(f"figures written to {args.json}")
    except Exception as exc:  # noqa: BLE001
        print(f"could not write {args.json}: {exc}")


def finish(report: Report, args) -> int:
    with report.lock:
        report.closed = True
        rows = list(report.rows)
    el = report.elapsed()
    tried = [r for r in rows if r["identical"] in ("yes", "no", "error", "timeout")]
    yes = sum(r["identical"] == "yes" for r in tried)
    bad = sum(r["identical"] in ("error", "timeout") for r in tried)
    skipped = sum(r["identical"] == "skipped" for r in rows)
    write_json(report, args, el, rows)
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
    ap.add_argument("--budget", type=float,
                    help=f"hard limit, s (default {HARD_S:.0f}: a lent machine's 600 s command)")
    ap.add_argument("--soft", type=float,
                    help=f"no check starts after this, s (default {SOFT_S:.0f}, or budget - 110 "
                         "when --budget is given)")
    ap.add_argument("--preflight-only", action="store_true", help="the preflight, then exit")
    ap.add_argument("--warm-jobs", type=int,
                    help="warm-up processes that compile parts of the device kernels into the "
                         "kernel cache, plus one that proves a block on the host (numba's "
                         "cache), while the device initialises (default on cuda: half the "
                         "cores, at most 8, none under 4 cores; sim: 0)")
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
        from steadfast.kernels.backend import enable_simulator
        enable_simulator()                   # before anything imports numba.cuda
    if args.seed is None:
        args.seed = time.time_ns() % (1 << 31)
    size_name = "sim" if sim else ("quick" if args.quick else "full")
    S = SIZES[size_name]
    hard = args.budget or HARD_S
    soft = args.soft or (SOFT_S if args.budget is None else max(hard - 110.0, hard * 0.8))
    report = Report()
    report.extra["budget_s"] = {"soft": soft, "hard": hard}
    # the kernel cache in the checkout (git-ignored) unless told otherwise: on a lent
    # machine a second command finds the first one's compiled kernels there
    os.environ.setdefault("PROVER_KERNEL_CACHE", os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".kernel-cache"))
    pf = preflight(sim)
    report.extra["preflight"] = pf
    print(preflight_line(pf), flush=True)
    if not pf["ok"] or args.preflight_only:
        write_json(report, args, report.elapsed(), [])
        return 0 if pf["ok"] else 2
    runner = Runner(report, soft, hard)
    ctx = Ctx(args, S, report, runner)
    wanted = {s.strip() for s in args.sections.split(",") if s.strip()}
    unknown = wanted - set(SECTIONS)
    if unknown:
        ap.error(f"unknown sections {sorted(unknown)}; choose from {','.join(SECTIONS)}")
    print(f"device_check: backend {args.backend}, sizes {size_name}, seed {args.seed}, "
          f"budget {soft:.0f}s soft / {hard:.0f}s hard", flush=True)
    try:                                     # versions first: they need no device
        report.extra["env"] = env_info(sim=sim)
        print("versions: " + ", ".join(f"{k}={v}" for k, v in report.extra["env"].items()),
              flush=True)
    except Exception as exc:  # noqa: BLE001
        print(f"version info failed: {exc}")
    from bench.device_common import Warmup
    cores = os.cpu_count() or 1
    jobs = args.warm_jobs if args.warm_jobs is not None else (
        0 if sim or cores < 4 else min(8, cores // 2))
    warm = Warmup(jobs, S["first_k"], args.backend, host=jobs > 0 and "e2e" in wanted)
    try:
        _run(args, S, sim, report, runner, ctx, wanted, warm)
    finally:
        warm.stop()
        report.extra.setdefault("warmup", {})["children"] = warm.status()
    return finish(report, args)


def _run(args, S, sim, report, runner, ctx, wanted, warm) -> None:
    st, dev, note = runner.call("init", lambda: Dev(sim))
    if st != "ok":
        report.add("device init", "-", st, note=note)
    else:
        ctx.dev = dev
        try:
            d = env_info(dev, sim)
            report.extra.setdefault("env", {}).update(d)
            print("device: " + (", ".join(f"{k}={v}" for k, v in d.items()) or "simulator"),
                  flush=True)
        except Exception as exc:  # noqa: BLE001
            print(f"device info failed: {exc}")
        # 1-3: sanity launch, precompile, the first cuda-vs-host proof comparison
        runner.run("sanity launch", "256 elements", lambda: check_sanity(ctx))
        e2e = E2E(ctx) if "e2e" in wanted else None
        ladder = args.e2e_k or S["e2e"]
        first_k = None if (e2e is None or "example" in ladder) else S["first_k"]
        try:
            from bench.device_common import sized_block
            pre_block = sized_block(first_k or S["first_k"])
        except Exception as exc:  # noqa: BLE001
            pre_block = None
            print(f"block generator failed: {exc}", flush=True)
        runner.run("precompile", "-", lambda: check_precompile(ctx, pre_block, warm))
        if first_k is not None:
            _guarded(report, "prove block first", f"2^{first_k} cycles",
                     lambda: e2e.first(first_k))
        # 4: the microbenchmarks
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
                     ("integrity tag", f"16x2^{S['stage']}", lambda: check_checksum(ctx)),
                     ("OOD reduction", f"{S['ood_cols']}x2^{S['stage']}", lambda: check_ood(ctx))]
        for name, size, fn in plan:
            runner.run(name, size, fn)
            if not runner.abandoned:
                try:
                    dev.free_all()
                except Exception as exc:  # noqa: BLE001 - e.g. a sticky CUDA error
                    print(f"freeing device memory failed: {exc}", flush=True)
        # 5: the rest of the end-to-end ladder
        if e2e is not None:
            warm_k = S["warm_k"] if args.warm_k is None else args.warm_k
            _guarded(report, "end-to-end", "-", lambda: e2e.run(ladder, warm_k))
            # 6: the fastest profile's slotted tables, if time is left
            if first_k is not None:
                _guarded(report, "prove block fastest", f"2^{first_k} cycles",
                         lambda: e2e.fastest(first_k))


def _guarded(report, check: str, size: str, fn) -> None:
    """``fn()``; an exception becomes an error row of ``check`` (and its traceback)."""
    try:
        fn()
    except Exception as exc:  # noqa: BLE001
        traceback.print_exc()
        report.add(check, size, "error", note=f"{type(exc).__name__}: {exc}"[:160])


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)          # do not wait for an abandoned (timed-out) check's thread
