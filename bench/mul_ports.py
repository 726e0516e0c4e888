"""How many vector multiplies a cycle this core issues, of each kind and mixed, and how many
the Poseidon2 lanes kernel needs: the bound behind issue #38's "batched Poseidon2 >= 2x
openvm-zorch per core" (docs/benchmarks.md, "The multiply ports").

    PYTHONPATH=. .venv/bin/python bench/mul_ports.py [--json out.json]

Three parts, one process, one thread:

1. The clocks: a dependent chain of scalar adds and xors (one a cycle on every x86 core
   since the P6), timed -> GHz under this load; and the same chain in 512-bit vectors,
   the clock the vector figures below count in (an Intel Xeon lowers its clock while
   512-bit code runs; AMD's Zen 4 does not).
2. Throughput of 512-bit operations (``zmm``): a loop of 8 independent chains, each doing
   the named operations in order every iteration (chains hide the latencies); cycles per
   chain-iteration at the clock above.  Kinds: ``mulq`` (``vpmuludq``: 8 32x32->64
   products), ``mulld`` (``vpmulld``: 16 low 32-bit products), ``ifma``
   (``vpmadd52luq``: 8 52-bit multiply-adds, the IFMA lead of earlier notes), ``fma``
   (``vfmadd``: 8 double FMAs), ``add``/``xor``/``min`` (32-bit lane integer ALU) and
   ``shuf`` (a two-source 32-bit shuffle); and on the scalar side ``imul`` (a 64-bit
   ``imul``) and ``sadd`` (a 64-bit ``add``), which run on the integer core's own
   multiplier and ALUs -- the last lead, a scalar permutation beside the vector ones.
   A pair that takes the sum of its parts shares an execution port; one that takes the
   larger of the two issues side by side.  (``mulq + mulq`` is not two ``vpmuludq``:
   LLVM folds the pair into a ``vpmullq`` and a ``vpmuludq``.)
   The host must have AVX-512 F and IFMA (else the report says so and stops).
3. The Poseidon2-16 lanes kernel (kernels/poseidon2_lanes.py) as numba compiles it (a
   child process with an empty NUMBA_CACHE_DIR, ``inspect_asm``): the full-round and the
   partial-round loop bodies, every instruction counted by class, times 8 and 13 -- the
   dynamic count for a group of W = 16 states; and its measured speed
   (``poseidon2_permute`` of 2^17 states, best process CPU time of 7) in cycles per group.
   Instructions per cycle, and the share of the time the multiplies alone need at one a
   cycle.  The process runs pinned to one CPU (its last allowed one), numba on one thread.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

_C16 = ", ".join(f"i32 {3 + 2 * (i % 8)}" for i in range(16))
_C8 = ", ".join(f"i64 {3 + 2 * i}" for i in range(8))
_D8 = ", ".join(["double 1.0000001"] + ["double 1.0"] * 7)

_FEATURES = "+avx512f,+avx512ifma,+avx512vl,+avx512dq,+avx512bw"


def _tm():
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm, llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=_FEATURES, opt=2)


_KEEP: list = []                              # engines outlive the ctypes functions


def _jit(text: str, name: str, argtypes, restype=ctypes.c_int64):
    llvm, tm = _tm()
    m = llvm.parse_assembly(text)
    m.verify()
    ee = llvm.create_mcjit_compiler(m, tm)
    ee.finalize_object()
    _KEEP.append(ee)
    return ctypes.CFUNCTYPE(restype, *argtypes)(ee.get_function_address(name))


def _chain_ghz(ty: str, operands: tuple, n: int) -> float:
    """GHz read off a loop-carried chain of four one-cycle operations (xor, add, xor, add)
    of type ``ty`` with these second operands: 4 n cycles at this clock."""
    body = "\n".join(f"  %x{k + 1} = {op} {ty} %x{k}, {v}"
                     for k, (op, v) in enumerate(zip(("xor", "add", "xor", "add"), operands)))
    ret = ("  ret i64 %x4" if ty == "i64" else
           f"  %e = bitcast {ty} %x4 to <8 x i64>\n  %e0 = extractelement <8 x i64> %e, i32 0\n"
           "  ret i64 %e0")
    text = f"""
define i64 @f(i64 %n) #0 {{
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %loop]
  %x0 = phi {ty} [{"1" if ty == "i64" else "zeroinitializer"}, %entry], [%x4, %loop]
{body}
  %i1 = add i64 %i, 1
  %c = icmp ult i64 %i1, %n
  br i1 %c, label %loop, label %exit
exit:
{ret}
}}
attributes #0 = {{ "target-features"="{_FEATURES},-prefer-256-bit" "prefer-vector-width"="512" "min-legal-vector-width"="512" }}
"""
    f = _jit(text, "f", [ctypes.c_int64])
    best = min(_timed(lambda: f(n)) for _ in range(3))
    return 4 * n / best / 1e9


def clock_ghz(n: int = 100_000_000) -> float:
    """The scalar clock: a dependent chain of 64-bit xors and adds."""
    return _chain_ghz("i64", ("%i", "7", "12345", "%i"), n)


def vector_clock_ghz(n: int = 50_000_000) -> float:
    """The clock 512-bit code runs at: the same chain on ``zmm`` registers (one cycle an
    operation on Zen 4 and on Intel's cores).  It reads as the scalar clock on AMD; an
    Intel Xeon lowers its clock while 512-bit instructions run (2.49 against 3.09 GHz on
    the Emerald Rapids of the twenty-ninth session), and the vector figures below are
    cycles of this clock."""
    splat = lambda k: "<" + ", ".join([f"i32 {k}"] * 16) + ">"
    return _chain_ghz("<16 x i32>", tuple(splat(k) for k in (3, 5, 7, 9)), n)


def cpu_flags() -> str:
    """The flags line of /proc/cpuinfo ("" where there is none)."""
    try:
        with open("/proc/cpuinfo") as fh:
            return next((line for line in fh if line.startswith("flags")), "")
    except OSError:
        return ""


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


_KINDS = {  # kind -> (phi type, initial value, body template: {x} input, {y} output)
    "mulq": ("<8 x i64>", f"<{_C8}>",
             "  {y}.a = bitcast <8 x i64> {x} to <16 x i32>\n"
             "  {y} = call <8 x i64> @llvm.x86.avx512.pmulu.dq.512(<16 x i32> {y}.a, "
             "<16 x i32> {y}.a)"),
    "ifma": ("<8 x i64>", f"<{_C8}>",
             "  {y} = call <8 x i64> @llvm.x86.avx512.vpmadd52l.uq.512(<8 x i64> {x}, "
             f"<8 x i64> {{x}}, <8 x i64> <{_C8}>)"),
    "fma": ("<8 x double>", f"<{_D8}>",
            f"  {{y}} = call <8 x double> @llvm.fma.v8f64(<8 x double> {{x}}, <8 x double> <{_D8}>, "
            "<8 x double> <double 0.5, double 1.0, double 1.0, double 1.0, double 1.0, "
            "double 1.0, double 1.0, double 1.0>)"),
    "mulld": ("<16 x i32>", f"<{_C16}>", f"  {{y}} = mul <16 x i32> {{x}}, <{_C16}>"),
    "add": ("<16 x i32>", f"<{_C16}>", f"  {{y}} = add <16 x i32> {{x}}, <{_C16}>"),
    "xor": ("<16 x i32>", f"<{_C16}>", f"  {{y}} = xor <16 x i32> {{x}}, <{_C16}>"),
    "min": ("<16 x i32>", f"<{_C16}>",
            f"  {{y}}.c = icmp ult <16 x i32> {{x}}, <{_C16}>\n"
            f"  {{y}} = select <16 x i1> {{y}}.c, <16 x i32> {{x}}, <16 x i32> <{_C16}>"),
    "imul": ("i64", "12345", "  {y} = mul i64 {x}, 2654435761"),
    "sadd": ("i64", "12345", "  {y} = add i64 {x}, 77"),
    "shuf": ("<16 x i32>", f"<{_C16}>",
             "  {y} = shufflevector <16 x i32> {x}, <16 x i32> {x0}, <16 x i32> <"
             + ", ".join(f"i32 {i + 1 if i % 2 == 0 else 16 + i}" for i in range(16)) + ">"),
}
_FAMILY = {"mulq": "q", "ifma": "z", "fma": "d", "mulld": "l", "add": "l", "xor": "l",
           "min": "l", "shuf": "l", "imul": "s", "sadd": "s"}


def _mix_ir(ops: list, chains: int) -> str:
    fams = sorted({_FAMILY[o] for o in ops})
    typ = {_FAMILY[k]: _KINDS[k][0] for k in _KINDS}
    init = {_FAMILY[k]: _KINDS[k][1] for k in _KINDS}
    phis, body, tail = [], [], []
    for c in range(chains):
        cur = {}
        for f in fams:
            phis.append(f"  %{f}{c} = phi {typ[f]} [ {init[f]}, %entry ], [ %{f}n{c}, %loop ]")
            cur[f] = f"%{f}{c}"
        for n, op in enumerate(ops):
            f = _FAMILY[op]
            y = f"%{f}{c}_{n}"
            body.append(_KINDS[op][2].format(x=cur[f], y=y, x0=f"%{f}{c}"))
            cur[f] = y
        for f in fams:
            body.append(f"  %{f}n{c} = bitcast {typ[f]} {cur[f]} to {typ[f]}")
            if typ[f] == "i64":                   # a scalar chain: stored as it is
                tail.append(f"  %{f}e{c} = add i64 %{f}n{c}, 0\n")
            else:
                tail.append(f"  %{f}s{c} = bitcast {typ[f]} %{f}n{c} to <8 x i64>\n"
                            f"  %{f}e{c} = extractelement <8 x i64> %{f}s{c}, i32 0\n")
            tail[-1] += (
                f"  %{f}p{c} = getelementptr i64, i64* %out, i64 {len(fams) * c + fams.index(f)}\n"
                f"  store i64 %{f}e{c}, i64* %{f}p{c}")
    return ("declare <8 x i64> @llvm.x86.avx512.pmulu.dq.512(<16 x i32>, <16 x i32>)\n"
            "declare <8 x double> @llvm.fma.v8f64(<8 x double>, <8 x double>, <8 x double>)\n"
            "declare <8 x i64> @llvm.x86.avx512.vpmadd52l.uq.512(<8 x i64>, <8 x i64>, <8 x i64>)\n"
            "define i64 @f(i64 %n, i64* %out) #0 {\nentry:\n  br label %loop\nloop:\n"
            "  %i = phi i64 [0, %entry], [%i1, %loop]\n" + "\n".join(phis) + "\n"
            + "\n".join(body) + "\n  %i1 = add i64 %i, 1\n  %c = icmp ult i64 %i1, %n\n"
            "  br i1 %c, label %loop, label %exit\nexit:\n" + "\n".join(tail)
            + "\n  ret i64 0\n}\n"
            f'attributes #0 = {{ "target-features"="{_FEATURES},-prefer-256-bit" '
            '"prefer-vector-width"="512" "min-legal-vector-width"="512" }\n')


def mix_cycles(ops: list, ghz: float, chains: int = 8, n: int = 2_000_000) -> float:
    """Cycles per chain-iteration of ``ops`` (8 independent chains, best of 5)."""
    import numpy as np
    f = _jit(_mix_ir(ops, chains), "f", [ctypes.c_int64, ctypes.c_void_p])
    out = np.zeros(4 * chains, np.int64)
    best = min(_timed(lambda: f(n, out.ctypes.data)) for _ in range(5))
    return best / (n * chains) * ghz * 1e9


MIXES = (["mulq"], ["mulld"], ["ifma"], ["fma"], ["mulq", "mulq"], ["mulq", "mulld"],
         ["mulq", "ifma"], ["mulq", "fma"], ["xor"], ["add", "xor"], ["add", "xor", "add", "xor"],
         ["min"], ["shuf"], ["mulq", "shuf"], ["mulq", "min"], ["mulq", "add", "xor"],
         ["mulq", "add", "xor", "add", "xor"], ["imul"], ["mulq", "imul"],
         ["mulq", "add", "xor", "imul", "sadd", "sadd"])


def _numba_kernel_asm() -> str:
    """kernels/poseidon2_lanes._sponge_lanes_kernel's machine code as numba compiles it in
    this process (a child with a fresh NUMBA_CACHE_DIR: numba shows no code it loaded)."""
    import subprocess
    import tempfile
    code = ("import numpy as np\n"
            "from steadfast.kernels import poseidon2_lanes as pl\n"
            "k = pl._sponge_lanes_kernel\n"
            "m = np.zeros((32, 16), np.uint32); o = np.zeros((32, 16), np.uint32)\n"
            "k(m, pl.NO_M2, o, 16, 0, 2)\n"
            "import sys; sys.stdout.write(k.inspect_asm(k.signatures[0]))\n")
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=ROOT)
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=600, cwd=ROOT)
    if r.returncode:
        raise RuntimeError(r.stderr[-2000:])
    return r.stdout


def kernel_instructions() -> dict:
    """The full-round and partial-round loop bodies of the lanes kernel (the basic blocks
    with 16 x 24 and with 24-30 vector multiplies: 16 or 1 S-boxes of 4 Montgomery
    products, 6 multiplies each), every instruction counted by class; a group of W = 16
    states runs the first 8 times and the second 13 times (the entry's conversions and
    the exit's, ~5 %, not counted)."""
    import re
    from steadfast.kernels.poseidon2_constants import ROUNDS_F_HALF, ROUNDS_P
    blocks, cur = [], None
    for line in _numba_kernel_asm().splitlines():
        if re.match(r"^[.\w$]+:", line):
            cur = []
            blocks.append(cur)
        elif cur is not None and line.startswith("\t") and not line.strip().startswith("."):
            cur.append(line.strip())

    def classify(ins):
        c = {"multiply": 0, "move high words": 0, "shuffle": 0, "spill/reload": 0,
             "other vector": 0, "scalar": 0}
        for line in ins:
            op = line.split()[0]
            if re.match(r"vpmul|vpmadd52", op):
                c["multiply"] += 1
            elif op in ("vpshufd", "vpsrlq", "vpsraq"):
                c["move high words"] += 1
            elif "(%rsp)" in line or (op.startswith("vmov") and "(" in line):
                c["spill/reload"] += 1
            elif re.match(r"vperm|vshuf|vpunpck|valign", op):
                c["shuffle"] += 1
            elif op.startswith("v"):
                c["other vector"] += 1
            else:
                c["scalar"] += 1
        return c

    full = part = None
    for i, ins in enumerate(blocks):
        muls = sum(1 for x in ins if re.match(r"\s*vpmul", x))
        if full is None and muls == 16 * 24:
            full = classify(ins)
            for nxt in blocks[i + 1:i + 4]:
                m2 = sum(1 for x in nxt if re.match(r"\s*vpmul", x))
                if 24 <= m2 <= 30:
                    part = classify(nxt)
                    break
    if full is None or part is None:
        return {"found": False}
    dyn = {k: 2 * ROUNDS_F_HALF * full[k] + ROUNDS_P * part[k] for k in full}
    return {"found": True, "full_round": full, "partial_round": part, "per_group": dyn,
            "total_per_group": sum(dyn.values())}


def kernel_cycles(ghz: float, log_n: int = 17) -> dict:
    """``poseidon2_permute`` of 2^17 random states, this process pinned to one CPU: best
    process CPU time of 7 calls (as bench/zorch_compare.py --one-cpu times it)."""
    import numpy as np
    from steadfast.kernels.field import P
    from steadfast.kernels.poseidon2 import poseidon2_permute
    from steadfast.kernels.poseidon2_lanes import W
    st = np.random.default_rng(1).integers(0, P, (1 << log_n, 16), dtype=np.uint32)
    poseidon2_permute(st[:4096])
    best = 1e9
    for _ in range(7):
        c = time.process_time()
        poseidon2_permute(st)
        best = min(best, time.process_time() - c)
    per_perm = best / (1 << log_n)
    return {"perm_per_s": 1 / per_perm, "ns_per_perm": per_perm * 1e9,
            "cycles_per_perm": per_perm * ghz * 1e9,
            "cycles_per_group": per_perm * ghz * 1e9 * W}


def scalar_bound(rows: list, kc: dict) -> dict | None:
    """The most a scalar permutation run beside the vector groups could add: the scalar
    ``imul`` issues beside the vector multiply port (measured above), and a scalar Montgomery
    product of 31-bit values takes 3 of them (t = a*b, q = lo(t)*p', q*p), so a permutation's
    141 S-boxes x 4 products need >= 1,692 imul issues; every other scalar operation, the
    interleaving and the front end assumed free."""
    from steadfast.kernels.poseidon2_constants import ROUNDS_F_HALF, ROUNDS_P
    from steadfast.kernels.poseidon2_lanes import W
    cyc = {tuple(r["ops"]): r for r in rows}
    if ("imul",) not in cyc or ("mulq", "imul") not in cyc:
        return None
    sboxes = 2 * ROUNDS_F_HALF * 16 + ROUNDS_P
    imuls = sboxes * 4 * 3
    per_perm_ns = imuls * cyc[("imul",)]["ns"]
    beside = kc["ns_per_perm"] * W / per_perm_ns
    return {"imul_cycles": cyc[("imul",)]["cycles"], "beside": cyc[("mulq", "imul")]["cycles"],
            "imuls_per_perm": imuls, "ns_per_perm": per_perm_ns, "perms_beside": beside,
            "gain": beside / W}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="write every figure here")
    args = ap.parse_args(argv)
    flags = cpu_flags()
    if "avx512f" not in flags or "avx512ifma" not in flags:
        print("mul_ports: this host lacks AVX-512 F or IFMA; nothing to measure")
        return 1
    cpu = sorted(os.sched_getaffinity(0))[-1]
    os.sched_setaffinity(0, {cpu})            # one CPU: the clock, the mixes, the kernel
    os.environ["NUMBA_NUM_THREADS"] = "1"
    import steadfast  # noqa: F401  (numba's 512-bit code generation, as the prover runs)
    from steadfast.kernels.poseidon2_lanes import W
    ghz = clock_ghz()
    vghz = vector_clock_ghz()
    print(f"clock {ghz:.2f} GHz (dependent scalar chain), {vghz:.2f} GHz (dependent 512-bit "
          f"chain: the vector figures' cycles); load {os.getloadavg()[0]:.2f}")
    rows = []
    for ops in MIXES:
        clock = ghz if all(_FAMILY[o] == "s" for o in ops) else vghz
        cyc = mix_cycles(list(ops), clock)
        rows.append({"ops": list(ops), "cycles": cyc, "ns": cyc / clock})
        print(f"  {' + '.join(ops):32s} {cyc:5.2f} cycles per chain-iteration")
    km = kernel_instructions()
    kc = kernel_cycles(vghz)
    print(f"Poseidon2 lanes kernel: {kc['ns_per_perm']:.1f} ns = {kc['cycles_per_perm']:.0f} "
          f"cycles a permutation ({kc['perm_per_s'] / 1e6:.2f} M/s, one thread) = "
          f"{kc['cycles_per_group']:,.0f} cycles a group of 16")
    if km["found"]:
        tot = km["total_per_group"]
        print(f"  its loop bodies as numba compiled them: full round {sum(km['full_round'].values())}"
              f" instructions, partial round {sum(km['partial_round'].values())}; a group "
              f"(8 full, 13 partial) {tot:,} = "
              + ", ".join(f"{k} {n:,}" for k, n in km["per_group"].items()))
        print(f"  {tot / kc['cycles_per_group']:.2f} instructions a cycle; the multiplies alone at "
              f"one a cycle: {km['per_group']['multiply'] / kc['cycles_per_group']:.0%} of the time")
    else:
        print("  (the kernel's loop bodies were not recognised in its machine code)")
    scalar = scalar_bound(rows, kc)
    if scalar:
        print(f"  the scalar multiplier beside it: {scalar['imul_cycles']:.2f} cycles an imul "
              f"({scalar['beside']:.2f} beside a vpmuludq); a scalar permutation needs "
              f">= {scalar['imuls_per_perm']:,} imuls = {scalar['ns_per_perm']:,.0f} ns, "
              f"so at most {scalar['perms_beside']:.1f} beside a group of {W}: "
              f"+{scalar['gain']:.0%} at best")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"ghz": ghz, "vector_ghz": vghz, "mixes": rows, "kernel": km, "kernel_speed": kc,
                       "scalar_beside": scalar,
                       "load": os.getloadavg()[0]}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
