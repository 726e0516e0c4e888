"""prover/core/hostops.combine_rows (R4 DEEP: base columns times EF coefficients) against its
previous form, in one run (issue #12).

    PYTHONPATH=. python bench/primitives_hostops.py

The previous kernel (kept here as the baseline, not in the product) reduced every product
with a 64-bit remainder and walked the columns of each point (stride N); the current one
multiplies in Montgomery form along contiguous points of a column.  CPU seconds (process
time, all threads) are reported next to wall seconds: the machine may be shared.
"""
from __future__ import annotations

import time

import numpy as np
from numba import njit, prange

from steadfast.prover.core.hostops import combine_rows

_P64 = np.uint64(2013265921)


@njit(parallel=True)
def _combine_rows_previous(mat, coeffs, out, chunk):
    c, n = mat.shape
    nchunks = (n + chunk - 1) // chunk
    for t in prange(nchunks):
        lo = t * chunk
        hi = min(n, lo + chunk)
        for x in range(lo, hi):
            acc0 = np.uint64(0)
            acc1 = np.uint64(0)
            acc2 = np.uint64(0)
            acc3 = np.uint64(0)
            for j in range(c):
                a = np.uint64(mat[j, x])
                acc0 += (a * np.uint64(coeffs[j, 0])) % _P64
                acc1 += (a * np.uint64(coeffs[j, 1])) % _P64
                acc2 += (a * np.uint64(coeffs[j, 2])) % _P64
                acc3 += (a * np.uint64(coeffs[j, 3])) % _P64
            out[x, 0] = np.uint32(acc0 % _P64)
            out[x, 1] = np.uint32(acc1 % _P64)
            out[x, 2] = np.uint32(acc2 % _P64)
            out[x, 3] = np.uint32(acc3 % _P64)


def previous(mat, coeffs):
    out = np.zeros((mat.shape[1], 4), dtype=np.uint32)
    _combine_rows_previous(mat, coeffs, out, 1 << 12)
    return out


def _best(f, r=5):
    f()
    wall = cpu = float("inf")
    for _ in range(r):
        t, c = time.perf_counter(), time.process_time()
        f()
        wall = min(wall, time.perf_counter() - t)
        cpu = min(cpu, time.process_time() - c)
    return wall, cpu


def main() -> None:
    import os
    P = 2013265921
    rng = np.random.default_rng(0)
    print(f"load average: {os.getloadavg()[0]:.1f}")
    for c, log_n in ((80, 15), (299, 14), (8, 19)):
        mat = rng.integers(0, P, (c, 1 << log_n), dtype=np.uint32)
        co = rng.integers(0, P, (c, 4), dtype=np.uint32)
        assert np.array_equal(previous(mat, co), combine_rows(mat, co))
        (wo, co_), (wn, cn) = _best(lambda: previous(mat, co)), _best(lambda: combine_rows(mat, co))
        print(f"combine_rows {c} x 2^{log_n}: previous {wo * 1e3:.1f} ms wall / {co_ * 1e3:.1f} ms CPU, "
              f"now {wn * 1e3:.1f} / {cn * 1e3:.1f} ms: {wo / wn:.2f}x wall, {co_ / cn:.2f}x CPU")


if __name__ == "__main__":
    main()
