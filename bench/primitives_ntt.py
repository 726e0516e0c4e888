"""Host NTT / coset-LDE timings (called by bench/primitives.py; also runnable alone).

``bench_ntt(cols, log_n)`` times ``ntt`` on uint32[cols, 2^log_n] (batch along rows);
``bench_lde(cols, log_n, log_blowup)`` times ``coset_lde`` on uint32[2^log_n, cols].
Both return {"first_call_s": ..., "steady_s": ..., "median_s": ...}: the first call
includes loading (or, on a cold cache, compiling) the kernels and building the twiddle
tables; steady is the best of the following calls (as bench/primitives.py reports; on a
shared machine the minimum is the least disturbed by other processes), median their median.

    python -m bench.primitives_ntt            # the reference sizes of the project brief
"""
from __future__ import annotations

import statistics
import sys
import time

import numpy as np

from steadfast.kernels.field import P
from steadfast.kernels.ntt_host import coset_lde, ntt


def _time(fn, repeats):
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return {"first_call_s": first, "steady_s": min(runs), "median_s": statistics.median(runs)}


def _random(shape, seed=0):
    return np.random.default_rng(seed).integers(0, P, shape, dtype=np.uint32)


def bench_ntt(cols: int, log_n: int, repeats: int = 7) -> dict:
    """Forward NTT of ``cols`` rows of length 2^log_n."""
    a = _random((cols, 1 << log_n))
    return _time(lambda: ntt(a), repeats)


def bench_lde(cols: int, log_n: int, log_blowup: int, repeats: int = 5) -> dict:
    """Coset LDE of uint32[2^log_n, cols] (row-major, as the prover's traces) by 2^log_blowup."""
    a = _random((1 << log_n, cols))
    return _time(lambda: coset_lde(a, log_blowup), repeats)


def main(argv=None) -> int:
    for cols, log_n in ((1, 20), (16, 20)):
        r = bench_ntt(cols, log_n)
        print(f"ntt {cols:>3} x 2^{log_n}:         first {r['first_call_s'] * 1e3:7.1f} ms  "
              f"steady {r['steady_s'] * 1e3:7.1f} ms  median {r['median_s'] * 1e3:7.1f} ms")
    for cols, log_n, k in ((1, 20, 1), (16, 20, 1)):
        r = bench_lde(cols, log_n, k)
        print(f"lde {cols:>3} x 2^{log_n} -> 2^{log_n + k}: first {r['first_call_s'] * 1e3:7.1f} ms"
              f"  steady {r['steady_s'] * 1e3:7.1f} ms  median {r['median_s'] * 1e3:7.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
