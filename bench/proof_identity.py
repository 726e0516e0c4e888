"""Proof-byte identity of host speed-ups (issue #12): prove the same blocks under two
configurations and compare the bytes.

    PYTHONPATH=. python bench/proof_identity.py [--sizes 8 10 12] [--widths] [--field]

``--widths``: one subprocess per vector width (STEADFAST_VECTOR_WIDTH=256 and the default).
``--field``: in one process, air/field.py's add/sub/neg/mul/ef_mul_base/ef_mul against the
straightforward numpy forms they replaced (np.where reductions, ``%`` remainders, one per
partial product).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _prove_hashes(sizes) -> list[str]:
    from steadfast.prover.api import Prover, ProverConfig
    from steadfast.vm.programs import sized_block
    pr = Prover(ProverConfig(backend="host", num_queries=20, pow_bits=1))
    out = []
    for k in sizes:
        for share in (0.0, 0.25):
            small = {} if k >= 11 else dict(memory_size=64, table_size=16, n_tx=1)
            proof = pr.prove_block(sized_block(k, share, seed=k, **small))
            out.append(hashlib.sha256(proof.to_bytes()).hexdigest())
    return out


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
    ap.add_argument("--sizes", type=int, nargs="+", default=[8, 10, 12])
    ap.add_argument("--widths", action="store_true")
    ap.add_argument("--field", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(" ".join(_prove_hashes(args.sizes)))
        return 0
    ok = True
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
