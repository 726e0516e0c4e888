#!/usr/bin/env python3
"""The first and second ``prove`` on an empty numba cache, and what the first one compiles.

    .venv/bin/python bench/cold_start_bench.py                     # examples/block.json, cold then warm
    .venv/bin/python bench/cold_start_bench.py --hello             # examples/hello.elf
    .venv/bin/python bench/cold_start_bench.py --profile 25        # + the 25 costliest compiles
    .venv/bin/python bench/cold_start_bench.py --airs              # prove_airs on a small AIR
    .venv/bin/python bench/cold_start_bench.py --keep DIR          # reuse / keep the cache DIR

Each run is a fresh process with ``NUMBA_CACHE_DIR`` (the host kernels' ``cache=True``
files) and ``PROVER_KERNEL_CACHE`` (the device kernels') pointed at one directory, empty
for the first run (a fresh machine's state: nothing cached) and shared by the second.
With ``--profile`` the child wraps numba's ``Dispatcher.compile`` and reports, per
function, the seconds spent compiling it (its own, excluding the njit functions it calls,
which are compiled while it is typed) or loading it from the cache, and the signature count;
a call that waited for another thread's compile of the same signature counts as neither.
The proof file's sha256 is printed for each run (the bytes must not depend on the cache).
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _profiler(rows: dict):
    """Every compile's own seconds by function (compile_ahead.compile_watch), split into
    compiles, cache loads and waits on another thread's compile of the same function."""
    from steadfast.prover.cli.compile_ahead import compile_watch

    def before(self, sig, depth):
        return sum(self._cache_hits.values()), len(self.overloads)

    def after(self, sig, token, own):
        hits, known = token
        key = f"{self.py_func.__module__}.{self.py_func.__qualname__}"
        r = rows.setdefault(key, {"compile_s": 0.0, "load_s": 0.0, "sigs": 0, "loads": 0,
                                  "wait_s": 0.0,
                                  "parallel": bool(self.targetoptions.get("parallel"))})
        if sum(self._cache_hits.values()) > hits:
            r["load_s"] += own
            r["loads"] += 1
        elif len(self.overloads) > known:
            r["compile_s"] += own
            r["sigs"] += 1
            r.setdefault("signatures", []).append(str(sig))
        else:                            # another thread compiled it: waited on numba's lock
            r["wait_s"] += own
    return compile_watch(before, after)


def _child(argv: list[str], profile: bool, airs: bool) -> None:
    rows: dict = {}
    t0 = time.perf_counter()
    with _profiler(rows) if profile else contextlib.nullcontext():
        if airs:
            _prove_airs(argv)
        else:
            from steadfast.prover.cli import main_prove
            rc = main_prove(argv)
            if rc:
                raise SystemExit(rc)
    wall = time.perf_counter() - t0
    print("@@" + json.dumps({"in_process_s": wall, "rows": rows}))


def _prove_airs(argv: list[str]) -> None:
    """air.examples' LogUp block + a Fibonacci AIR (tests/test_custom_airs.py's statement)
    through Prover.prove_airs at the default security; argv = [out, log_blowup]."""
    from steadfast.air import examples as ex
    from steadfast.prover.api import Prover, ProverConfig
    airs, traces, pvs = ex.lookup_block()
    fib_trace, fib_pv = ex.fibonacci_trace(7)
    cfg = ProverConfig(backend="host", log_blowup=int(argv[1]))
    proof = Prover(cfg).prove_airs(airs + [ex.fibonacci_air()], traces + [fib_trace],
                                   pvs + [fib_pv])
    proof.save(argv[0])


def _run(cache: str, argv: list[str], profile: bool, airs: bool, threads: str | None) -> dict:
    env = dict(os.environ, NUMBA_CACHE_DIR=os.path.join(cache, "numba"),
               PROVER_KERNEL_CACHE=os.path.join(cache, "kernels"))
    if threads:
        env["NUMBA_NUM_THREADS"] = threads
    cmd = [sys.executable, os.path.abspath(__file__), "--child"] + ["--profile"] * profile + \
        ["--airs"] * airs + ["--"] + argv
    t0 = time.perf_counter()
    r0 = os.times()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    r1 = os.times()
    wall = time.perf_counter() - t0
    if proc.returncode:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-5000:])
        raise SystemExit(f"child failed ({proc.returncode})")
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("@@")][-1]
    res = json.loads(line[2:])
    res["wall_s"] = wall
    res["cpu_s"] = (r1.children_user - r0.children_user) + (r1.children_system - r0.children_system)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", type=int, nargs="?", const=25, default=0,
                    help="list the N costliest compiles of the cold run (default 25)")
    ap.add_argument("--airs", action="store_true", help="prove_airs on a small generic AIR")
    ap.add_argument("--hello", action="store_true",
                    help="prove examples/hello.elf instead of the example block")
    ap.add_argument("--log-blowup", type=int, default=2, help="with --airs (default 2)")
    ap.add_argument("--keep", help="cache directory to use and keep (default: a temp dir)")
    ap.add_argument("--runs", type=int, default=2, help="runs on the one cache (default 2)")
    ap.add_argument("--threads", help="NUMBA_NUM_THREADS for the children")
    ap.add_argument("--json", help="write the results to this file")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("rest", nargs="*")
    args = ap.parse_args(argv)
    if args.child:
        _child(args.rest, args.profile > 0, args.airs)
        return 0
    tmp = None if args.keep else tempfile.TemporaryDirectory(prefix="steadfast-cold-")
    cache = args.keep or tmp.name
    out = os.path.join(tempfile.gettempdir(), f"cold_start_{os.getpid()}.proof")
    if args.airs:
        prove_argv = [out, str(args.log_blowup)]
    elif args.hello:
        prove_argv = ["examples/hello.elf", "--input", "examples/hello.in", "-o", out, "-q"]
    else:
        prove_argv = ["examples/block.json", "-o", out, "-q"]
    results = []
    for i in range(args.runs):
        res = _run(cache, prove_argv, args.profile > 0 and i == 0, args.airs, args.threads)
        with open(out, "rb") as fh:
            res["sha256"] = hashlib.sha256(fh.read()).hexdigest()
        res["load"] = os.getloadavg()[0]
        results.append(res)
        label = "cold" if i == 0 and not args.keep else f"run {i + 1}"
        print(f"{label}: {res['wall_s']:.1f} s wall, {res['cpu_s']:.1f} s CPU "
              f"(in process {res['in_process_s']:.1f} s), load {res['load']:.1f}, "
              f"proof sha256 {res['sha256'][:16]}", flush=True)
        if res["rows"] and args.profile:
            rows = sorted(res["rows"].items(), key=lambda kv: -kv[1]["compile_s"])
            tot = sum(r["compile_s"] for _, r in rows)
            tl = sum(r["load_s"] for _, r in rows)
            print(f"  compiling {tot:.1f} s in {sum(r['sigs'] for _, r in rows)} signatures of "
                  f"{sum(1 for _, r in rows if r['sigs'])} functions; cache loads {tl:.1f} s")
            for name, r in rows[:args.profile]:
                print(f"  {r['compile_s']:7.2f} s  {r['sigs']:2d} sig{'s' if r['sigs'] != 1 else ' '}"
                      f"{'  parallel' if r['parallel'] else '          '}  {name}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    if tmp is not None:
        tmp.cleanup()
    try:
        os.unlink(out)
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
