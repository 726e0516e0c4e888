"""Proof size and verify time against prover time, by protocol parameters (issue #38 item
2; docs/benchmarks.md "Proof size and verify time: the trades").

    .venv/bin/python bench/params_trade.py                   # model grid + measured sets
    .venv/bin/python bench/params_trade.py --model-only      # the grid from the probes only
    .venv/bin/python bench/params_trade.py --rounds 2 --sets default small fast
    .venv/bin/python bench/params_trade.py --workloads program --json /tmp/trade.json

The two workloads of issue #38: ``program`` -- guests/bin/sha256.elf on 13,056 bytes
(``realworld_bench.pattern``: 1,045,003 cycles, just under 2^20, so one proof; max_cycles
2^24) -- and ``block`` -- ``bench/make_block.py -k 18`` (``make_block.v2_block(18, 0.25)``,
seed 1: 262,138 cycles, 50 tables).

Three parts, each in fresh subprocesses on the host backend:

1. **Probes**: one proof per workload at log_blowup 1 and 2 (``--probe-queries``
   queries; the AIRs, hence the widths, are the same at every log_blowup >= 2: air/builder.py
   ``logup_degree_cap``).  From a probe's decoded proof the size model takes the
   query-independent bytes (headers, public values, OOD values, nonces, the final
   polynomial) and the tables' heights and committed widths.
2. **The grid** (the model; seconds): for every (log_blowup 1..4, pow_bits, FRI arity,
   cap height) the fewest queries giving >= ``--bits`` conjectured bits by
   ``verifier.security.proof_security`` over the workload's AIRs and heights (the
   project's own security report, unchanged), and the expected proof bytes: the probe's
   query-independent bytes plus, for ``--draws`` random query sets, the opened rows,
   the three mixed trees' multiproofs and caps, the FRI layers' values, multiproofs and
   caps counted exactly (kernels/multiproof.py; as bench/compact_bench.py's ``--model``).
   The final polynomial's length is not a lever for these shapes: h_final =
   min(log_final_poly_len, min_t log n_t) + log_blowup and both workloads have 2-row
   tables (docs/protocol.md section 3 step 4).
3. **Measured sets** (``--sets``, names of ``SETS`` or ``lb,q,pow,log_arity,log_cap``):
   per round, each set in turn (A B C A B C: alternating), one fresh process per proof,
   after an untimed small proof (numba's cache loaded outside the figures): the prove
   call (``proof.stats.phases["prove"]`` and the whole call's wall time), the proof's
   bytes and conjectured bits; then, in another fresh process per proof, the in-process
   verify: the first call (``verify_program`` / ``verify_txblock`` of the bytes: AIR
   construction included) and the median of ``--verify-reps`` further calls.  Medians
   over rounds are reported with the load average (``os.getloadavg``) before and after.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SHA256_ELF = os.path.join(ROOT, "guests", "bin", "sha256.elf")
PROGRAM_INPUT_BYTES = 13056          # 204 blocks of 64 bytes: 1,045,003 cycles (< 2^20)
MAX_CYCLES = 1 << 24
BLOCK_K = 18

# named parameter sets: (log_blowup, num_queries, pow_bits, log_fri_arity, log_cap)
# + optional extra ProverConfig fields
SETS = {
    "default": dict(log_blowup=2, num_queries=50, pow_bits=16, log_fri_arity=3, log_cap=0),
}


def parse_set(text: str) -> dict:
    if text in SETS:
        return dict(SETS[text])
    try:
        from steadfast.prover.engine.config import PROFILES
    except ImportError:                   # before the profiles exist
        PROFILES = {}
    if text in PROFILES:
        return dict(PROFILES[text])
    lb, q, pw, la, lc = (int(x) for x in text.split(","))
    return dict(log_blowup=lb, num_queries=q, pow_bits=pw, log_fri_arity=la, log_cap=lc)


def set_name(kw: dict) -> str:
    return (f"{kw['log_blowup']},{kw['num_queries']},{kw['pow_bits']},"
            f"{kw['log_fri_arity']},{kw['log_cap']}")


# --------------------------------------------------------------------------- workloads

def program_case():
    from steadfast import rv32
    from bench.realworld_bench import pattern
    return rv32.load_elf(SHA256_ELF), pattern(PROGRAM_INPUT_BYTES)


def block_case():
    from bench.make_block import v2_block
    from steadfast.rv32.blockfile import parse_block
    return parse_block(v2_block(BLOCK_K, 0.25)[0])


def shapes(workload: str, log_blowup: int):
    """(AIRs, log_ns) of the workload's proof at ``log_blowup``."""
    from steadfast.rv32.run import execute
    if workload == "program":
        from steadfast.rv32.traces import build_traces
        prog, data = program_case()
        ex = execute(prog, data, MAX_CYCLES, record=True)
        tr = build_traces(prog, ex, MAX_CYCLES, log_blowup=log_blowup)
        airs, traces = tr.airs, tr.traces
    else:
        from steadfast.rv32.block import build_block_traces
        blk = block_case()
        exs = [execute(t.program, t.input, blk.max_cycles, record=True)
               for t in blk.transactions]
        bt = build_block_traces([t.program for t in blk.transactions], exs, blk.max_cycles,
                                log_blowup)
        airs, traces = bt.airs, bt.traces
    return list(airs), [int(t.shape[0]).bit_length() - 1 for t in traces]


def small_warmup(prover, workload: str) -> None:
    """An untimed small proof of the same kind: numba's kernels loaded."""
    from steadfast import rv32
    if workload == "program":
        prover.prove_program(rv32.load_elf(SHA256_ELF), bytes(64), max_cycles=1 << 16)
    else:
        from bench.compact_bench import tiny_block
        prover.prove_block(tiny_block())


# --------------------------------------------------------------------------- workers

def prove_worker(workload: str, kw: dict, out: str) -> dict:
    """One proof in this (fresh) process -> its figures; the proof's bytes to ``out``."""
    from steadfast.prover.api import Prover, ProverConfig
    prover = Prover(ProverConfig(backend="host", self_check=False, **kw))
    small_warmup(prover, workload)
    load0 = os.getloadavg()[0]
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter()
    if workload == "program":
        prog, data = program_case()
        proof = prover.prove_program(prog, data, max_cycles=MAX_CYCLES)
    else:
        proof = prover.prove_block(block_case())
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    blob = proof.to_bytes()
    with open(out, "wb") as fh:
        fh.write(blob)
    ph = proof.stats.phases
    return {"workload": workload, "set": set_name(kw), "file_bytes": len(blob),
            "proof_bytes": len(proof.proof), "prove_s": round(ph.get("prove", wall), 3),
            "wall_s": round(wall, 3), "cycles": int(proof.stats.cycles),
            "cpu_s": round(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, 2),
            "peak_rss_mib": round(r1.ru_maxrss / 1024),
            "phases": {k: round(v, 3) for k, v in ph.items()},
            "load": [round(load0, 2), round(os.getloadavg()[0], 2)]}


def verify_worker(workload: str, path: str, reps: int, profile: bool = False) -> dict:
    """Verify the proof file ``path`` in this (fresh) process: the first call (AIRs built
    in it) and the median of ``reps`` more."""
    with open(path, "rb") as fh:
        blob = fh.read()
    if workload == "program":
        from steadfast.prover.programs.verify import verify_program
        prog, data = program_case()

        def call():
            return verify_program(blob, prog, data)
    else:
        from steadfast.prover.blocks.proof import verify_txblock
        blk = block_case()

        def call():
            return verify_txblock(blob, blk)
    t = time.perf_counter()
    res = call()
    first = time.perf_counter() - t
    warm = []
    for _ in range(reps):
        t = time.perf_counter()
        call()
        warm.append(time.perf_counter() - t)
    out = {"first_ms": round(first * 1e3, 2), "warm_ms": round(statistics.median(warm) * 1e3, 2),
           "warm_all_ms": [round(w * 1e3, 2) for w in warm],
           "security_bits": int(getattr(res, "security_bits", 0) or 0)}
    if profile:
        import cProfile
        import io
        import pstats
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(5):
            call()
        pr.disable()
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(45)
        out["profile_cumulative"] = s.getvalue()
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(30)
        out["profile_tottime"] = s.getvalue()
    return out


def _sub(args: list, timeout: float = 1800) -> dict:
    res = subprocess.run([sys.executable, os.path.abspath(__file__)] + args,
                         capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    if res.returncode:
        raise RuntimeError(f"{args}: {res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- the model

def inner_proof(workload: str, blob: bytes) -> bytes:
    if workload == "program":
        from steadfast.prover.programs.proof import ProgramProof
        return ProgramProof.from_bytes(blob).proof
    from steadfast.prover.blocks.proof import TxBlockProof
    return TxBlockProof.from_bytes(blob).proof


def breakdown(workload: str, blob: bytes) -> dict:
    """Where a proof's bytes go (elements x 4, array headers in "other")."""
    from steadfast.verifier.proof_format import decode
    d = decode(inner_proof(workload, blob))
    b = {"rows": 0, "ood": 0, "tree_nodes": 0, "tree_caps": 0, "fri_values": 0,
         "fri_nodes": 0, "fri_caps": 0}
    for t in d.tables:
        b["rows"] += 4 * (t.main_rows.size + t.aux_rows.size + t.parts_rows.size)
        b["ood"] += 4 * (t.ood_main.size + t.ood_main_next.size + t.ood_aux.size
                         + t.ood_aux_next.size + t.ood_parts.size)
    c = d.commits
    b["tree_nodes"] = 4 * (c.main_nodes.size + c.aux_nodes.size + c.parts_nodes.size)
    b["tree_caps"] = 4 * (c.main_cap.size + c.aux_cap.size + c.parts_cap.size)
    b["fri_values"] = 4 * sum(v.size for v in d.fri.values)
    b["fri_nodes"] = 4 * sum(n.size for n in d.fri.nodes)
    b["fri_caps"] = 4 * sum(x.size for x in d.fri.caps)
    b["other"] = len(blob) - sum(b.values())
    b["total"] = len(blob)
    b["layers"] = d.fri.num_layers
    return b


class SizeModel:
    """Expected file bytes of a workload's proof for any (lb, q, arity, cap) from one
    probe proof of the same AIR widths (module docstring, part 2)."""

    def __init__(self, workload: str, blob: bytes):
        from steadfast.verifier.proof_format import decode
        d = decode(inner_proof(workload, blob))
        var = 0
        for t in d.tables:
            for a in (t.main_rows, t.aux_rows, t.parts_rows):
                var += a.size * 4
        c = d.commits
        for a in (c.main_nodes, c.aux_nodes, c.parts_nodes, c.main_cap, c.aux_cap, c.parts_cap):
            var += a.size * 4
        for a in d.fri.caps + d.fri.values + d.fri.nodes:
            var += a.size * 4 + 9                          # elements + array header
        var += 4 * d.fri.num_layers                        # fold nonces
        self.fixed = len(blob) - var
        self.widths = [(t.log_n, t.main_rows.shape[1], t.aux_rows.shape[1] if t.has_aux else 0,
                        t.parts_rows.shape[1]) for t in d.tables]
        self.ood = [t.ood_main.size + t.ood_main_next.size + t.ood_aux.size
                    + t.ood_aux_next.size + t.ood_parts.size for t in d.tables]
        self.lfp = d.params.log_final_poly_len

    def with_airs(self, airs, log_ns) -> "SizeModel":
        """The model for the same tables with these AIRs (another log_blowup's: the slots,
        hence the widths, may differ): the widths from the AIRs, the OOD values' bytes
        adjusted."""
        import copy
        m = copy.copy(self)
        assert len(airs) == len(self.widths)
        m.widths = [(ln, a.main_width, 4 * a.aux_width, 4 * a.num_parts)
                    for a, ln in zip(airs, log_ns)]
        m.ood = [4 * (a.main_width * (2 if a.uses_next_main else 1)
                      + (8 * a.aux_width if a.aux_width else 0) + 4 * a.num_parts)
                 for a in airs]
        m.fixed = self.fixed + 4 * (sum(m.ood) - sum(self.ood))
        return m

    def size(self, lb: int, q: int, la: int, lc: int, draws: int = 24, seed: int = 0):
        import numpy as np
        from steadfast.kernels.mmcs import mixed_cap_height
        from steadfast.kernels.multiproof import multiproof_count
        from steadfast.verifier.proof_format import Params
        from steadfast.verifier.protocol import fri_layer_heights
        rng = np.random.default_rng(seed)
        hs_t = [ln + lb for ln, _, _, _ in self.widths]
        hs = fri_layer_heights(Params(log_blowup=lb, log_final_poly_len=self.lfp,
                                      log_fri_arity=la), [w[0] for w in self.widths])
        out = []
        for _ in range(draws):
            s = rng.integers(0, 1 << hs[0], q)
            b = self.fixed
            for (ln, w, a, p), h in zip(self.widths, hs_t):       # the opened rows
                b += 4 * np.unique(s >> (hs[0] - h)).size * (w + a + p)
            for kind in (1, 2, 3):                                # one mixed tree per kind
                hk = [h for (wd, h) in zip(self.widths, hs_t) if wd[kind]]
                if hk:
                    ck = mixed_cap_height(hk, lc)
                    top = np.unique(s >> (hs[0] - max(hk)))
                    b += 32 * (multiproof_count(top, max(hk), ck) + (1 << ck))
            for h, hn in zip(hs, hs[1:]):                          # the FRI layers
                k = h - hn
                pos = np.unique(s >> (hs[0] - h))
                leaves = np.unique(pos >> k)
                b += 4 * (4 * (leaves.size * (1 << k) - pos.size)
                          + 8 * multiproof_count(leaves, hn, min(lc, hn))
                          + 8 * (1 << min(lc, hn))) + 27 + 4
            out.append(b)
        return float(np.mean(out)), float(np.std(out))


def min_queries(params_kw: dict, airs, log_ns, bits: int):
    """The fewest queries giving >= ``bits`` (None if no number of queries does)."""
    from steadfast.verifier.proof_format import Params
    from steadfast.verifier.security import proof_security
    lo, hi = 1, 1000
    if proof_security(Params(num_queries=hi, **params_kw), airs, log_ns).bits < bits:
        return None, None
    while lo < hi:
        mid = (lo + hi) // 2
        if proof_security(Params(num_queries=mid, **params_kw), airs, log_ns).bits >= bits:
            hi = mid
        else:
            lo = mid + 1
    rep = proof_security(Params(num_queries=lo, **params_kw), airs, log_ns)
    return lo, rep


def security_of(kw: dict, airs, log_ns):
    from steadfast.verifier.proof_format import Params
    from steadfast.verifier.security import proof_security
    fields = {k: v for k, v in kw.items() if k in Params.__dataclass_fields__}
    return proof_security(Params(**fields), airs, log_ns)


def grid(workload: str, models: dict, bits: int, pows, arities, caps, draws: int,
         grind_variants, blowups=(1, 2, 3, 4)) -> list:
    """The model grid (module docstring, part 2)."""
    rows = []
    for lb in blowups:
        airs, log_ns = shapes(workload, lb)
        model = models[1 if lb == 1 else 2].with_airs(airs, log_ns)
        for gv in grind_variants:
            for pw in pows:
                for la in arities:
                    kw = dict(log_blowup=lb, pow_bits=pw, log_fri_arity=la, **gv)
                    q, rep = min_queries(kw, airs, log_ns, bits)
                    if q is None:
                        continue
                    for lc in caps:
                        mean, sd = model.size(lb, q, la, lc, draws)
                        rows.append({"workload": workload, "log_blowup": lb, "num_queries": q,
                                     "pow_bits": pw, "log_fri_arity": la, "log_cap": lc,
                                     **gv, "bits": rep.bits, "limiting": rep.limiting,
                                     "model_kb": round(mean / 1000, 1),
                                     "model_sd_kb": round(sd / 1000, 1)})
    return rows


# --------------------------------------------------------------------------- main

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", nargs="+", default=["program", "block"],
                    choices=["program", "block"])
    ap.add_argument("--bits", type=int, default=100, help="conjectured bits to reach")
    ap.add_argument("--probe-queries", type=int, default=50)
    ap.add_argument("--pows", type=int, nargs="+", default=[0, 8, 16, 20, 22, 24])
    ap.add_argument("--arities", type=int, nargs="+", default=[1, 2, 3, 4],
                    help="log2 FRI arities")
    ap.add_argument("--caps", type=int, nargs="+", default=[0, 2, 4])
    ap.add_argument("--blowups", type=int, nargs="+", default=[1, 2, 3, 4],
                    help="log_blowups of the grid")
    ap.add_argument("--draws", type=int, default=24)
    ap.add_argument("--sets", nargs="*", default=["default"],
                    help="measured sets: names or lb,q,pow,log_arity,log_cap")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--verify-reps", type=int, default=7)
    ap.add_argument("--model-only", action="store_true")
    ap.add_argument("--no-model", action="store_true")
    ap.add_argument("--profile-verify", action="store_true",
                    help="cProfile five warm verifies of each workload's first set's proof")
    ap.add_argument("--dir", default=None, help="where proofs go (default: a temp dir)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--prove-worker", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--verify-worker", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.prove_worker:
        w, kw, out = args.prove_worker
        print(json.dumps(prove_worker(w, json.loads(kw), out)))
        return 0
    if args.verify_worker:
        w, path, reps = args.verify_worker
        prof = reps.endswith("p")
        print(json.dumps(verify_worker(w, path, int(reps.rstrip("p")), prof)))
        return 0
    import subprocess as _sp
    tree = _sp.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                   text=True).stdout.strip()
    d = args.dir or tempfile.mkdtemp(prefix="params_trade.")
    os.makedirs(d, exist_ok=True)
    report = {"tree": tree, "load_start": os.getloadavg(), "started": time.strftime("%F %T"),
              "argv": sys.argv[1:], "probes": [], "grid": [], "measured": [], "verify": []}
    print(f"tree {tree}; load {report['load_start']}; proofs in {d}", flush=True)

    if not args.no_model:
        for w in args.workloads:
            models = {}
            for lb in (1, 2):
                q = 100 if lb == 1 else args.probe_queries
                kw = dict(log_blowup=lb, num_queries=q, pow_bits=16, log_fri_arity=3, log_cap=0)
                path = os.path.join(d, f"probe-{w}-{lb}.proof")
                if os.path.exists(path):
                    r = {"workload": w, "set": set_name(kw), "reused": True}
                else:
                    r = _sub(["--prove-worker", w, json.dumps(kw), path])
                with open(path, "rb") as fh:
                    blob = fh.read()
                models[lb] = SizeModel(w, blob)
                r["breakdown"] = breakdown(w, blob)
                r["model_own_kb"] = round(models[lb].size(lb, q, 3, 0, args.draws)[0] / 1000, 1)
                report["probes"].append(r)
                print(json.dumps(r), flush=True)
            g = grid(w, models, args.bits, args.pows, args.arities, args.caps, args.draws,
                     [{}], args.blowups)
            report["grid"] += g
            print(f"| {w} | lb | q | pow | log arity | log cap | bits | limiting | model KB |")
            for r in sorted(g, key=lambda r: r["model_kb"]):
                print(f"| {w} | {r['log_blowup']} | {r['num_queries']} | {r['pow_bits']} | "
                      f"{r['log_fri_arity']} | {r['log_cap']} | {r['bits']} | {r['limiting']} | "
                      f"{r['model_kb']} (sd {r['model_sd_kb']}) |", flush=True)

    if not args.model_only and args.sets:
        sets = [parse_set(s) for s in args.sets]
        for rnd in range(args.rounds):
            for w in args.workloads:
                for name, kw in zip(args.sets, sets):
                    path = os.path.join(d, f"{w}-{name.replace(',', '_')}-{rnd}.proof")
                    r = _sub(["--prove-worker", w, json.dumps(kw), path])
                    r.update(name=name, round=rnd, path=path)
                    airs, log_ns = shapes(w, kw["log_blowup"])
                    sec = security_of(kw, airs, log_ns)
                    r["bits"], r["limiting"] = sec.bits, sec.limiting
                    report["measured"].append(r)
                    print(json.dumps({k: v for k, v in r.items() if k != "phases"}), flush=True)
        for w in args.workloads:
            for i, name in enumerate(args.sets):
                path = os.path.join(d, f"{w}-{name.replace(',', '_')}-0.proof")
                reps = f"{args.verify_reps}{'p' if args.profile_verify and i == 0 else ''}"
                v = _sub(["--verify-worker", w, path, reps])
                with open(path, "rb") as fh:
                    v["breakdown"] = breakdown(w, fh.read())
                v.update(workload=w, name=name)
                prof = {k: v.pop(k) for k in ("profile_cumulative", "profile_tottime") if k in v}
                report["verify"].append(dict(v, **prof))
                print(json.dumps(v), flush=True)
                for k, text in prof.items():
                    print(f"--- {w} {name} {k}\n{text}", flush=True)
        print("| workload | set | bits | proof bytes | prove s (median; each round) | CPU s "
              "(median) | peak RSS MiB | verify first ms | verify warm ms |")
        for w in args.workloads:
            for name in args.sets:
                ms = [r for r in report["measured"] if r["workload"] == w and r["name"] == name]
                v = next(x for x in report["verify"] if x["workload"] == w and x["name"] == name)
                print(f"| {w} | {name} ({ms[0]['set']}) | {ms[0]['bits']} | "
                      f"{ms[0]['file_bytes']:,} | "
                      f"{statistics.median(r['prove_s'] for r in ms):.2f} "
                      f"({', '.join('%.2f' % r['prove_s'] for r in ms)}) | "
                      f"{statistics.median(r['cpu_s'] for r in ms):.1f} | "
                      f"{max(r['peak_rss_mib'] for r in ms)} | {v['first_ms']} | "
                      f"{v['warm_ms']} |")
    report["load_end"] = os.getloadavg()
    report["ended"] = time.strftime("%F %T")
    print(f"load at the end {report['load_end']}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
