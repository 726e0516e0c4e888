"""Poseidon2 / Merkle host benchmarks, called by bench/primitives.py.

Each function returns a dict with ``first_call_s`` (the first call in this process:
includes loading the numba cache, or compiling on a cold cache), ``steady_s`` (best of
``repeats`` later calls) and, for the permutation, ``perm_per_s``.
Run directly for a quick report: ``python -m bench.primitives_hash``.
"""
from __future__ import annotations

import time

import numpy as np

from steadfast.kernels.field import P


def _timed(fn, repeats: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return first, best


def bench_poseidon2(batch: int = 1 << 17, repeats: int = 5, seed: int = 0) -> dict:
    """Batched Poseidon2-16 permutations of ``batch`` random states."""
    from steadfast.kernels.poseidon2 import poseidon2_permute
    states = np.random.default_rng(seed).integers(0, P, (batch, 16), dtype=np.uint32)
    first, steady = _timed(lambda: poseidon2_permute(states), repeats)
    return {"batch": batch, "first_call_s": first, "steady_s": steady,
            "perm_per_s": batch / steady}


def bench_merkle(n: int, w: int = 16, repeats: int = 3, seed: int = 0) -> dict:
    """Host Merkle commitment of a random uint32[n, w] matrix (n a power of two)."""
    from steadfast.kernels.merkle import commit
    m = np.random.default_rng(seed).integers(0, P, (n, w), dtype=np.uint32)
    first, steady = _timed(lambda: commit(m), repeats)
    perms = n * ((w + 7) // 8) + (n - 1)
    return {"n": n, "w": w, "first_call_s": first, "steady_s": steady,
            "perm_per_s": perms / steady}


def main() -> None:
    import numba
    print(f"numba threads: {numba.get_num_threads()}")
    r = bench_poseidon2()
    print(f"poseidon2 batch 2^17: first {r['first_call_s']:.3f} s, steady {r['steady_s']:.4f} s, "
          f"{r['perm_per_s'] / 1e6:.2f} M perm/s")
    for log_n in (16, 20):
        r = bench_merkle(1 << log_n)
        print(f"merkle commit 2^{log_n} x 16: first {r['first_call_s']:.3f} s, "
              f"steady {r['steady_s']:.3f} s")


if __name__ == "__main__":
    main()
