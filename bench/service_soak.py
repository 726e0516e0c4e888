"""Many proofs, one device (issue #26 item 4): prove N blocks C at a time through one
:class:`prover.service.ProofService` on ``emu``, each proof with its own random fault mix
(``oom``, ``corrupt``, ``lost`` at random sites and rates; its own seed; XCHECK on or off),
and compare every proof with its block's host proof (computed once per distinct block).

    python bench/service_soak.py --proofs 200 --concurrency 4 --budget 64MB --seed 1

The blocks: ``--blocks D`` distinct RISC-V blocks (block format 2) from
``bench/make_block.py``'s ``v2_block`` at ``-k`` (default 10: a bench and a hello
transaction each), proof i proving block i mod D.  ``--measure-peak`` first proves each
block alone on ``emu`` without a budget and prints its device peak (the budget the
issue's target asks for is below it).  Post-mortems of the injected corruptions go to a
temporary directory (printed) unless ``--postmortem-dir``.  ``--faulted F``: the share
of proofs given a fault mix (default 0.8; 0: all clean, the same-run baseline for what
the faulted proofs cost the clean ones).

The last line is exactly::

    service: N proofs, I identical, W wrong, F failed, R faults recovered

R: the recovery events of all proofs (prover.service.recoveries: device-stage retries,
downgrades, host materialisations, device losses, corruptions recomputed, self-checks
re-proved on the host); the line before it breaks them down.
"""
from __future__ import annotations

import argparse
import logging
import os
import random
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from steadfast.prover.api import Prover  # noqa: E402
from steadfast.prover.engine.config import ProverConfig  # noqa: E402
from steadfast.prover.device.faults import SITES  # noqa: E402
from steadfast.prover.service import ProofService, recoveries  # noqa: E402


def fault_mix(rng: random.Random, share: float = 0.8) -> tuple[str, bool]:
    """One proof's fault plan (PROVER_FAULTS syntax; "" for a clean proof: with
    probability 1 - ``share``) and its XCHECK switch."""
    terms = []
    if rng.random() < share:
        kinds = [k for k in ("oom", "corrupt", "lost") if rng.random() < 0.5] or \
            [rng.choice(("oom", "corrupt", "lost"))]
        for kind in kinds:
            site = rng.choice(SITES + ("*",)) if kind == "oom" else rng.choice(SITES)
            rate = rng.choice((0.2, 0.5, 1.0)) if kind != "corrupt" else 1.0
            terms.append(f"{kind}@{site}:{rate}")
        terms.append(f"seed={rng.randrange(1 << 30)}")
    return ",".join(terms), rng.random() < 0.5


def make_blocks(d: int, k: int) -> list:
    from make_block import v2_block
    return [v2_block(k, 0.0, seed=s)[0] for s in range(1, d + 1)]


def params(args) -> dict:
    return dict(num_queries=args.queries, pow_bits=args.pow_bits)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--proofs", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--budget", default="64MB", help="the service's device budget "
                    "(split evenly between the slots)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--blocks", type=int, default=4, help="distinct blocks")
    ap.add_argument("-k", type=int, default=10, help="log2 cycles per block (v2_block)")
    ap.add_argument("--queries", type=int, default=8)
    ap.add_argument("--pow-bits", type=int, default=0)
    ap.add_argument("--faulted", type=float, default=0.8, help="the share of proofs "
                    "given faults (0: every proof clean, for a same-run comparison)")
    ap.add_argument("--measure-peak", action="store_true")
    ap.add_argument("--postmortem-dir", default=None)
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per proof, "
                    "and the prover's recovery log")
    args = ap.parse_args(argv)
    if not args.verbose:
        logging.getLogger("steadfast").setLevel(logging.ERROR)
    pm_dir = args.postmortem_dir or tempfile.mkdtemp(prefix="service-soak-pm-")
    t0 = time.perf_counter()
    blocks = make_blocks(args.blocks, args.k)
    host = Prover(ProverConfig(backend="host", **params(args)))
    ref = [host.prove_block(b).to_bytes() for b in blocks]
    print(f"{len(blocks)} blocks (v2_block -k {args.k}), host proofs "
          f"{', '.join(str(len(r)) for r in ref)} bytes in {time.perf_counter() - t0:.1f}s",
          flush=True)
    if args.measure_peak:
        emu = Prover(ProverConfig(backend="emu", postmortem_dir=pm_dir, **params(args)))
        for i, b in enumerate(blocks):
            p = emu.prove_block(b)
            print(f"block {i}: one proof alone on emu, no budget: peak "
                  f"{p.stats.counters['device']['peak_device_bytes']:,} device bytes, "
                  f"{p.stats.phases['total']:.2f}s, identical {p.to_bytes() == ref[i]}",
                  flush=True)
    rng = random.Random(args.seed)
    mixes = [fault_mix(rng, args.faulted) for _ in range(args.proofs)]
    cfg = ProverConfig(backend="emu", postmortem_dir=pm_dir, **params(args))
    identical = wrong = failed = 0
    totals: dict = {}
    peak_max = 0
    secs: dict = {"clean": [], "faulted": []}
    t1 = time.perf_counter()
    with ProofService(cfg, concurrency=args.concurrency, budget=args.budget) as svc:
        futures = [svc.submit(blocks[i % len(blocks)], faults=m or "", xcheck=x)
                   for i, (m, x) in enumerate(mixes)]
        for i, f in enumerate(futures):
            try:
                proof = f.result()
            except Exception as exc:        # noqa: BLE001 -- counted, the soak goes on
                failed += 1
                print(f"proof {i}: FAILED {type(exc).__name__}: {exc}", flush=True)
                continue
            ok = proof.to_bytes() == ref[i % len(blocks)]
            identical += ok
            wrong += not ok
            rec = recoveries(proof.stats)
            for key, v in rec.items():
                totals[key] = totals.get(key, 0) + v
            dev = proof.stats.counters.get("device") or {}
            peak_max = max(peak_max, int(dev.get("peak_device_bytes") or 0))
            secs["faulted" if mixes[i][0] else "clean"].append(proof.stats.phases["total"])
            if args.verbose or not ok:
                print(f"proof {i}: block {i % len(blocks)} faults {mixes[i][0] or '-'} "
                      f"xcheck {int(mixes[i][1])} slot {proof.stats.counters['service']['slot']}"
                      f" {'identical' if ok else 'WRONG'} {rec} "
                      f"{proof.stats.phases['total']:.2f}s", flush=True)
        gate = svc.stats()["gate"]
    wall = time.perf_counter() - t1
    pms = len(os.listdir(pm_dir)) if os.path.isdir(pm_dir) else 0
    print(f"gate: budget {gate['budget']:,} B, {gate['concurrency']} slots of "
          f"{gate['share']:,} B, {gate['admitted']} admitted, at most {gate['max_in_flight']} "
          f"at once; largest per-proof device peak {peak_max:,} B; {wall:.1f}s wall "
          f"({wall / max(1, args.proofs):.2f}s per proof); {pms} post-mortems in {pm_dir}")
    print("\n".join(f"{k} proofs: {len(v)}, {sum(v) / len(v):.2f}s mean, {max(v):.2f}s max"
                    for k, v in secs.items() if v))
    print("recoveries: " + ", ".join(f"{k} {v}" for k, v in totals.items()))
    print(f"service: {args.proofs} proofs, {identical} identical, {wrong} wrong, "
          f"{failed} failed, {sum(totals.values())} faults recovered")
    return 0 if identical == args.proofs else 1


if __name__ == "__main__":
    sys.exit(main())
