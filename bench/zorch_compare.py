"""Host primitives side by side with openvm-zorch, in one run (issue #12 item 3 / target 2).

    PYTHONPATH=. .venv/bin/python bench/zorch_compare.py --zorch-python /tmp/zvenv/bin/python
        [--rounds 2] [--quick] [--json out.json] [--only poseidon2 --one-cpu]

openvm-zorch (PyPI ``openvm-zorch``, with ``pyzorch`` and its XLA-based ``frx`` runtime) is
NOT a dependency of this project: install it into a throwaway virtual environment and pass
that interpreter, e.g.

    python -m venv /tmp/zvenv && /tmp/zvenv/bin/pip install openvm-zorch

Each round runs one fresh subprocess per implementation, alternating (steadfast first in
even rounds, zorch first in odd ones), each timing the same primitives on the same shapes
(random canonical BabyBear inputs; first call apart, then the best of several calls):

* NTT 1x2^20 and 16x2^20 (forward, natural order; zorch: ``frx.lax.ntt``),
* LDE 16 columns 2^20 -> 2^21 on a coset (steadfast: ``coset_lde`` of the row-major trace
  uint32[2^20, 16]; zorch: ``ReedSolomon(2^20, 2, coset_shift=31).extend`` of [16, 2^20],
  its natural column-per-row layout),
* Poseidon2-16 permutations of 2^17 states (zorch: ``frx.jit(frx.vmap(permute))`` over
  OpenVM's BabyBear instance; steadfast: ``poseidon2_permute``),
* Merkle commit of a 2^16 x 16 and a 2^20 x 16 matrix (8-element sponge leaves, 2-to-1
  compression; zorch: ``MerkleTree(*babybear16_hasher()).commit`` under ``frx.jit``).

The two Poseidon2 instances differ in round constants (SPEC §2 derives this project's from
the Grain LFSR; OpenVM uses Plonky3's HorizenLabs table) but have the same shape (width 16,
8 full + 13 partial rounds, x^7, the same internal diagonal), so the work per permutation
is the same; outputs are not compared.  zorch compiles per shape: its first call includes
XLA compilation (minutes for a Merkle tree), reported apart and never in the ratio.
Ratio = zorch steady time / steadfast steady time (> 1: steadfast is faster).
``--one-cpu`` pins both children to one CPU (and numba to one thread) and also reports
the process CPU time of the steady call: a per-core comparison, less disturbed by other
jobs on a shared machine than wall time (``--only poseidon2 --one-cpu --rounds 4``).
``--isa avx2`` is the masked-feature run of an AVX-512 machine, standing in for an
AVX2-only one: the steadfast child gets ``NUMBA_CPU_FEATURES`` = the host's features with
every AVX-512 (and AMX/AVX10) feature off, the zorch child ``XLA_FLAGS=--xla_cpu_max_isa=AVX2``.
``--steadfast-width 256`` sets ``STEADFAST_VECTOR_WIDTH=256`` for the steadfast child
(256-bit code generation, AVX-512 instructions still allowed: 8 states a ``ymm``).
The report names the machine's CPU model, core count, vector flags and load average.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (name, kind, args) -- shared by both children; quick sizes are 1/16
def _cases(quick: bool):
    s = 4 if quick else 0
    return [
        (f"ntt 1x2^{20 - s}", "ntt", (1, 20 - s)),
        (f"ntt 16x2^{20 - s}", "ntt", (16, 20 - s)),
        (f"lde 16x2^{20 - s}->2^{21 - s}", "lde", (16, 20 - s)),
        (f"poseidon2 batch 2^{17 - s}", "perm", (17 - s,)),
        (f"merkle 2^{16 - s}x16", "merkle", (16 - s, 16)),
        (f"merkle 2^{20 - s}x16", "merkle", (20 - s, 16)),
    ]


_COMMON = r"""
import json, sys, time
import numpy as np
P = 2013265921
CASES = json.loads(sys.argv[1])
REPEATS = int(sys.argv[2])
rng = np.random.default_rng(0)
def rand(shape):
    return rng.integers(0, P, shape, dtype=np.uint32)
def timed(fn, sync):
    t = time.perf_counter(); sync(fn()); first = time.perf_counter() - t
    best = cpu = float("inf")
    for _ in range(REPEATS):
        t = time.perf_counter(); c = time.process_time(); sync(fn())
        cpu = min(cpu, time.process_time() - c); best = min(best, time.perf_counter() - t)
    return {"first_call_s": first, "steady_s": best, "cpu_s": cpu}
out = {}
"""

_STEADFAST_CHILD = _COMMON + r"""
from steadfast.kernels.ntt_host import coset_lde, ntt
from steadfast.kernels.poseidon2 import poseidon2_permute
from steadfast.kernels.merkle import commit
sync = lambda r: r
for name, kind, a in CASES:
    if kind == "ntt":
        x = rand((a[0], 1 << a[1])); out[name] = timed(lambda: ntt(x), sync)
    elif kind == "lde":
        x = rand((1 << a[1], a[0])); out[name] = timed(lambda: coset_lde(x, 1), sync)
    elif kind == "perm":
        x = rand((1 << a[0], 16)); out[name] = timed(lambda: poseidon2_permute(x), sync)
    elif kind == "merkle":
        x = rand((1 << a[0], a[1])); out[name] = timed(lambda: commit(x).root, sync)
print("RESULT " + json.dumps(out))
"""

_ZORCH_CHILD = _COMMON + r"""
import frx, frx.numpy as fnp
from frx import lax
from zk_dtypes import babybear_mont as F
from openvm_zorch.poseidon2.babybear16 import babybear16_params, babybear16_hasher
from zorch.hash.poseidon2.poseidon2 import Poseidon2
from zorch.commit.merkle import MerkleTree
from zorch.coding.reed_solomon import ReedSolomon
sync = frx.block_until_ready
perm = frx.jit(frx.vmap(Poseidon2(babybear16_params()).permute))
tree = MerkleTree(*babybear16_hasher())
commit = frx.jit(lambda m: tree.commit(m)[0])
ntt = frx.jit(lambda a: lax.ntt(a, ntt_type="NTT", ntt_length=a.shape[-1]))
for name, kind, a in CASES:
    if kind == "ntt":
        x = fnp.asarray(rand((a[0], 1 << a[1])), dtype=F)
        out[name] = timed(lambda: ntt(x), sync)
    elif kind == "lde":
        rs = ReedSolomon(1 << a[1], 2, F, coset_shift=fnp.asarray(31, dtype=F))
        ext = frx.jit(rs.extend)
        x = fnp.asarray(rand((a[0], 1 << a[1])), dtype=F)
        out[name] = timed(lambda: ext(x), sync)
    elif kind == "perm":
        x = fnp.asarray(rand((1 << a[0], 16)), dtype=F)
        out[name] = timed(lambda: perm(x), sync)
    elif kind == "merkle":
        x = fnp.asarray(rand((1 << a[0], a[1])), dtype=F)
        out[name] = timed(lambda: commit(x), sync)
    print(name, out[name], file=sys.stderr, flush=True)
print("RESULT " + json.dumps(out))
"""


def _pin_first_cpu() -> None:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def _run_child(python: str, code: str, cases, repeats: int, env=None, pin=False) -> dict:
    t0 = time.perf_counter()
    p = subprocess.run([python, "-c", code, json.dumps(cases), str(repeats)], cwd=ROOT,
                       capture_output=True, text=True, env=env,
                       preexec_fn=_pin_first_cpu if pin else None)
    if p.returncode != 0:
        raise RuntimeError(f"{python} child failed (rc {p.returncode}):\n{p.stderr[-4000:]}")
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            res = json.loads(line[7:])
            res["_wall_s"] = time.perf_counter() - t0
            return res
    raise RuntimeError(f"{python} child printed no result:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")


def avx2_features() -> str:
    """This host's numba feature string with every AVX-512 / AMX / AVX10 feature off."""
    import llvmlite.binding as ll
    off = ("avx512", "avx10", "amx", "evex512")
    return ",".join(("+" if on and not name.startswith(off) else "-") + name
                    for name, on in sorted(ll.get_host_cpu_features().items()))


def machine() -> dict:
    info = {"platform": platform.platform(), "cpu_count": os.cpu_count(), "model": None,
            "flags": [], "loadavg": None}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and info["model"] is None:
                    info["model"] = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    fl = line.split(":", 1)[1].split()
                    info["flags"] = [x for x in fl if x.startswith(("avx", "sse4", "fma", "bmi"))]
                    break
        info["loadavg"] = os.getloadavg()
    except OSError:
        pass
    return info


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--zorch-python", default=os.environ.get("ZORCH_PYTHON"),
                    help="interpreter of a venv with openvm-zorch installed (or $ZORCH_PYTHON)")
    ap.add_argument("--rounds", type=int, default=1, help="alternating rounds (default 1)")
    ap.add_argument("--repeats", type=int, default=3, help="timed calls after the first (default 3)")
    ap.add_argument("--quick", action="store_true", help="1/16 of the sizes (smoke test)")
    ap.add_argument("--only", nargs="*", help="run only the cases whose name starts with these")
    ap.add_argument("--json", help="write the report to this file")
    ap.add_argument("--one-cpu", action="store_true",
                    help="pin both children to one CPU (NUMBA_NUM_THREADS=1) and add the "
                         "process CPU time of the steady call: a per-core comparison that "
                         "a loaded machine disturbs less than wall time")
    ap.add_argument("--isa", choices=("native", "avx2"), default="native",
                    help="avx2: mask AVX-512 off in both children (numba features, XLA's "
                         "--xla_cpu_max_isa=AVX2), an AVX2-only machine's code generation")
    ap.add_argument("--steadfast-width", choices=("auto", "256", "512"), default=None,
                    help="STEADFAST_VECTOR_WIDTH for the steadfast child")
    args = ap.parse_args(argv)
    if not args.zorch_python:
        ap.error("--zorch-python (or $ZORCH_PYTHON) is required: a venv with openvm-zorch")
    cases = _cases(args.quick)
    if args.only:
        cases = [c for c in cases if any(c[0].startswith(o) for o in args.only)]
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    if args.one_cpu:
        env["NUMBA_NUM_THREADS"] = "1"
    senv, zenv = dict(env), dict(env)
    if args.steadfast_width:
        senv["STEADFAST_VECTOR_WIDTH"] = args.steadfast_width
    if args.isa == "avx2":
        senv["NUMBA_CPU_FEATURES"] = avx2_features()
        zenv["XLA_FLAGS"] = (zenv.get("XLA_FLAGS", "") + " --xla_cpu_max_isa=AVX2").strip()
    report = {"machine": machine(), "rounds": [], "isa": args.isa,
              "steadfast_width": args.steadfast_width}
    m = report["machine"]
    print(f"machine: {m['model']}, {m['cpu_count']} cores, load {m['loadavg']}")
    print("vector flags: " + " ".join(m["flags"]))
    print(f"code generation: isa {args.isa}, steadfast width "
          f"{args.steadfast_width or os.environ.get('STEADFAST_VECTOR_WIDTH', 'auto')}")
    for r in range(args.rounds):
        order = [("steadfast", sys.executable, _STEADFAST_CHILD, senv),
                 ("zorch", args.zorch_python, _ZORCH_CHILD, zenv)]
        if r % 2:
            order.reverse()
        res = {name: _run_child(py, code, cases, args.repeats, cenv, args.one_cpu)
               for name, py, code, cenv in order}
        report["rounds"].append(res)
        print(f"\nround {r} (load {os.getloadavg()[0]:.1f}); ratio = zorch / steadfast steady time")
        print(f"{'primitive':26} {'steadfast':>11} {'zorch':>11} {'ratio':>7} {'zorch 1st call':>15}")
        for name, _, _ in cases:
            s, z = res["steadfast"][name], res["zorch"][name]
            print(f"{name:26} {s['steady_s'] * 1e3:9.1f}ms {z['steady_s'] * 1e3:9.1f}ms "
                  f"{z['steady_s'] / s['steady_s']:6.2f}x {z['first_call_s']:13.1f}s")
            if args.one_cpu:
                print(f"{'  (CPU time, one CPU)':26} {s['cpu_s'] * 1e3:9.1f}ms "
                      f"{z['cpu_s'] * 1e3:9.1f}ms {z['cpu_s'] / s['cpu_s']:6.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
