"""Poseidon2 / Merkle host benchmarks, called by bench/primitives.py.

Each function returns a dict with ``first_call_s`` (the first call in this process:
includes loading the numba cache, or compiling on a cold cache), ``steady_s`` (best of
``repeats`` later calls) and, for the permutation, ``perm_per_s``.
Run directly for a quick report: ``python -m bench.primitives_hash``.

``python -m bench.primitives_hash --widths [--rounds 3]`` compares, in one run, the
batched Poseidon2 path compiled with 256-bit vectors (``STEADFAST_VECTOR_WIDTH=256``:
numba's default on AVX-512 Intel cores, the code before issue #12) and with the process
default (512-bit where the host has AVX-512; steadfast/_vector_width.py): each round runs
one fresh subprocess per width, alternating, and reports wall M perm/s at 2^17 states
(all numba threads), CPU-time M perm/s on one thread (less sensitive to a loaded
machine), a 2^16 x 16 Merkle commit, and the same-round ratios.

``python -m bench.primitives_hash --kernels [--avx2] [--rounds 2]`` is the same report for
the two batched kernels of this tree (``STEADFAST_POSEIDON2_KERNEL=int64``, the lane-major
int64 kernel, and ``lanes``, kernels/poseidon2_lanes.py), in alternating subprocesses;
``--avx2`` masks the host's AVX-512 features off in both (an AVX2 machine's code).

``python -m bench.primitives_hash --ab ROOT [--rounds 2]`` is the before/after of a kernel
change in one run: ROOT is another checkout (e.g. ``git archive 2d67564 | tar -x -C
/tmp/before``); each round runs the same child once in ROOT and once in this tree, in
alternating order, and reports 2^17 states on 2 threads (wall M perm/s), 2^15 states on
one thread (M perm/CPU-s) and Merkle commits 2^16 x 16 and 2^20 x 16.
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


_WIDTH_CHILD = r"""
import json, time, numpy as np, numba
from steadfast.kernels.field import P
from steadfast.kernels.poseidon2 import poseidon2_permute
from steadfast.kernels.merkle import commit
rng = np.random.default_rng(0)
big = rng.integers(0, P, (1 << 17, 16), dtype=np.uint32)
small = big[: 1 << 15]
rows = rng.integers(0, P, (1 << 16, 16), dtype=np.uint32)
poseidon2_permute(big); commit(rows)
wall = min(_t(lambda: poseidon2_permute(big)) for _ in range(3))
cm = min(_t(lambda: commit(rows)) for _ in range(3))
numba.set_num_threads(1)
def cpu():
    t = time.process_time(); poseidon2_permute(small); return time.process_time() - t
c1 = min(cpu() for _ in range(3))
print(json.dumps({"wall_perm_s": big.shape[0] / wall, "cpu1_perm_s": small.shape[0] / c1,
                  "commit16_s": cm}))
"""


_AB_CHILD = r"""
import json, time, numpy as np, numba
from steadfast.kernels.field import P
from steadfast.kernels.poseidon2 import poseidon2_permute
from steadfast.kernels.merkle import commit
def _t(f):
    t = time.perf_counter(); f(); return time.perf_counter() - t
rng = np.random.default_rng(0)
big = rng.integers(0, P, (1 << 17, 16), dtype=np.uint32)
small = big[: 1 << 15]
r16 = rng.integers(0, P, (1 << 16, 16), dtype=np.uint32)
r20 = rng.integers(0, P, (1 << 20, 16), dtype=np.uint32)
numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
poseidon2_permute(big); commit(r16)
wall = min(_t(lambda: poseidon2_permute(big)) for _ in range(5))
c16 = min(_t(lambda: commit(r16)) for _ in range(3))
c20 = min(_t(lambda: commit(r20)) for _ in range(2))
numba.set_num_threads(1)
def cpu():
    t = time.process_time(); poseidon2_permute(small); return time.process_time() - t
c1 = min(cpu() for _ in range(5))
print(json.dumps({"wall_perm_s": big.shape[0] / wall, "cpu1_perm_s": small.shape[0] / c1,
                  "commit16_s": c16, "commit20_s": c20}))
"""


def compare_trees(root: str, rounds: int = 2) -> list:
    """[(label, result dict)]: _AB_CHILD in ``root`` ("before") and in this checkout
    ("after"), alternating which goes first, ``rounds`` times."""
    import json
    import os
    import subprocess
    import sys
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = []
    for k in range(rounds):
        order = [("before", root), ("after", here)]
        for label, tree in (order if k % 2 == 0 else order[::-1]):
            env = dict(os.environ, PYTHONPATH=tree)
            r = subprocess.run([sys.executable, "-c", _AB_CHILD], env=env, cwd=tree,
                               capture_output=True, text=True, check=True)
            out.append((label, json.loads(r.stdout.strip().splitlines()[-1])))
    return out


def compare_kernels(rounds: int = 2, avx2: bool = False) -> list:
    """[(kernel, result dict)]: _AB_CHILD in this checkout with
    STEADFAST_POSEIDON2_KERNEL=int64 ("before", the lane-major int64 kernel) and =lanes
    (kernels/poseidon2_lanes.py), alternating which goes first, ``rounds`` times.
    ``avx2``: both with the host's AVX-512 features masked off (NUMBA_CPU_FEATURES)."""
    import json
    import os
    import subprocess
    import sys
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # this process imported steadfast, which set NUMBA_CPU_FEATURES: not for the children
    env0 = {k: v for k, v in os.environ.items() if k != "NUMBA_CPU_FEATURES"}
    env0["PYTHONPATH"] = here
    if avx2:
        sys.path.insert(0, os.path.join(here, "bench"))
        from zorch_compare import avx2_features
        env0["NUMBA_CPU_FEATURES"] = avx2_features()
    out = []
    for k in range(rounds):
        order = ["int64", "lanes"] if k % 2 == 0 else ["lanes", "int64"]
        for kernel in order:
            env = dict(env0, STEADFAST_POSEIDON2_KERNEL=kernel)
            r = subprocess.run([sys.executable, "-c", _AB_CHILD], env=env, cwd=here,
                               capture_output=True, text=True, check=True)
            out.append((kernel, json.loads(r.stdout.strip().splitlines()[-1])))
    return out


def compare_widths(rounds: int = 3) -> list:
    """[(width, result dict)] for each round and width (see the module docstring)."""
    import json
    import os
    import subprocess
    import sys
    prelude = ("import time\n"
               "def _t(f):\n    t = time.perf_counter(); f(); return time.perf_counter() - t\n")
    out = []
    for _ in range(rounds):
        for width in ("256", "auto"):
            env = {k: v for k, v in os.environ.items() if k != "NUMBA_CPU_FEATURES"}
            env["STEADFAST_VECTOR_WIDTH"] = width
            r = subprocess.run([sys.executable, "-c", prelude + _WIDTH_CHILD], env=env,
                               capture_output=True, text=True, check=True)
            out.append((width, json.loads(r.stdout.strip().splitlines()[-1])))
    return out


def _flags() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    f = line.split(":", 1)[1].split()
                    return " ".join(x for x in f if x.startswith(("avx", "fma", "bmi", "sse4")))
    except OSError:
        pass
    return "?"


def main() -> None:
    import sys
    if "--ab" in sys.argv or "--kernels" in sys.argv:
        import os
        rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 2
        print(f"cpu flags (vector subset): {_flags()}")
        print(f"load average before: {os.getloadavg()}")
        if "--kernels" in sys.argv:
            res = compare_kernels(rounds, avx2="--avx2" in sys.argv)
        else:
            res = compare_trees(sys.argv[sys.argv.index("--ab") + 1], rounds)
        for label, d in res:
            print(f"{label:6s}: 2^17 2 threads {d['wall_perm_s'] / 1e6:.2f} M perm/s, "
                  f"2^15 1 thread {d['cpu1_perm_s'] / 1e6:.2f} M perm/CPU-s, "
                  f"commit 2^16x16 {d['commit16_s'] * 1e3:.1f} ms, "
                  f"2^20x16 {d['commit20_s'] * 1e3:.0f} ms")
        print(f"load average after: {os.getloadavg()}")
        return
    if "--widths" in sys.argv:
        import os
        rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 3
        print(f"cpu flags (vector subset): {_flags()}")
        print(f"load average before: {os.getloadavg()[0]:.1f}")
        res = compare_widths(rounds)
        for i in range(0, len(res), 2):
            (_, a), (_, b) = res[i], res[i + 1]
            print(f"round {i // 2}: 256-bit {a['wall_perm_s'] / 1e6:.2f} M perm/s wall, "
                  f"{a['cpu1_perm_s'] / 1e6:.2f} M perm/CPU-s, commit 2^16x16 {a['commit16_s'] * 1e3:.0f} ms"
                  f" | default {b['wall_perm_s'] / 1e6:.2f} M perm/s wall, "
                  f"{b['cpu1_perm_s'] / 1e6:.2f} M perm/CPU-s, commit {b['commit16_s'] * 1e3:.0f} ms"
                  f" | ratio wall {b['wall_perm_s'] / a['wall_perm_s']:.2f}x, cpu "
                  f"{b['cpu1_perm_s'] / a['cpu1_perm_s']:.2f}x, commit "
                  f"{a['commit16_s'] / b['commit16_s']:.2f}x")
        print(f"load average after: {os.getloadavg()[0]:.1f}")
        return
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
