#!/usr/bin/env python3
"""One matrix's commit as the prover does it (``intt``, ``lde_of_coeffs``,
``Committed.commit`` without tree levels: kernels/lde_rows.py's fused leaf sponge) beside
the roofline's (``lde_columns``, a transpose, ``kernels.merkle.commit`` of the rows: what
bench/block_bench.py's ``roofline_seconds`` times): the best of 5 runs and its steps' seconds.

    PYTHONPATH=. .venv/bin/python bench/commit_bench.py WIDTH LOG_ROWS [LOG_BLOWUP]
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv=None) -> int:
    import numpy as np
    from steadfast.kernels.field import P
    from steadfast.kernels.merkle import commit
    from steadfast.kernels.ntt_host import intt, lde_columns
    from steadfast.prover.core.stages import Committed, lde_of_coeffs
    from steadfast.verifier.protocol import SHIFT
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    w, log_n = int(argv[0]), int(argv[1])
    lb = int(argv[2]) if len(argv) > 2 else 2
    m = np.random.default_rng(1).integers(0, P, (w, 1 << log_n), dtype=np.uint32)

    def roof():
        t = [time.perf_counter()]
        lde = lde_columns(m, lb, SHIFT)
        t.append(time.perf_counter())
        rows = np.ascontiguousarray(lde.T)
        t.append(time.perf_counter())
        commit(rows)
        t.append(time.perf_counter())
        return [b - a for a, b in zip(t, t[1:])]

    def ours():
        t = [time.perf_counter()]
        coeffs = intt(m)
        t.append(time.perf_counter())
        lde = lde_of_coeffs(coeffs, lb)
        t.append(time.perf_counter())
        Committed.commit(lde, coeffs, levels=False)
        t.append(time.perf_counter())
        return [b - a for a, b in zip(t, t[1:])]

    roof()
    ours()
    for name, f, steps in (("roofline", roof, "lde, transpose, commit"),
                           ("prover", ours, "intt, lde, leaves")):
        parts = min((f() for _ in range(5)), key=sum)           # the best of 5
        print(f"{w} x 2^{log_n} at blowup 2^{lb}: {name} {sum(parts) * 1e3:.1f} ms ({steps}: "
              + ", ".join(f"{x * 1e3:.1f}" for x in parts) + " ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
