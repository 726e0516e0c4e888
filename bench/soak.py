"""Soak: prove+verify cycles of a block of RISC-V transactions (block format 2) on a device
backend under a reduced VRAM budget and injected faults, and the recoveries of issue #26.

    PYTHONPATH=. python bench/soak.py --cycles 30 [--backend emu]
        [--block examples/block.json | --tiny]
        [--scenario oom|race|race-serialized|corrupt|corrupt-input|lost|corrupt-recovered|
                    self-check-retry|all ...] [--queries 16]

The block: a version-2 block file (default examples/block.json: three transactions, 50
tables), or with ``--tiny`` tests/txblocks.py's one-transaction block (hello, 18 tables).

Scenarios (each runs ``--cycles`` proofs with a different fault seed per cycle).  The first
five drive the device pipeline (``prover.device.pipeline.run_pipeline``) with corruption recovery
off (``PipelineConfig.recover_corruption=False``), so that a caught corruption is counted:

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

The last three go through ``Prover.prove_block`` (a fresh prover per cycle, the switches
as environment variables, as an operator sets them) and must end in the host proof's
bytes with the counters of docs/diagnostics.md:

* ``lost``              ``PROVER_FAULTS=lost@SITE:1`` (SITE cycling through the 8 sites):
                        ``counters.device.device_lost`` 1, ``recovered_by_site[SITE]
                        .device_lost`` 1 (the only loss), ``device_lost_at.site`` SITE,
                        ``host_completion.reason`` ``device lost``, nothing else recovered;
* ``corrupt-recovered`` ``corrupt@SITE:1`` with ``PROVER_GPU_XCHECK=1`` (SITE cycling)
                        and ``PROVER_ABORT_ON_CORRUPTION=0``: ``corruptions_recovered`` >= 1,
                        the sum of ``recovered_by_site[*].corruptions_recovered``,
                        ``host_completion`` null or ``reason`` ``corruption``, a post-mortem
                        written, no loss, no self-check retry;
* ``self-check-retry``  ``corrupt@SITE:1`` without XCHECK (SITE alternating r2 and
                        r4.open, whose corruption only the final self-check sees; one at
                        r3 or r4.fri is caught earlier, by the join's check or the
                        per-table precheck, and recovered as a corruption):
                        ``counters.self_check.retried`` 1, ``failed`` 1, ``checked`` 2,
                        ``retried_postmortem`` written, nothing recovered in the pipeline.

Prints a table, then a last line ``soak: N/N valid, N/N identical, corruptions caught
C/C, recovered R/R (lost L, corruptions K, self-check S), invalid proofs written 0``.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from steadfast.prover.device.faults import parse_faults  # noqa: E402
from steadfast.prover.device.pipeline import PipelineConfig, estimate_bytes, run_pipeline  # noqa: E402
from steadfast.prover.core.prove import prepare, prove  # noqa: E402
from steadfast.prover.device.xcheck import XcheckFailure  # noqa: E402
from steadfast.verifier import verify  # noqa: E402
from steadfast.verifier.errors import VerificationError  # noqa: E402
from steadfast.verifier.proof_format import Params  # noqa: E402

XSITES = ("r1.main", "r1.aux", "r2", "r2.tree", "r3", "r4.deep", "r4.fri", "r4.open")
PIPELINE_SCENARIOS = ("oom", "race", "race-serialized", "corrupt", "corrupt-input")
RECOVERY_SCENARIOS = ("lost", "corrupt-recovered", "self-check-retry")
SCENARIOS = PIPELINE_SCENARIOS + RECOVERY_SCENARIOS
SELF_CHECK_SITES = ("r2", "r4.open")
DEFAULT_BLOCK = os.path.join(ROOT, "examples", "block.json")
_SWITCHES = ("PROVER_FAULTS", "PROVER_GPU_XCHECK", "PROVER_ABORT_ON_CORRUPTION",
             "PROVER_GPU_FORCE_DOWNGRADE", "PROVER_VRAM_BUDGET")


def load_tables(block, queries: int = 16, pow_bits: int = 8):
    """The block's (a path or an ``rv32.blockfile.Block``) AIRs, traces and public values,
    as ``Prover.prove_block`` builds them."""
    from steadfast.prover.api import Prover, ProverConfig
    from steadfast.prover.blocks.proof import as_txblock
    prover = Prover(ProverConfig(backend="host", num_queries=queries, pow_bits=pow_bits))
    _, bt = prover._build_txblock(as_txblock(block), {})
    return list(bt.airs), list(bt.traces), bt.table_public_values


def _recovery_env(sc: str, c: int, seed: int) -> tuple[dict, str]:
    """The switches of recovery scenario ``sc`` in cycle ``c`` -> (environment, site)."""
    if sc == "lost":
        site = XSITES[c % len(XSITES)]
        return {"PROVER_FAULTS": f"lost@{site}:1,seed={seed}"}, site
    if sc == "corrupt-recovered":
        site = XSITES[(3 * c + 2) % len(XSITES)]
        return {"PROVER_FAULTS": f"corrupt@{site}:1,seed={seed}", "PROVER_GPU_XCHECK": "1",
                "PROVER_ABORT_ON_CORRUPTION": "0"}, site
    site = SELF_CHECK_SITES[c % len(SELF_CHECK_SITES)]
    return {"PROVER_FAULTS": f"corrupt@{site}:1,seed={seed}", "PROVER_GPU_XCHECK": "0",
            "PROVER_ABORT_ON_CORRUPTION": "0"}, site


def check_counters(sc: str, site: str, counters: dict, new_postmortems: int) -> list:
    """What is wrong with a recovery scenario's ``ProofStats.counters`` (docs/diagnostics.md,
    "Counters" and "Self-check"); [] when they are as documented."""
    d, s = counters["device"], counters["self_check"]
    by_site = d["recovered_by_site"]
    lost = sum(v["device_lost"] for v in by_site.values())
    rec = sum(v["corruptions_recovered"] for v in by_site.values())
    bad = []

    def want(cond, what):
        if not cond:
            bad.append(what)
    if sc == "lost":
        want(d["device_lost"] == 1, f"device_lost {d['device_lost']}")
        want(by_site[site]["device_lost"] == 1 and lost == 1, f"recovered_by_site {by_site}")
        want((d["device_lost_at"] or {}).get("site") == site, f"device_lost_at {d['device_lost_at']}")
        want((d["host_completion"] or {}).get("reason") == "device lost",
             f"host_completion {d['host_completion']}")
        want(d["corruptions_recovered"] == 0 and s["retried"] == 0, "other recoveries")
    elif sc == "corrupt-recovered":
        n = d["corruptions_recovered"]
        want(n >= 1 and rec == n, f"corruptions_recovered {n}, by site {rec}")
        hc = d["host_completion"]
        want(hc is None or hc.get("reason") == "corruption", f"host_completion {hc}")
        want(new_postmortems >= 1, "no post-mortem written")
        want(d["device_lost"] == 0 and lost == 0 and s["retried"] == 0, "other recoveries")
    else:
        want(s["retried"] == 1 and s["failed"] == 1 and s["checked"] == 2,
             f"self_check {s}")
        pm = s.get("retried_postmortem")
        want(bool(pm) and os.path.exists(pm), f"retried_postmortem {pm}")
        want(d["device_lost"] == 0 and d["corruptions_recovered"] == 0 and lost == rec == 0,
             "other recoveries")
    return bad


def _files(d: str) -> int:
    """Files under ``d`` (a post-mortem of a table named ``tx0/...`` lands in a
    subdirectory)."""
    return sum(len(f) for _, _, f in os.walk(d))


def _recovery_cycle(sc: str, c: int, seed: int, block, ref: bytes, args, pm_dir: str) -> dict:
    """One cycle of a recovery scenario through ``Prover.prove_block``."""
    from steadfast.prover.api import Prover, ProverConfig
    env, site = _recovery_env(sc, c, seed)
    saved = {k: os.environ.get(k) for k in _SWITCHES}
    for k in _SWITCHES:
        os.environ.pop(k, None)
    os.environ.update(env)
    before = _files(pm_dir)
    try:
        prover = Prover(ProverConfig(backend=args.backend, num_queries=args.queries,
                                     pow_bits=args.pow_bits, postmortem_dir=pm_dir))
        proof = prover.prove_block(block)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    counters = proof.stats.counters
    bad = check_counters(sc, site, counters, _files(pm_dir) - before)
    return {"proof": proof.proof, "site": site, "bad": bad, "counters": counters}


def run(args) -> dict:
    from steadfast.prover.blocks.proof import as_txblock
    if args.tiny:
        from tests.txblocks import one_tx_block
        block = one_tx_block()
    else:
        block = as_txblock(args.block)
    airs, traces, pvs = load_tables(block, args.queries, args.pow_bits)
    params = Params(num_queries=args.queries, pow_bits=args.pow_bits)
    ref = prove(traces, airs, pvs, params)
    st = prepare(traces, airs, pvs, params, check=False)
    ests = sorted((estimate_bytes(s) for s in st.shapes), reverse=True)
    # below the block's peak: the two heaviest tables cannot be resident together
    budget = ests[0] + (ests[1] // 2 if len(ests) > 1 else 0)
    scenarios = SCENARIOS if "all" in args.scenario else tuple(args.scenario)
    totals = {"cycles": 0, "valid": 0, "identical": 0, "injected": 0, "caught": 0,
              "invalid_written": 0, "recovery_cycles": 0, "recovered": 0, "lost": 0,
              "corruptions_recovered": 0, "self_check_retried": 0}
    rows = []
    pm_dir = tempfile.mkdtemp(prefix="steadfast-soak-")
    for sc in scenarios:
        r = {"scenario": sc, "cycles": 0, "valid": 0, "identical": 0, "injected": 0, "caught": 0,
             "retries": 0, "downgrades": 0, "verdicts_ok": 0, "recovered": 0, "time_s": 0.0}
        for c in range(args.cycles):
            seed = 1000 * SCENARIOS.index(sc) + c
            t0 = time.perf_counter()
            r["cycles"] += 1
            if sc in RECOVERY_SCENARIOS:
                out = _recovery_cycle(sc, c, seed, block, ref, args, pm_dir)
                proof, counters = out["proof"], out["counters"]
                totals["lost"] += counters["device"]["device_lost"]
                totals["corruptions_recovered"] += counters["device"]["corruptions_recovered"]
                totals["self_check_retried"] += counters["self_check"]["retried"]
                for v in counters["device"].get("recovery", {}).values():
                    r["retries"] += v["retries"]
                    r["downgrades"] += v["downgrades"]
                if out["bad"] or proof != ref:
                    print(f"  {sc} cycle {c} at {out['site']}: identical {proof == ref}; "
                          f"counters: {'; '.join(out['bad']) or 'as documented'}",
                          file=sys.stderr)
                else:
                    r["recovered"] += 1
            else:
                cfg = PipelineConfig(backend=args.backend, postmortem_dir=pm_dir)
                expect_verdict = None
                if sc == "oom":
                    cfg.budget, cfg.faults = budget, parse_faults(f"oom@*:0.3,seed={seed}")
                elif sc in ("race", "race-serialized"):
                    cfg.faults = parse_faults(f"race@r2:0.5,seed={seed}")
                    cfg.serialize_r2, cfg.xcheck = sc == "race-serialized", True
                else:
                    # 3 c + offset: five cycles visit r4.deep and r4.fri (corrupt), r4.open
                    # and r4.deep (corrupt-input) besides the earlier sites
                    site = XSITES[(3 * c + (2 if sc == "corrupt" else 7)) % len(XSITES)]
                    cfg.faults = parse_faults(f"{sc}@{site}:1,seed={seed}")
                    cfg.xcheck = True
                    expect_verdict = ("transient race" if sc == "corrupt"
                                      else "corrupted resident input")
                try:
                    proof, stats = run_pipeline(st, cfg)
                except XcheckFailure as exc:
                    r["caught"] += 1
                    r["injected"] += 1
                    if expect_verdict is None or exc.report.get("verdict") == expect_verdict:
                        r["verdicts_ok"] += 1
                    r["time_s"] += time.perf_counter() - t0
                    continue
                for v in stats.counters.as_dict().values():
                    r["retries"] += v["retries"]
                    r["downgrades"] += v["downgrades"]
            r["time_s"] += time.perf_counter() - t0
            try:
                verify(proof, airs, pvs, min_security_bits=0)   # the soak's weak parameters
                r["valid"] += 1
            except VerificationError as exc:
                print(f"  cycle {c}: INVALID proof: {exc}", file=sys.stderr)
                totals["invalid_written"] += 1        # a wrong proof came out: the failure mode
            if proof == ref:
                r["identical"] += 1
            elif sc not in ("oom",) + RECOVERY_SCENARIOS:
                r["injected"] += 1                    # corrupted but not caught
        rows.append(r)
        for k in ("cycles", "valid", "identical", "injected", "caught", "recovered"):
            totals[k] += r[k]
        if sc in RECOVERY_SCENARIOS:
            totals["recovery_cycles"] += r["cycles"]
    return {"rows": rows, "totals": totals, "budget": budget,
            "block": "tests/txblocks.py one_tx_block" if args.tiny else args.block,
            "backend": args.backend, "tables": len(airs)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=5)
    ap.add_argument("--backend", default="emu", choices=("emu", "sim", "cuda"))
    ap.add_argument("--block", default=DEFAULT_BLOCK,
                    help="a version-2 block (default examples/block.json)")
    ap.add_argument("--tiny", action="store_true",
                    help="prove tests/txblocks.py's one-transaction block instead of --block")
    ap.add_argument("--scenario", nargs="+", default=["all"], choices=SCENARIOS + ("all",),
                    help="one or more scenarios (default all)")
    ap.add_argument("--queries", type=int, default=16)
    ap.add_argument("--pow-bits", type=int, default=8)
    args = ap.parse_args(argv)
    if args.backend == "sim":
        from steadfast.kernels.backend import enable_simulator
        enable_simulator()
    out = run(args)
    print(f"backend {out['backend']}, budget {out['budget']} B, block {out['block']} "
          f"({out['tables']} tables)")
    print(f"{'scenario':17} {'cycles':>6} {'valid':>6} {'ident':>6} {'inject':>6} {'caught':>6} "
          f"{'verdict':>7} {'recov':>6} {'retry':>6} {'downgr':>6} {'time':>7}")
    for r in out["rows"]:
        print(f"{r['scenario']:17} {r['cycles']:6} {r['valid']:6} {r['identical']:6} "
              f"{r['injected']:6} {r['caught']:6} {r['verdicts_ok']:7} {r['recovered']:6} "
              f"{r['retries']:6} {r['downgrades']:6} {r['time_s']:6.1f}s")
    t = out["totals"]
    proofs = t["cycles"] - t["caught"]
    print(f"soak: {t['valid']}/{proofs} valid, {t['identical']}/{proofs} identical, "
          f"corruptions caught {t['caught']}/{t['injected']}, "
          f"recovered {t['recovered']}/{t['recovery_cycles']} (lost {t['lost']}, "
          f"corruptions {t['corruptions_recovered']}, self-check {t['self_check_retried']}), "
          f"invalid proofs written {t['invalid_written']}")
    ok = (t["valid"] == proofs and t["invalid_written"] == 0 and t["caught"] == t["injected"]
          and t["recovered"] == t["recovery_cycles"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
