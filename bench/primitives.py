"""Host-path primitive benchmarks (issue #2): NTT, LDE, Poseidon2, Merkle commit.

    PYTHONPATH=. python bench/primitives.py [--json] [--quick]

Each row reports the first call (numba compilation or cache load, plus one run) apart
from the steady state (best of several runs after warm-up), and the competitor's
number to beat (openvm-zorch 0.1.0 on a machine like ours, CPU, after warm-up).
``--quick`` runs smaller sizes (for a smoke test); figures for docs come from the full run.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import primitives_hash as PH  # noqa: E402
from bench import primitives_ntt as PN   # noqa: E402

# the numbers to beat, keyed by the full-size row names (the sizes of issue #2)
BASELINES = {
    "ntt 1x2^20": 0.068,
    "ntt 16x2^20": None,
    "lde 16x2^20->2^21": 2.1,
    "poseidon2 batch 2^17": 2.0e6,
    "merkle 2^16x16": 0.35,
    "merkle 2^20x16": 5.0,
}


def run(quick: bool):
    """Run every row; names state the sizes actually run (--quick: 1/16 of each size)."""
    s = 4 if quick else 0
    rows = []
    t0 = time.perf_counter()
    for cols in (1, 16):
        rows.append((f"ntt {cols}x2^{20 - s}", PN.bench_ntt(cols, 20 - s)))
    rows.append((f"lde 16x2^{20 - s}->2^{21 - s}", PN.bench_lde(16, 20 - s, 1)))
    rows.append((f"poseidon2 batch 2^{17 - s}", PH.bench_poseidon2(1 << (17 - s))))
    for log_n in (16, 20):
        rows.append((f"merkle 2^{log_n - s}x16", PH.bench_merkle(1 << (log_n - s), 16)))
    total = time.perf_counter() - t0
    return rows, total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    ap.add_argument("--quick", action="store_true", help="1/16 of the sizes (smoke test)")
    args = ap.parse_args(argv)
    rows, total = run(args.quick)
    report = {"machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                          "python": platform.python_version()},
              "quick": args.quick, "total_s": total, "rows": []}
    for name, r in rows:
        base = None if args.quick else BASELINES[name]   # quick sizes have no baseline
        entry = {"name": name, **r, "baseline": base}
        if base:
            if name.startswith("poseidon2"):
                entry["speedup"] = r["perm_per_s"] / base
            else:
                entry["speedup"] = base / r["steady_s"]
        report["rows"].append(entry)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{'benchmark':24} {'first call':>11} {'steady':>10} {'rate':>14} {'to beat':>10} {'ratio':>7}")
    for e in report["rows"]:
        rate = f"{e['perm_per_s'] / 1e6:.2f} Mperm/s" if "perm_per_s" in e else ""
        base = e["baseline"]
        if base is None:
            bs = "-"
        elif e["name"].startswith("poseidon2"):
            bs = f"{base / 1e6:.1f} M/s"
        else:
            bs = f"{base * 1e3:.0f} ms"
        ratio = f"{e['speedup']:.2f}x" if "speedup" in e else "-"
        print(f"{e['name']:24} {e['first_call_s'] * 1e3:9.0f}ms {e['steady_s'] * 1e3:8.1f}ms "
              f"{rate:>14} {bs:>10} {ratio:>7}")
    print(f"total {total:.1f}s (ratio > 1 means faster than the number to beat)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
