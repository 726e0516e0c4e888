"""Soak: prove+verify cycles of a multi-table block on a device backend under a reduced
VRAM budget and injected faults.

    PYTHONPATH=. python bench/soak.py --cycles 30 [--backend emu] [--block examples/block.json]
        [--scenario oom|race|race-serialized|corrupt|corrupt-input|all] [--queries 16]

Scenarios (each runs ``--cycles`` proofs with a different fault seed per cycle):

* ``oom``             budget cut until tables queue, ``oom@*:0.3``: every proof must be
                      valid and byte-identical to the host proof;
* ``race``            ``race@r2:0.5``, SERIALIZE_R2=0, XCHECK=1: every injected corruption
                      caught (XCHECK failure, no proof), never an invalid proof;
* ``race-serialized`` the same with SERIALIZE_R2=1: no corruption at all;
* ``corrupt``         ``corrupt@SITE:1`` (site cycling through every recovery site, the
                      join's r4.fri and r4.open included), XCHECK=1:
                      caught, verdict ``transient race``;
* ``corrupt-input``   ``corrupt-input@SITE:1``, XCHECK=1: caught, verdict
                      ``corrupted resident input``.

Prints a table, then a last line
``soak: N/N valid, N/N identical, corruptions caught C/C, invalid proofs written 0``.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from steadfast.prover.faults import parse_faults  # noqa: E402
from steadfast.prover.pipeline import PipelineConfig, estimate_bytes, run_pipeline  # noqa: E402
from steadfast.prover.prove import prepare, prove  # noqa: E402
from steadfast.prover.xcheck import XcheckFailure  # noqa: E402
from steadfast.verifier import verify  # noqa: E402
from steadfast.verifier.errors import VerificationError  # noqa: E402
from steadfast.verifier.proof_format import Params  # noqa: E402

XSITES = ("r1.main", "r1.aux", "r2", "r2.tree", "r3", "r4.deep", "r4.fri", "r4.open")
SCENARIOS = ("oom", "race", "race-serialized", "corrupt", "corrupt-input")


def load_tables(block_path: str):
    from steadfast.vm.block import load_block
    from steadfast.vm.interpreter import execute
    from steadfast.vm.traces import build_traces
    bt = build_traces(execute(load_block(block_path)))
    return bt.airs, bt.traces, bt.table_public_values


def run(args) -> dict:
    airs, traces, pvs = load_tables(args.block)
    params = Params(num_queries=args.queries, pow_bits=args.pow_bits)
    ref = prove(traces, airs, pvs, params)
    st = prepare(traces, airs, pvs, params, check=False)
    ests = sorted((estimate_bytes(s) for s in st.shapes), reverse=True)
    # below the block's peak: the two heaviest tables cannot be resident together
    budget = ests[0] + (ests[1] // 2 if len(ests) > 1 else 0)
    scenarios = SCENARIOS if args.scenario == "all" else (args.scenario,)
    totals = {"cycles": 0, "valid": 0, "identical": 0, "injected": 0, "caught": 0,
              "invalid_written": 0, "verdict_ok": 0, "verdict_n": 0}
    rows = []
    pm_dir = tempfile.mkdtemp(prefix="steadfast-soak-")
    for sc in scenarios:
        r = {"scenario": sc, "cycles": 0, "valid": 0, "identical": 0, "injected": 0, "caught": 0,
             "retries": 0, "downgrades": 0, "verdicts_ok": 0, "time_s": 0.0}
        for c in range(args.cycles):
            seed = 1000 * SCENARIOS.index(sc) + c
            cfg = PipelineConfig(backend=args.backend, postmortem_dir=pm_dir)
            expect_verdict = None
            if sc == "oom":
                cfg.budget, cfg.faults = budget, parse_faults(f"oom@*:0.3,seed={seed}")
            elif sc in ("race", "race-serialized"):
                cfg.faults = parse_faults(f"race@r2:0.5,seed={seed}")
                cfg.serialize_r2, cfg.xcheck = sc == "race-serialized", True
            else:
                # 3 c + offset: five cycles visit r4.deep and r4.fri (corrupt), r4.open and
                # r4.deep (corrupt-input) besides the earlier sites
                site = XSITES[(3 * c + (2 if sc == "corrupt" else 7)) % len(XSITES)]
                cfg.faults = parse_faults(f"{sc}@{site}:1,seed={seed}")
                cfg.xcheck = True
                expect_verdict = "transient race" if sc == "corrupt" else "corrupted resident input"
            t0 = time.perf_counter()
            r["cycles"] += 1
            try:
                proof, stats = run_pipeline(st, cfg)
            except XcheckFailure as exc:
                r["caught"] += 1
                r["injected"] += 1
                if expect_verdict is None or exc.report.get("verdict") == expect_verdict:
                    r["verdicts_ok"] += 1
                r["time_s"] += time.perf_counter() - t0
                continue
            r["time_s"] += time.perf_counter() - t0
            for v in stats.counters.as_dict().values():
                r["retries"] += v["retries"]
                r["downgrades"] += v["downgrades"]
            try:
                verify(proof, airs, pvs, min_security_bits=0)   # the soak's weak parameters
                r["valid"] += 1
            except VerificationError as exc:
                print(f"  cycle {c}: INVALID proof: {exc}", file=sys.stderr)
                totals["invalid_written"] += 1        # a wrong proof came out: the failure mode
            if proof == ref:
                r["identical"] += 1
            elif sc != "oom":
                r["injected"] += 1                    # corrupted but not caught
        rows.append(r)
        for k in ("cycles", "valid", "identical", "injected", "caught"):
            totals[k] += r[k]
    return {"rows": rows, "totals": totals, "budget": budget, "block": args.block,
            "backend": args.backend}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=5)
    ap.add_argument("--backend", default="emu", choices=("emu", "sim", "cuda"))
    ap.add_argument("--block", default=os.path.join(os.path.dirname(__file__), "..", "examples",
                                                     "block.json"))
    ap.add_argument("--scenario", default="all", choices=SCENARIOS + ("all",))
    ap.add_argument("--queries", type=int, default=16)
    ap.add_argument("--pow-bits", type=int, default=8)
    args = ap.parse_args(argv)
    if args.backend == "sim":
        from steadfast.kernels.backend import enable_simulator
        enable_simulator()
    out = run(args)
    print(f"backend {out['backend']}, budget {out['budget']} B, block {out['block']}")
    print(f"{'scenario':16} {'cycles':>6} {'valid':>6} {'ident':>6} {'inject':>6} {'caught':>6} "
          f"{'verdict':>7} {'retry':>6} {'downgr':>6} {'time':>7}")
    for r in out["rows"]:
        print(f"{r['scenario']:16} {r['cycles']:6} {r['valid']:6} {r['identical']:6} "
              f"{r['injected']:6} {r['caught']:6} {r['verdicts_ok']:7} {r['retries']:6} "
              f"{r['downgrades']:6} {r['time_s']:6.1f}s")
    t = out["totals"]
    proofs = t["cycles"] - t["caught"]
    print(f"soak: {t['valid']}/{proofs} valid, {t['identical']}/{proofs} identical, "
          f"corruptions caught {t['caught']}/{t['injected']}, "
          f"invalid proofs written {t['invalid_written']}")
    ok = (t["valid"] == proofs and t["invalid_written"] == 0 and t["caught"] == t["injected"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
