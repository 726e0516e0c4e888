"""Cost of the residency switches, as ratios measured in one run.

    PYTHONPATH=. python bench/residency_bench.py [--block examples/block.json] [--reps 3]
        [--backend emu] [--queries 100] [--pow-bits 16] [--xcheck-only]

Proves the same block repeatedly (interleaving the configurations so drift hits all of
them alike) and reports the median prove time of: the host path, the device pipeline
with the defaults (SERIALIZE_R2=1, XCHECK=0), with SERIALIZE_R2=0, and with XCHECK=1 --
plus the ratios the project targets: R2 serialisation cost (<= 2 % of prove time) and
XCHECK cost (<= 1 %).  ``--xcheck-only`` runs just the defaults and XCHECK=1 (for
large blocks; the reference bytes then come from the first device proof).
"""
from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from bench.soak import load_tables  # noqa: E402
from steadfast.kernels.hostlib import copy_checksum  # noqa: E402
from steadfast.prover.device.pipeline import PipelineConfig, run_pipeline  # noqa: E402
from steadfast.prover.core.prove import prepare, prove  # noqa: E402
from steadfast.verifier.proof_format import Params  # noqa: E402


def fused_tag_overhead_per_byte(mib: int = 64, reps: int = 9) -> float:
    """Seconds per byte that tagging a buffer inside its copy adds to the plain copy
    (kernels.hostlib.copy_checksum vs np.copyto), medians on a ``mib`` MiB buffer."""
    src = np.random.default_rng(0).integers(0, 1 << 31, mib << 18, dtype=np.uint32)
    dst = np.empty_like(src)
    copy_checksum(dst, src)
    fused, plain = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        copy_checksum(dst, src)
        t1 = time.perf_counter()
        np.copyto(dst, src)
        t2 = time.perf_counter()
        fused.append(t1 - t0)
        plain.append(t2 - t1)
    return max(0.0, statistics.median(fused) - statistics.median(plain)) / src.nbytes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--block", default=os.path.join(os.path.dirname(__file__), "..", "examples",
                                                     "block.json"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--backend", default="emu", choices=("emu", "sim", "cuda"))
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--pow-bits", type=int, default=16)
    ap.add_argument("--xcheck-only", action="store_true",
                    help="only the device defaults and XCHECK=1 (no host path, no SERIALIZE_R2=0)")
    args = ap.parse_args(argv)
    logging.disable(logging.WARNING)
    airs, traces, pvs = load_tables(args.block)
    params = Params(num_queries=args.queries, pow_bits=args.pow_bits)
    st = prepare(traces, airs, pvs, params, check=False)
    configs = {
        "host": None,
        "device (defaults)": dict(),
        "SERIALIZE_R2=0": dict(serialize_r2=False),
        "XCHECK=1": dict(xcheck=True),
    }
    if args.xcheck_only:
        del configs["host"], configs["SERIALIZE_R2=0"]
        ref, _ = run_pipeline(st, PipelineConfig(backend=args.backend))    # warm-up
    else:
        ref = prove(traces, airs, pvs, params)                  # warm-up (compilation)
    per_byte = fused_tag_overhead_per_byte()       # (also compiles the fused copy first)
    times: dict = {k: [] for k in configs}
    cpu: dict = {k: [] for k in configs}           # process CPU seconds (all threads)
    xcheck_s, tags_s, tagged_bytes = [], [], []
    for _ in range(args.reps):
        for name, kw in configs.items():
            t0, c0 = time.perf_counter(), time.process_time()
            if kw is None:
                proof = prove(traces, airs, pvs, params, check=False)
            else:
                proof, stats = run_pipeline(st, PipelineConfig(backend=args.backend, **kw))
                if kw.get("xcheck"):
                    xcheck_s.append(stats.xcheck_s)
                    tags_s.append(stats.xcheck_tags_s)
                    tagged_bytes.append(stats.xcheck_tagged_write_bytes)
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
            if proof != ref:
                print(f"MISMATCH: {name} produced different bytes", file=sys.stderr)
                return 1
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med["device (defaults)"]
    print(f"block {args.block}, backend {args.backend}, {args.reps} reps, "
          f"queries {args.queries}, pow_bits {args.pow_bits}; all proofs byte-identical "
          f"(to the {'first device' if args.xcheck_only else 'host'} proof)")
    print(f"{'configuration':20} {'median s':>9} {'vs defaults':>12}")
    for k, v in med.items():
        print(f"{k:20} {v:9.3f} {v / base:11.3f}x   (runs: "
              f"{', '.join(f'{t:.2f}' for t in times[k])})")
    ser = (f"r2_serialisation_cost_pct={100 * (base - med['SERIALIZE_R2=0']) / base:.2f} "
           if "SERIALIZE_R2=0" in med else "")
    # On emu most tags are summed inside the copy that writes the buffer: that share is
    # not in xcheck_s, so estimate it as bytes x (fused copy - plain copy), timed here.
    write_tags = statistics.median(tagged_bytes) * per_byte
    inside = statistics.median(xcheck_s) + write_tags
    xc = inside / med["XCHECK=1"]
    print(f"{ser}"
          f"xcheck_cost_pct={100 * xc:.2f} "
          f"(xcheck work {inside:.3f}s = measured inside the proof "
          f"{statistics.median(xcheck_s):.3f}s, of which integrity tags "
          f"{statistics.median(tags_s):.3f}s, + tags inside the writes "
          f"{statistics.median(tagged_bytes) / 2**20:.0f} MiB x {per_byte * 2**30 * 1e3:.1f} ms/GiB "
          f"= {write_tags:.3f}s; wall-time difference "
          f"{100 * (med['XCHECK=1'] - base) / base:.2f}%; CPU-time difference "
          f"{100 * (statistics.median(cpu['XCHECK=1']) - statistics.median(cpu['device (defaults)'])) / statistics.median(cpu['device (defaults)']):.2f}%)")
    print("cpu s: " + "; ".join(f"{k} " + ", ".join(f"{t:.2f}" for t in v) for k, v in cpu.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
