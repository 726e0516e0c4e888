"""Proof-byte identity (issues #12, #24): prove the same blocks under two configurations
and compare the bytes.

    PYTHONPATH=. python bench/proof_identity.py [--sizes 10 12] [--widths] [--field]
        [--backends host emu sim] [--sim-budget 20000]

The blocks are blocks of RISC-V transactions (block format 2): for every k of ``--sizes``
(10..23) and hash share 0 and 0.25, ``bench/make_block.py -k K --seed K --hash-share H``
(:func:`bench.v2_blocks.sized_block`), and a tiny one (:func:`bench.v2_blocks.tiny_block`:
one hello transaction, its output and exit code claimed; 18 tables).

``--widths``: one subprocess per vector width (STEADFAST_VECTOR_WIDTH=256 and the default).
``--field``: in one process, air/field.py's add/sub/neg/mul/ef_mul_base/ef_mul against the
straightforward numpy forms they replaced (np.where reductions, ``%`` remainders, one per
partial product).
``--backends``: the host backend's bytes against each other backend named, block by
block: ``emu`` (the device pipeline over the host kernels, no budget: every table on the
device) and ``cuda`` over every block; ``sim`` (numba's CUDA simulator, a Python thread
per GPU thread) over the tiny block only, with ``--sim-budget`` device bytes (default
20,000: the small tables -- BITWISE, SHIFT, MUL, DIV, P2CALL, ... -- run as simulated
kernels, the others are declined and recover on the host; the 65,536-row BYTES table
alone would take hours simulated).  Each backend line gives the proofs compared, how many
tables ran on the device (not downgraded) and ``identical`` or ``DIFFERENT``.  Exit 1 if
anything differs.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


CFG = dict(num_queries=20, pow_bits=1)


def _blocks(sizes) -> list:
    """(label, block) for every k of ``sizes`` and hash share 0 and 0.25, then the tiny one."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from bench.v2_blocks import sized_block, tiny_block
    out = [(f"k{k} H{share}", sized_block(k, share, seed=k)) for k in sizes
           for share in (0.0, 0.25)]
    return out + [("tiny", tiny_block())]


def _prove_hashes(sizes) -> list[str]:
    from steadfast.prover.api import Prover, ProverConfig
    pr = Prover(ProverConfig(backend="host", **CFG))
    return [hashlib.sha256(pr.prove_block(b).to_bytes()).hexdigest() for _, b in _blocks(sizes)]


def _backends(sizes, backends, sim_budget: int) -> bool:
    """Host bytes against each backend of ``backends`` (module docstring); prints one line
    per backend -> all identical."""
    import time
    from steadfast.prover.api import Prover, ProverConfig
    blocks = _blocks(sizes)
    host = Prover(ProverConfig(backend="host", **CFG))
    t = time.perf_counter()
    ref = {label: host.prove_block(b).to_bytes() for label, b in blocks}
    print(f"host: {len(ref)} proofs ({', '.join(f'{k} {len(v):,} B' for k, v in ref.items())}), "
          f"{time.perf_counter() - t:.1f} s", flush=True)
    ok = True
    for name in backends:
        if name == "host":
            continue
        budget = sim_budget if name == "sim" else None
        todo = [(lb, b) for lb, b in blocks if name != "sim" or lb == "tiny"]
        pr = Prover(ProverConfig(backend=name, vram_budget=budget, **CFG))
        t, same, on_device, tables, differ = time.perf_counter(), 0, 0, 0, []
        for label, b in todo:
            proof = pr.prove_block(b)
            if proof.to_bytes() == ref[label]:
                same += 1
            else:
                differ.append(label)
            dev = proof.stats.counters.get("device", {}).get("tables", {})
            tables += len(dev)
            on_device += sum(not v["downgraded"] for v in dev.values())
        ok &= not differ
        print(f"{name}: {len(todo)} proofs vs host, {tables - on_device}/{tables} tables "
              f"recovered on the host{f' (budget {budget:,} B)' if budget else ''}, "
              f"{'identical' if not differ else 'DIFFERENT: ' + ', '.join(differ)}, "
              f"{time.perf_counter() - t:.1f} s", flush=True)
    return ok


def _plain_field():
    """The replaced reference forms (kept here, not in the product)."""
    from steadfast.air import field as F
    _P, _W, u64 = F._P, F._W, F.u64

    def add(a, b):
        s = u64(a) + u64(b)
        return np.where(s >= _P, s - _P, s)

    def sub(a, b):
        s = u64(a) + _P - u64(b)
        return np.where(s >= _P, s - _P, s)

    def neg(a):
        a = u64(a)
        return np.where(a == 0, a, _P - a)

    def mul(a, b):
        return (u64(a) * u64(b)) % _P

    def ef_mul_base(a, b):
        return (u64(a) * u64(b)[None]) % _P

    def ef_mul(a, b):
        a, b = u64(a), u64(b)
        if a.size == 4 and b.size == 4 and a.shape == b.shape:
            return np.array(F._ef_mul_scalar(a.ravel().tolist(), b.ravel().tolist()),
                            dtype=np.uint64).reshape(a.shape)
        prod = [[(a[i] * b[j]) % _P for j in range(4)] for i in range(4)]
        hi4 = (prod[1][3] + prod[2][2] + prod[3][1]) % _P
        hi5 = (prod[2][3] + prod[3][2]) % _P
        hi6 = prod[3][3]
        c0 = (prod[0][0] + hi4 * _W) % _P
        c1 = (prod[0][1] + prod[1][0] + hi5 * _W) % _P
        c2 = (prod[0][2] + prod[1][1] + prod[2][0] + hi6 * _W) % _P
        c3 = (prod[0][3] + prod[1][2] + prod[2][1] + prod[3][0]) % _P
        return np.stack(np.broadcast_arrays(c0, c1, c2, c3))

    return {"add": add, "sub": sub, "neg": neg, "mul": mul, "ef_mul_base": ef_mul_base,
            "ef_mul": ef_mul}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 12],
                    help="make_block's k (10..23), each at hash share 0 and 0.25")
    ap.add_argument("--widths", action="store_true")
    ap.add_argument("--field", action="store_true")
    ap.add_argument("--backends", nargs="+", choices=("host", "emu", "sim", "cuda"),
                    help="compare the host bytes with these backends'")
    ap.add_argument("--sim-budget", type=int, default=20_000,
                    help="sim's device bytes (default 20000: the small tables run simulated)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(" ".join(_prove_hashes(args.sizes)))
        return 0
    ok = True
    if args.backends:
        ok &= _backends(args.sizes, args.backends, args.sim_budget)
    if args.widths:
        got = {}
        for width in ("256", "auto"):
            env = {k: v for k, v in os.environ.items() if k != "NUMBA_CPU_FEATURES"}
            env.update(STEADFAST_VECTOR_WIDTH=width, PYTHONPATH=ROOT)
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "--sizes",
                                *map(str, args.sizes)], env=env, capture_output=True, text=True,
                               check=True)
            got[width] = r.stdout.split()
        same = got["256"] == got["auto"]
        ok &= same
        print(f"vector widths 256 vs default: {len(got['256'])} proofs, "
              f"{'identical' if same else 'DIFFERENT'}: {[h[:12] for h in got['auto']]}")
    if args.field:
        from steadfast.air import field as F
        new = _prove_hashes(args.sizes)
        saved = {k: getattr(F, k) for k in _plain_field()}
        try:
            for k, fn in _plain_field().items():
                setattr(F, k, fn)
            old = _prove_hashes(args.sizes)
        finally:
            for k, fn in saved.items():
                setattr(F, k, fn)
        same = new == old
        ok &= same
        print(f"air/field.py lazy forms vs plain: {len(new)} proofs, "
              f"{'identical' if same else 'DIFFERENT'}: {[h[:12] for h in new]}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
