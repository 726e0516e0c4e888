"""Host primitives side by side with openvm-zorch, in one run (issue #12 item 3 / target 2).

    PYTHONPATH=. .venv/bin/python bench/zorch_compare.py --zorch-python /tmp/zvenv/bin/python
        [--rounds 2] [--quick] [--json out.json] [--only poseidon2 --one-cpu]
    PYTHONPATH=. .venv/bin/python bench/zorch_compare.py --zorch-python /tmp/zvenv/bin/python
        --synthetic WIDTH,LOG_ROWS[,LOG_BLOWUP] [--rounds 2] [--queries 50] [--pow-bits 16]
        [--no-zorch] [--json out.json]

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

``--synthetic WIDTH,LOG_ROWS[,LOG_BLOWUP]`` (LOG_BLOWUP default ProverConfig's) replaces
the fixed shapes by those of bench/block_bench.py's synthetic AIR of WIDTH columns,
2^LOG_ROWS rows and constraint degree 2 (one table, no LogUp): for each matrix its proof
commits -- the main trace (WIDTH columns) and the quotient parts (4 per part) -- the LDE
of its columns 2^LOG_ROWS -> 2^(LOG_ROWS+LOG_BLOWUP) on the coset (steadfast:
``lde_columns`` of [c, 2^LOG_ROWS], as the prover and block_bench's roofline call it;
zorch: ``ReedSolomon(2^LOG_ROWS, 2^LOG_BLOWUP, coset_shift=31).extend``) and the Merkle
commit of the 2^(LOG_ROWS+LOG_BLOWUP) x c LDE matrix, in the same alternating children.
On our side only, each round also proves that AIR (``block_bench.run_synthetic``: a fresh
subprocess, ``Prover.prove_airs`` on the host, verified; ``--queries``/``--pow-bits``
default block_bench's), right after the steadfast primitives child.  The round then
reports our whole proof, our LDE + commit of the same cells (the children's steady sum,
and the proof child's own roofline), zorch's LDE + commit, and the ratios: zorch / ours
per primitive and summed, proof / our LDE + commit (the roofline ratio) and proof /
zorch's LDE + commit.  ``--no-zorch`` (or a zorch child that fails: exit status 1)
reports our side alone.
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


def synthetic_cases(width: int, log_rows: int, log_blowup: int) -> list:
    """The primitives of the degree-2 synthetic AIR's committed matrices: (name, kind,
    args) for the LDE and the Merkle commit of each (main: ``width`` columns; quotient
    parts: 4 a part; LogUp aux: 4 an EF column, none here)."""
    sys.path.insert(0, ROOT)
    from bench.prove_bench import synthetic_air
    air = synthetic_air(0, width, 2)
    out = []
    for role, c in (("main", air.main_width), ("aux", 4 * air.aux_width),
                    ("parts", 4 * air.num_parts)):
        if c:
            out += [(f"lde {c}x2^{log_rows}->2^{log_rows + log_blowup} {role}", "lde_cols",
                     (c, log_rows, log_blowup)),
                    (f"merkle 2^{log_rows + log_blowup}x{c} {role}", "merkle",
                     (log_rows + log_blowup, c))]
    return out


def parse_synthetic(text: str) -> tuple[int, int, int | None]:
    """``WIDTH,LOG_ROWS[,LOG_BLOWUP]`` -> (width, log_rows, log_blowup or None)."""
    try:
        v = [int(x) for x in text.split(",")]
    except ValueError:
        v = []
    if len(v) not in (2, 3) or min(v) < 1:
        raise argparse.ArgumentTypeError(
            f"--synthetic takes WIDTH,LOG_ROWS[,LOG_BLOWUP] (positive integers), not {text!r}")
    return v[0], v[1], v[2] if len(v) == 3 else None


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
    elif kind == "lde_cols":
        from steadfast.kernels.ntt_host import lde_columns
        from steadfast.verifier.protocol import SHIFT
        x = rand((a[0], 1 << a[1])); out[name] = timed(lambda: lde_columns(x, a[2], SHIFT), sync)
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
    elif kind == "lde_cols":
        rs = ReedSolomon(1 << a[1], 1 << a[2], F, coset_shift=fnp.asarray(31, dtype=F))
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
    ap.add_argument("--synthetic", type=parse_synthetic, metavar="WIDTH,LOG_ROWS[,LOG_BLOWUP]",
                    help="the primitives at a degree-2 synthetic AIR's committed shapes, and "
                         "our whole proof of it (instead of the fixed shapes)")
    ap.add_argument("--queries", type=int, default=50, help="with --synthetic (default 50)")
    ap.add_argument("--pow-bits", type=int, default=16, help="with --synthetic (default 16)")
    ap.add_argument("--no-zorch", action="store_true",
                    help="skip the zorch child: our side alone")
    args = ap.parse_args(argv)
    if not args.zorch_python and not args.no_zorch:
        ap.error("--zorch-python (or $ZORCH_PYTHON) is required: a venv with openvm-zorch")
    if args.synthetic is not None:
        return main_synthetic(args)
    cases = _cases(args.quick)
    if args.only:
        cases = [c for c in cases if any(c[0].startswith(o) for o in args.only)]
    senv, zenv = _child_envs(args)
    report = {"machine": machine(), "rounds": [], "isa": args.isa,
              "steadfast_width": args.steadfast_width}
    m = report["machine"]
    print(f"machine: {m['model']}, {m['cpu_count']} cores, load {m['loadavg']}")
    print("vector flags: " + " ".join(m["flags"]))
    print(f"code generation: isa {args.isa}, steadfast width "
          f"{args.steadfast_width or os.environ.get('STEADFAST_VECTOR_WIDTH', 'auto')}")
    for r in range(args.rounds):
        order = [("steadfast", sys.executable, _STEADFAST_CHILD, senv)] + \
            ([] if args.no_zorch else [("zorch", args.zorch_python, _ZORCH_CHILD, zenv)])
        if r % 2:
            order.reverse()
        res = {name: _run_child(py, code, cases, args.repeats, cenv, args.one_cpu)
               for name, py, code, cenv in order}
        report["rounds"].append(res)
        print(f"\nround {r} (load {os.getloadavg()[0]:.1f}); ratio = zorch / steadfast steady time")
        if args.no_zorch:
            for name, _, _ in cases:
                print(f"{name:26} {res['steadfast'][name]['steady_s'] * 1e3:9.1f}ms")
            continue
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


def _child_envs(args) -> tuple[dict, dict]:
    """(steadfast child's env, zorch child's env) for ``args``."""
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
    return senv, zenv


def _ms(x) -> str:
    return "–".rjust(11) if x is None else f"{x * 1e3:9.1f}ms"


def _ratio(a, b) -> str:
    return "–".rjust(7) if a is None or b is None else f"{a / b:6.2f}x"


def main_synthetic(args) -> int:
    """--synthetic: the primitives at the synthetic AIR's shapes, both sides, alternating,
    and our whole proof of it each round."""
    sys.path.insert(0, ROOT)
    from bench.block_bench import run_synthetic
    width, log_rows, log_blowup = args.synthetic
    if log_blowup is None:
        from steadfast.prover.api import ProverConfig
        log_blowup = ProverConfig().log_blowup
    cases = synthetic_cases(width, log_rows, log_blowup)
    if args.only:
        cases = [c for c in cases if any(c[0].startswith(o) for o in args.only)]
    senv, zenv = _child_envs(args)
    spec = (width, log_rows, 2, 1)
    report = {"machine": machine(), "rounds": [], "isa": args.isa,
              "steadfast_width": args.steadfast_width,
              "synthetic": {"width": width, "log_rows": log_rows, "degree": 2, "tables": 1,
                            "log_blowup": log_blowup, "queries": args.queries,
                            "pow_bits": args.pow_bits, "cases": cases},
              "zorch_error": None}
    m = report["machine"]
    print(f"machine: {m['model']}, {m['cpu_count']} cores, load {m['loadavg']}")
    print("vector flags: " + " ".join(m["flags"]))
    print(f"code generation: isa {args.isa}, steadfast width "
          f"{args.steadfast_width or os.environ.get('STEADFAST_VECTOR_WIDTH', 'auto')}")
    print(f"synthetic AIR: {width} columns x 2^{log_rows} rows, degree 2, 1 table, "
          f"log_blowup {log_blowup}, queries {args.queries}, pow_bits {args.pow_bits}")
    zorch_ok = not args.no_zorch
    for r in range(args.rounds):
        order = ["steadfast"] + (["zorch"] if zorch_ok else [])
        if r % 2:
            order.reverse()
        res = {}
        for name in order:
            if name == "zorch":
                try:
                    res["zorch"] = _run_child(args.zorch_python, _ZORCH_CHILD, cases,
                                              args.repeats, zenv, args.one_cpu)
                except (RuntimeError, OSError) as exc:
                    report["zorch_error"] = f"{type(exc).__name__}: {exc}"
                    print(f"zorch: unavailable ({report['zorch_error'][:2000]}); "
                          f"our side alone", file=sys.stderr)
                    zorch_ok = False
                continue
            res["steadfast"] = _run_child(sys.executable, _STEADFAST_CHILD, cases,
                                          args.repeats, senv, args.one_cpu)
            res["proof"] = run_synthetic(spec, args.queries, args.pow_bits, log_blowup,
                                         emu=False, env=senv,
                                         preexec_fn=_pin_first_cpu if args.one_cpu else None)
        report["rounds"].append(res)
        z = res.get("zorch")
        print(f"\nround {r} (load {os.getloadavg()[0]:.1f}); ratio = zorch / steadfast steady time")
        print(f"{'primitive':26} {'steadfast':>11} {'zorch':>11} {'ratio':>7} {'zorch 1st call':>15}")
        ours = theirs = 0.0
        for name, _, _ in cases:
            s = res["steadfast"][name]["steady_s"]
            t = z[name]["steady_s"] if z else None
            ours += s
            theirs = theirs + t if z else None
            first = f"{z[name]['first_call_s']:13.1f}s" if z else "–".rjust(14)
            print(f"{name:26} {_ms(s)} {_ms(t)} {_ratio(t, s)} {first}")
            if args.one_cpu:
                sc = res["steadfast"][name]["cpu_s"]
                zc = z[name]["cpu_s"] if z else None
                print(f"{'  (CPU time, one CPU)':26} {_ms(sc)} {_ms(zc)} {_ratio(zc, sc)}")
        label = "sum of the rows above" if args.only else "LDE + commit (sum)"
        print(f"{label:26} {_ms(ours)} {_ms(theirs)} {_ratio(theirs, ours)}")
        p = res["proof"]
        c = p["cells"]
        rf = c.get("roofline", {}).get("seconds")
        print(f"whole proof (ours): {c['prove_s']:.3f} s ({c['prove_cpu_s']:.2f} CPU s), "
              f"{c['cells'] / 1e6:.2f} M cells, {c['cells_per_s_per_core'] / 1e6:.3f} M "
              f"cells/s/core, proof {p['proof_file_bytes'] / 1024:,.0f} KiB "
              f"{p['proof_sha256'][:16]}, verified")
        what = "the rows above" if args.only else "LDE + commit"
        print(f"  proof / our {what}: {c['prove_s'] / ours:.2f} (children's steady "
              f"sum {ours:.3f} s); proof child's roofline {rf:.3f} s -> ratio "
              f"{c['roofline_ratio']:.2f}")
        print(f"  proof / zorch {what}: "
              + (f"{c['prove_s'] / theirs:.2f} (zorch sum {theirs:.3f} s)" if z else "–"))
        res["summary"] = {"ours_lde_commit_s": ours, "zorch_lde_commit_s": theirs,
                          "proof_s": c["prove_s"], "roofline_s": rf,
                          "proof_over_ours": c["prove_s"] / ours,
                          "roofline_ratio": c["roofline_ratio"],
                          "zorch_over_ours": theirs / ours if z else None,
                          "proof_over_zorch": c["prove_s"] / theirs if z else None}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 1 if report["zorch_error"] else 0


if __name__ == "__main__":
    sys.exit(main())
