"""R2 quotient on the host: the numpy interpreter vs the compiled twin (kernels/constraint_host.py).

For each size k, the tables of ``bench/make_block.py -k K --hash-share H``'s block of
RISC-V transactions (``make_block.v2_block``, seed 1, block format 2; k >= 10: every
transaction's 16 tables, the shared BYTES and POSEIDON2) are traced, their main /
aux traces LDE'd exactly as a proof does (HostStages.main_commit's LDE, aux_build, the
preprocessed LDE), and ``HostStages.quotient`` is run on every table with
``compiled=False`` and ``compiled=True``, alternating, ``--rounds`` times.  Reported per
size: wall seconds and CPU seconds (user + system of the process, all threads) of each
path summed over the tables, best and median round, and the same-run ratio; the compile
(or disk-cache load) time of the compiled kernels is measured apart, before the rounds.
Every round checks that both paths return the same bytes.

    PYTHONPATH=. .venv/bin/python bench/quotient_host_bench.py --sizes 14 16 --rounds 3
    PYTHONPATH=. .venv/bin/python bench/quotient_host_bench.py --sizes 16 18 --per-point

``--per-point``: the compiled path only, on one numba thread, best of ``--rounds`` per
table: seconds, and nanoseconds per instruction-point (the table's encoded instructions x
its quotient-domain points), summed over the block and per opcode mix.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def tables_of(k: int, share: float):
    """(air, shape, main Committed-like, prep_lde, aux Committed-like, pv, chal, alpha,
    terminal, name) for each table of the 2^k block of RISC-V transactions."""
    import numpy as np
    from steadfast.kernels.ntt_host import lde_columns
    from steadfast.prover.core.stages import Committed, HostStages
    from steadfast.verifier.proof_format import Params
    from steadfast.verifier.protocol import SHIFT, table_shape
    from steadfast.kernels.field import P
    from steadfast.rv32.block import build_block_traces
    from steadfast.rv32.blockfile import parse_block
    from steadfast.rv32.run import execute
    from bench.make_block import v2_block

    block = parse_block(v2_block(k, share)[0])
    params = Params()
    exs = [execute(t.program, t.input, block.max_cycles, record=True) for t in block.transactions]
    bt = build_block_traces([t.program for t in block.transactions], exs, block.max_cycles,
                            params.log_blowup)
    host = HostStages()
    rng = np.random.default_rng(k)
    out = []
    for name, air, trace, pv in zip(bt.names, bt.airs, bt.traces, bt.table_public_values):
        trace = np.asarray(trace, dtype=np.uint32)
        log_n = trace.shape[0].bit_length() - 1
        shape = table_shape(air, log_n, params)
        main = Committed(lde_columns(np.ascontiguousarray(trace.T), shape.log_blowup, SHIFT),
                         None, None, None)
        prep = host.prep_lde(air, shape)
        chal = {"logup_beta": rng.integers(0, P, 4, dtype=np.uint32),
                "logup_gamma": rng.integers(0, P, 4, dtype=np.uint32)}
        aux = term = None
        if air.interactions:
            aux_t, term = host.aux_build(air, shape, trace, pv, chal)
            aux = Committed(lde_columns(np.ascontiguousarray(aux_t.T), shape.log_blowup, SHIFT),
                            None, None, None)
        alpha = rng.integers(0, P, 4, dtype=np.uint32)
        out.append(((air, shape, main, prep, aux, list(pv), chal, alpha, term), name))
    return out


def run(k: int, share: float, rounds: int) -> dict:
    import numpy as np
    from steadfast.prover.core.stages import HostStages

    t0 = time.perf_counter()
    named = tables_of(k, share)
    tabs = [t for t, _ in named]
    names = [n for _, n in named]
    setup_s = time.perf_counter() - t0
    host = HostStages()
    compile_s = {}
    for t, name in zip(tabs, names):    # generate + compile (or load) apart from the timing
        w0, c0 = time.perf_counter(), _cpu()
        host.quotient(*t, compiled=True)
        compile_s[name] = {"wall_s": time.perf_counter() - w0, "cpu_s": _cpu() - c0}
    res = {"numpy": [], "compiled": []}
    for r in range(rounds):
        order = ("numpy", "compiled") if r % 2 == 0 else ("compiled", "numpy")
        got = {}
        for path in order:
            w0, c0 = time.perf_counter(), _cpu()
            got[path] = [host.quotient(*t, compiled=(path == "compiled")) for t in tabs]
            res[path].append((time.perf_counter() - w0, _cpu() - c0))
        for a, b in zip(got["numpy"], got["compiled"]):
            if not np.array_equal(a, b):
                raise SystemExit(f"2^{k}: compiled quotient differs from numpy")
    summary = {"k": k, "setup_s": setup_s, "compile": compile_s,
               "tables": {n: 1 << t[1].log_quotient for t, n in zip(tabs, names)},
               "load": os.getloadavg()}
    for path, rs in res.items():
        summary[path] = {"wall_best": min(w for w, _ in rs), "wall_median": statistics.median(w for w, _ in rs),
                         "cpu_best": min(c for _, c in rs), "cpu_median": statistics.median(c for _, c in rs)}
    summary["ratio_wall_median"] = summary["numpy"]["wall_median"] / summary["compiled"]["wall_median"]
    summary["ratio_cpu_median"] = summary["numpy"]["cpu_median"] / summary["compiled"]["cpu_median"]
    return summary


def per_point(k: int, share: float, rounds: int) -> dict:
    """The compiled quotient per table on one thread: best seconds, instruction-points."""
    import collections
    import numba
    from steadfast.kernels import constraint_host as CH
    from steadfast.prover.core.stages import HostStages
    numba.set_num_threads(1)
    names = CH.OPCODE_NAMES
    host = HostStages()
    mix: collections.Counter = collections.Counter()
    rows, total_s, total_pts = [], 0.0, 0
    for t, name in tables_of(k, share):
        host.quotient(*t, compiled=True)            # compile / load apart
        best = min(_timed(lambda: host.quotient(*t, compiled=True)) for _ in range(rounds))
        enc = CH.encode(t[0])
        M = 1 << t[1].log_quotient
        for op, c in collections.Counter(enc.code[:, 0].tolist()).items():
            mix[names[op]] += c * M
        pts = len(enc.code) * M
        rows.append({"table": name, "points": M, "instructions": len(enc.code),
                     "slots": enc.slots, "seconds": best, "ns_per_point": best / pts * 1e9})
        total_s += best
        total_pts += pts
    return {"k": k, "seconds": total_s, "instruction_points": total_pts,
            "ns_per_point": total_s / total_pts * 1e9, "mix": dict(mix.most_common()),
            "tables": sorted(rows, key=lambda r: -r["seconds"])}


def _timed(f) -> float:
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[14, 16])  # k >= 10
    ap.add_argument("--hash-share", type=float, default=0.25)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--per-point", action="store_true",
                    help="compiled only, one thread: ns per instruction-point per table")
    a = ap.parse_args(argv)
    if a.per_point:
        results = []
        for k in a.sizes:
            r = per_point(k, a.hash_share, a.rounds)
            results.append(r)
            print(f"2^{k}: {r['seconds']:.3f} s, {r['instruction_points'] / 1e6:.1f} M "
                  f"instruction-points, {r['ns_per_point']:.2f} ns each (one thread)")
            for t in r["tables"][:8]:
                print(f"  {t['table']:20s} 2^{t['points'].bit_length() - 1} points, "
                      f"{t['instructions']:5d} instructions, {t['slots']:3d} slots: "
                      f"{t['seconds'] * 1e3:8.1f} ms, {t['ns_per_point']:.2f} ns")
        if a.json:
            with open(a.json, "w") as fh:
                json.dump(results, fh, indent=1)
        return 0
    import numba
    print(f"numba threads {numba.get_num_threads()}, load {os.getloadavg()}")
    results = []
    for k in a.sizes:
        s = run(k, a.hash_share, a.rounds)
        results.append(s)
        comp = sum(v["wall_s"] for v in s["compile"].values())
        print(f"2^{k}: tables {s['tables']}  compile/load {comp:.2f} s "
              "(" + ", ".join(f"{n} {v['wall_s']:.2f}" for n, v in s["compile"].items()) + ")")
        for path in ("numpy", "compiled"):
            v = s[path]
            print(f"  {path:9s} wall best {v['wall_best']:.3f} median {v['wall_median']:.3f} s | "
                  f"CPU best {v['cpu_best']:.3f} median {v['cpu_median']:.3f} s")
        print(f"  numpy/compiled: wall {s['ratio_wall_median']:.2f}x, CPU "
              f"{s['ratio_cpu_median']:.2f}x (medians)  load {tuple(round(x, 2) for x in s['load'])}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
