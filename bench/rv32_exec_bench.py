"""RV32IM execution speed: the compiled loop (execute-only and with the record) and the
Python reference interpreter, on a looping program; and the loop's cold compile time.

    .venv/bin/python bench/rv32_exec_bench.py [--cycles N] [--json] [--no-cold]

The program (:func:`loop_program`) runs a loop of 12 instructions -- a load, a store,
nine ALU operations (add twice, xor, slli, mul, srli, sltu, andi, addi) and a taken branch
-- until it has run about ``--cycles`` instructions, then writes its checksum (one ECALL)
and exits.  Rates are instructions per second of the best of ``--repeat`` runs, on one core
(NUMBA_NUM_THREADS=1; the loop is serial anyway).  The cold compile time is measured in a
subprocess with an empty numba cache directory (compile + first run of a tiny program),
then the warm start in a second subprocess reusing that cache.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

LOOP_LEN = 12                  # instructions per loop iteration


def loop_program(cycles: int):
    """A Program that executes about ``cycles`` instructions (module docstring)."""
    from steadfast.rv32 import Program, asm
    iters = max(1, (cycles - 16) // LOOP_LEN)
    base = 0x10000
    buf = 0x20000
    src = f"""
        li s0, {iters}
        li s1, {buf}
        li t0, 12345
    loop:
        lw t1, 0(s1)
        add t0, t0, t1
        xor t2, t0, s0
        slli t3, t2, 3
        mul t4, t3, t0
        srli t5, t4, 7
        sltu t6, t5, t0
        add t0, t0, t6
        andi a3, t5, 255
        sw a3, 0(s1)
        addi s0, s0, -1
        bnez s0, loop
        sw t0, 4(s1)
        li a0, 1
        addi a1, s1, 4
        li a2, 4
        li a7, 64
        ecall
        li a0, 0
        li a7, 93
        ecall
    """
    return Program.from_words(asm.assemble(src, base), base=base)


def _rate(fn, repeat: int) -> tuple[float, int]:
    best = float("inf")
    cycles = 0
    for _ in range(repeat):
        t = time.perf_counter()
        cycles = fn().cycles
        best = min(best, time.perf_counter() - t)
    return cycles / best, cycles


_COLD = """
import time, sys
t = time.perf_counter()
import steadfast.verifier.poseidon2
t_verifier = time.perf_counter() - t
t = time.perf_counter()
from steadfast.rv32 import execute, Program, asm
t_import = time.perf_counter() - t
p = Program.from_words(asm.assemble("li a0, 3\\nli a7, 93\\necall"))
t = time.perf_counter()
c = time.process_time()
execute(p)
t_exec = time.perf_counter() - t
c_exec = time.process_time() - c
t = time.perf_counter()
execute(p, record=True)
t_rec = time.perf_counter() - t
print(t_verifier, t_import, t_exec, t_rec, c_exec)
"""


def cold_compile() -> dict:
    """Seconds of importing the verifier's Poseidon2 kernels (the loop calls them; the
    prover loads them anyway), of importing rv32, of the first execute (the loop's compile)
    and the first recorded execute, with an empty numba cache (cold) and with the cache it
    left (warm)."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, NUMBA_NUM_THREADS="1")
        out = {}
        for label in ("cold", "warm"):
            t = time.perf_counter()
            r = subprocess.run([sys.executable, "-c", _COLD], env=env, capture_output=True,
                               text=True, timeout=900)
            wall = time.perf_counter() - t
            if r.returncode:
                raise RuntimeError(r.stderr[-2000:])
            ver, imp, ex, rec, ex_cpu = (float(x) for x in r.stdout.split())
            out[label] = {"process_s": wall, "verifier_poseidon2_import_s": ver,
                          "import_s": imp, "first_execute_s": ex,
                          "first_execute_cpu_s": ex_cpu,
                          "first_record_execute_s": rec}
        return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=1 << 23)
    ap.add_argument("--python-cycles", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold-compile subprocesses")
    args = ap.parse_args(argv)

    from steadfast.rv32 import MAX_CYCLES_CEILING, execute
    prog = loop_program(args.cycles)
    small = loop_program(args.python_cycles)
    limit = MAX_CYCLES_CEILING
    execute(small, max_cycles=limit)                     # load / compile
    execute(small, max_cycles=limit, record=True)
    ref = execute(prog, max_cycles=limit)
    fast, n = _rate(lambda: execute(prog, max_cycles=limit), args.repeat)
    rec, _ = _rate(lambda: execute(prog, max_cycles=limit, record=True), args.repeat)
    py, n_py = _rate(lambda: execute(small, max_cycles=limit, engine="python"), 1)
    res = {"cycles": n, "exit_code": ref.exit_code,
           "execute_only_ips": fast, "with_record_ips": rec,
           "python_ips": py, "python_cycles": n_py,
           "speedup_vs_python": fast / py, "numba_num_threads": os.environ["NUMBA_NUM_THREADS"]}
    if not args.no_cold:
        res["compile"] = cold_compile()
    if args.json:
        print(json.dumps(res, indent=2))
        return
    print(f"looping program, {n:,} instructions (NUMBA_NUM_THREADS="
          f"{res['numba_num_threads']}, best of {args.repeat})")
    print(f"  compiled, execute-only : {fast / 1e6:8.2f} M instructions/s")
    print(f"  compiled, with record  : {rec / 1e6:8.2f} M instructions/s")
    print(f"  python reference       : {py / 1e6:8.4f} M instructions/s "
          f"({n_py:,} instructions; compiled is {fast / py:,.0f}x)")
    if "compile" in res:
        for label, c in res["compile"].items():
            print(f"  {label} start: verifier Poseidon2 kernels "
                  f"{c['verifier_poseidon2_import_s']:.2f} s (shared with the prover), import "
                  f"{c['import_s']:.2f} s, first execute "
                  f"{c['first_execute_s']:.2f} s ({c['first_execute_cpu_s']:.2f} CPU s), "
                  f"first recorded execute "
                  f"{c['first_record_execute_s']:.2f} s (process {c['process_s']:.2f} s)")


if __name__ == "__main__":
    main()
