"""Protocol benchmark on the host path: prove and verify a synthetic block.

    PYTHONPATH=. python3 bench/prove_bench.py --tables 4 --log-rows 16 --width 8
    PYTHONPATH=. python3 bench/prove_bench.py --tables 2 --log-rows 10 --json

The workload: ``k`` tables of 2^m rows and ``w`` columns; even-numbered tables have
degree-2 transitions (x_j' = x_j x_(j+1) + j + 1), odd-numbered ones degree-3
(x_j' = x_j x_(j+1) x_(j+2) + j + 1, two quotient parts).  ``synthetic_air`` /
``synthetic_trace`` take any degree d >= 1 (the product of d consecutive columns);
``bench/block_bench.py --synthetic`` proves them at one fixed degree.

Where the figures come from: the per-round and per-table times (``rounds_s``,
``per_table_s``) are the prover's spans (:mod:`prover.common.spans`), the one timer mechanism
inside the prover.  The totals are timed here around the calls with ``time.perf_counter``:
``prove_s`` is one whole ``prove`` call (spans and all), ``verify_s`` the best of
``repeat_verify`` ``verify`` calls (``verify_cpu_s`` the same with ``process_time``), both
after a warm-up proof and verification of a tiny instance, so imports and cached kernels
are loaded -- which is what "verify time" means in docs/benchmarks.md.  ``fresh_*`` are
timed in a new interpreter: the import of the verifier and its first call.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
from numba import njit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from steadfast.air import AirBuilder  # noqa: E402
from steadfast.prover import Params, Spans, prove  # noqa: E402
from steadfast.verifier import verify  # noqa: E402

P = 2013265921


def synthetic_air(index: int, width: int, degree: int):
    """Table ``index``: ``width`` columns, x_j' = x_j x_(j+1) ... x_(j+degree-1) + j + 1
    (indices mod width): transition constraints of degree ``degree`` (>= 1)."""
    if degree < 1 or width < 1:
        raise ValueError(f"a synthetic AIR needs width >= 1 and degree >= 1, not "
                         f"width {width}, degree {degree}")
    b = AirBuilder(f"synth{index}_d{degree}")
    xs = b.main_cols("x", width)
    for j in range(width):
        term = xs[j]
        for d in range(1, degree):
            term = term * xs[(j + d) % width]
        b.when_transition(xs[j].next - (term + j + 1), name=f"t{j}")
    b.when_first_row(xs[0] - (index + 1), name="start")
    return b.build()


@njit(cache=True)
def _fill(t, degree):
    n, w = t.shape
    for i in range(1, n):
        for j in range(w):
            v = t[i - 1, j]                 # uint64 throughout: exact products < 2^62
            for d in range(1, degree):
                v = (v * t[i - 1, (j + d) % w]) % np.uint64(P)
            t[i, j] = (v + np.uint64(j + 1)) % np.uint64(P)


def synthetic_trace(index: int, log_n: int, width: int, degree: int) -> np.ndarray:
    rng = np.random.default_rng(index)
    t = np.zeros((1 << log_n, width), dtype=np.uint64)
    t[0] = rng.integers(1, P, width, dtype=np.uint64)
    t[0, 0] = index + 1
    _fill(t, degree)
    return t.astype(np.uint32)


_FRESH = """
import sys, time
sys.path.insert(0, {root!r}); sys.path.insert(0, {bench!r})
t0 = time.perf_counter()
from steadfast.verifier import verify
from prove_bench import synthetic_air
t1 = time.perf_counter()
airs = [synthetic_air(i, {width}, 2 if i % 2 == 0 else 3) for i in range({tables})]
proof = open({path!r}, "rb").read()
t2 = time.perf_counter()
verify(proof, airs, [[] for _ in airs], min_security_bits=0)
print(t1 - t0, time.perf_counter() - t2)
"""


def verify_fresh(proof: bytes, tables: int, width: int) -> tuple[float, float]:
    """(import seconds, first verify seconds) in a fresh interpreter."""
    import subprocess
    import tempfile
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.NamedTemporaryFile(suffix=".proof", delete=False) as f:
        f.write(proof)
    try:
        code = _FRESH.format(root=os.path.dirname(here), bench=here, width=width,
                             tables=tables, path=f.name)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True).stdout.split()
    finally:
        os.unlink(f.name)
    return float(out[0]), float(out[1])


def run(tables: int, log_rows: int, width: int, params: Params, repeat_verify: int = 3) -> dict:
    airs, traces = [], []
    for i in range(tables):
        deg = 2 if i % 2 == 0 else 3
        airs.append(synthetic_air(i, width, deg))
        traces.append(synthetic_trace(i, log_rows, width, deg))
    pvs = [[] for _ in airs]
    # warm-up on a tiny instance: loads every cached kernel (not part of the figures)
    small = [synthetic_trace(i, 4, width, 2 if i % 2 == 0 else 3) for i in range(tables)]
    warm = prove(small, airs, pvs, Params(num_queries=4, pow_bits=1))
    verify(warm, airs, pvs, min_security_bits=0)          # weak warm-up parameters

    spans = Spans()
    t0 = time.perf_counter()
    proof = prove(traces, airs, pvs, params, spans=spans, check=False)
    prove_s = time.perf_counter() - t0
    times, cpu = [], []
    for _ in range(repeat_verify):
        t1, c1 = time.perf_counter(), time.process_time()
        verify(proof, airs, pvs, min_security_bits=0)     # the bench's parameters
        times.append(time.perf_counter() - t1)
        cpu.append(time.process_time() - c1)      # the verifier is single-threaded
    imp, first = verify_fresh(proof, tables, width)
    rounds = {k: round(v, 4) for k, v in spans.stats.by_round().items() if k != "table"}
    per_table = {}
    for name, table, sec in spans.stats.as_rows():
        if table is not None and name != "table":
            per_table.setdefault(table, {})[name] = round(sec, 4)
    return {"tables": tables, "log_rows": log_rows, "width": width,
            "params": vars(params) if hasattr(params, "__dict__") else str(params),
            "prove_s": round(prove_s, 3), "rounds_s": rounds, "per_table_s": per_table,
            "proof_bytes": len(proof), "verify_s": round(min(times), 4),
            "verify_all_s": [round(t, 4) for t in times], "verify_cpu_s": round(min(cpu), 4),
            "fresh_import_s": round(imp, 3), "fresh_first_verify_s": round(first, 4)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=4)
    ap.add_argument("--log-rows", type=int, default=16)
    ap.add_argument("--width", type=int, default=8)
    ap.add_argument("--log-blowup", type=int, default=1)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--pow-bits", type=int, default=16)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    a = ap.parse_args(argv)
    params = Params(log_blowup=a.log_blowup, num_queries=a.queries, pow_bits=a.pow_bits)
    res = run(a.tables, a.log_rows, a.width, params)
    if a.json:
        print(json.dumps(res))
        return
    print(f"{a.tables} tables x 2^{a.log_rows} rows x {a.width} columns, "
          f"log_blowup={a.log_blowup}, queries={a.queries}, pow_bits={a.pow_bits}")
    print(f"prove   {res['prove_s']:.3f} s")
    for k, v in res["rounds_s"].items():
        print(f"  {k:<12} {v:.3f} s")
    print(f"proof   {res['proof_bytes']} bytes ({res['proof_bytes'] / 1024:.0f} KiB)")
    print(f"verify  {res['verify_s']:.3f} s (best of {len(res['verify_all_s'])}, CPU "
          f"{res['verify_cpu_s']:.3f} s); fresh process: "
          f"import {res['fresh_import_s']:.2f} s, first verify {res['fresh_first_verify_s']:.3f} s")


if __name__ == "__main__":
    main()
