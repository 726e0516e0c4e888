"""Fuzz the library verifier: N mutated copies of one honest block proof, or of its
statement, through ``steadfast.prover.api.verify(proof, block=)`` (docs/benchmarks.md,
"Verifier fuzzing").

    PYTHONPATH=. python bench/fuzz_verify.py N [--seed S] [--block PATH] [--json]
                                               [--case I] [--save-dir DIR]

One honest proof of the block (block format 2, a block of RISC-V transactions; default
examples/block.json, default parameters) is made in a subprocess (so that this process's
peak RSS is the verifier's own) and cached in the temporary directory under a key of the
code, the block (its canonical JSON) and the parameters; the honest proof must verify
before any mutation is tried.  Each case ``i`` is drawn from its own generator seeded with
(seed, i) -- ``--case I`` replays one case with its full traceback -- and mutates the whole
serialized block proof (b"STB2" header: version, reserved, transaction count, length;
the STARK proof), only the inner STARK proof (wrapped back into a TxBlockProof), or the
statement: the block the honest proof is verified against.  The catalogue
(bench/fuzz_mutations.py):

* bit flips (one, or several: scattered or a burst in one field);
* u32 overwrites with 0, p-1, p, p+1, 2^31, 2^32-1 at an element's own offset, at a
  4-byte-aligned offset of the buffer, and at an arbitrary (unaligned) offset;
* header fields (magic, version, reserved, the parameters, table count, section lengths,
  log_n, array ranks and dimensions, the nonces, the FRI layer count; the block proof's own
  header) set to boundary values, magics to another format's;
* truncations (random lengths, 0, len-1, at field boundaries), extensions (random bytes,
  zeros, a copy of a table section), insertions/deletions of a few bytes;
* two tables' sections swapped, or one table's section over another (across transactions
  too: every transaction has its own 16 tables);
* an opened row duplicated (every opened matrix's row copied over another row, or one array's);
* structure-aware re-encodings (decode with the library, change a parameter, a table's
  height, one array's shape (a table's or the FRI section's), the FRI layer list, the table
  list or a nonce, encode again):
  lengths stay consistent, so these get past the decoder to the shape checks and beyond;
* statements the proof does not prove: a transaction's input, program (a byte of a
  segment, the entry point, another transaction's program), claimed output (made to
  differ from the proof's) or claimed exit code changed, the block's max_cycles changed,
  transactions dropped, duplicated, appended, swapped, reversed or all removed.  The
  chain's state_in is left alone: the proof does not bind it (state_out is derived from
  it), so another state_in is a true statement.

Positions are biased towards the small areas that matter most: the header, the per-table
headers (section lengths, ranks, dimensions) and the caps / public values / OOD values /
FRI caps / final polynomial get most of the draws, the row and multiproof arrays the rest.
A draw that leaves the target unchanged is re-drawn.

Outcomes: **accepted** (verify returned: a forged proof or a false statement; the proof
bytes or the block JSON are saved to ``--save-dir`` for reproduction), **typed** rejection
(a ``steadfast.verifier.errors.VerificationError`` subclass: everything ``verify``
documents), **untyped** error (anything else, including a case past ``--hard-timeout``;
the mutation and the last traceback line are printed).  Cases slower than ``--slow``
seconds and cases that raise the process's peak RSS by more than ``--max-rss-growth`` MiB
are reported (the latter also fail the run).  The last line is exactly
``fuzz: N mutated, A accepted, U untyped errors``; the exit code is non-zero when A > 0,
U > 0 or a case allocated too much.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.fuzz_mutations import (P, U32_VALUES, _KIND_WEIGHTS, Field, Layout,  # noqa: E402,F401
                                  block_proof_layout, draw_case, proof_layout)

DEFAULT_BLOCK = os.path.join(ROOT, "examples", "block.json")
_CODE_DIRS = ("prover", "verifier", "air", "rv32", "kernels")


# --------------------------------------------------------------------------- honest proof

def _code_key(block_bytes: bytes, config: dict) -> str:
    """A key of the prover's and verifier's code, the block (its canonical JSON: ELFs and
    inputs inline, so a changed file it names changes the key) and the parameters."""
    h = hashlib.sha256()
    for d in _CODE_DIRS:
        for dirpath, dirnames, files in os.walk(os.path.join(ROOT, d)):
            dirnames[:] = sorted(x for x in dirnames if x != "__pycache__")
            for fn in sorted(files):
                if fn.endswith(".py"):
                    path = os.path.join(dirpath, fn)
                    h.update(os.path.relpath(path, ROOT).encode())
                    with open(path, "rb") as fh:
                        h.update(fh.read())
    h.update(block_bytes)
    h.update(json.dumps(config, sort_keys=True).encode())
    return h.hexdigest()[:24]


def _prove_to(block_path: str, out: str, config: dict) -> None:
    from steadfast.prover.api import Prover, ProverConfig
    proof = Prover(ProverConfig(backend="host", **config)).prove_block(block_path)
    tmp = f"{out}.{os.getpid()}.tmp"
    proof.save(tmp)
    os.replace(tmp, out)


def honest_proof(block_path: str, config: dict, log=print,
                 in_process: bool = False) -> tuple[bytes, str, bool]:
    """Honest TxBlockProof bytes (cached; proved on a miss, in a subprocess unless
    ``in_process``) -> (bytes, cache path, whether it came from the cache)."""
    from steadfast.rv32.blockfile import load_block
    block_bytes = json.dumps(load_block(block_path).to_json(), sort_keys=True).encode()
    cache_dir = os.path.join(tempfile.gettempdir(), "steadfast_fuzz_verify")
    os.makedirs(cache_dir, exist_ok=True)
    path = os.path.join(cache_dir, _code_key(block_bytes, config) + ".stb2")
    cached = os.path.exists(path)
    if not cached and in_process:
        log(f"proving the honest proof of {block_path} -> {path}")
        _prove_to(block_path, path, config)
    elif not cached:
        log(f"proving the honest proof of {block_path} (subprocess) -> {path}")
        env = dict(os.environ)
        env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
        subprocess.run([sys.executable, os.path.abspath(__file__), "--prove-to", path,
                        "--block", block_path, "--config", json.dumps(config)],
                       check=True, env=env, cwd=ROOT)
    with open(path, "rb") as fh:
        return fh.read(), path, cached


def honest_cases(raw: bytes, block, bp_layout=None, inner_off=None) -> dict:
    """What :func:`draw_case` mutates: the honest bytes, inner proof, layouts, the block
    and the proof's claims (every transaction's exit code and output)."""
    from steadfast.prover.blocks.proof import TxBlockProof
    honest = TxBlockProof.from_bytes(raw)
    if bp_layout is None:
        bp_layout, inner_off = block_proof_layout(raw)
    return {"bytes": raw, "proof": honest.proof, "bp_layout": bp_layout,
            "proof_layout": proof_layout(honest.proof), "inner_off": inner_off,
            "block": block, "claims": honest.claims}


# --------------------------------------------------------------------------- running

class _Hang(Exception):
    pass


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_case(verify, TxBlockProof, target: str, data, honest, block, hard_timeout: float,
             verify_kw: dict):
    """Run one case (``data``: the mutated block-proof bytes, inner proof bytes, or block;
    ``honest``: the honest TxBlockProof); returns (outcome, error class name or '', last
    traceback line, tb)."""
    from steadfast.verifier.errors import VerificationError
    use_alarm = (hard_timeout > 0 and threading.current_thread() is threading.main_thread()
                 and signal.getitimer(signal.ITIMER_REAL)[0] == 0)   # never clobber a timer

    def on_alarm(signum, frame):
        raise _Hang(f"no answer within {hard_timeout} s")
    old = signal.signal(signal.SIGALRM, on_alarm) if use_alarm else None
    try:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, hard_timeout)
        if target == "statement":
            obj, block = honest, data
        elif target == "proof":
            obj = TxBlockProof(honest.n_tx, data)
        else:
            obj = data
        verify(obj, block=block, **verify_kw)
        return "accepted", "", "", ""
    except VerificationError as exc:
        return "typed", type(exc).__name__, "", ""
    except BaseException as exc:            # noqa: BLE001 -- classifying is the point
        if isinstance(exc, KeyboardInterrupt):
            raise
        tb = traceback.format_exc()
        last = f"{type(exc).__name__}: {exc}"
        return "untyped", type(exc).__name__, last, tb
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)


def fuzz(n: int, seed: int = 0, block_path: str = DEFAULT_BLOCK, as_json: bool = False,
         save_dir: str | None = None, slow: float = 5.0, hard_timeout: float = 120.0,
         max_rss_growth_mib: float = 1024.0, config: dict | None = None,
         min_security_bits=None, cases=None, out=None,
         prove_in_process: bool = False) -> tuple[dict, int]:
    """Run the fuzzer; prints the report (last line: the result line) to ``out``; returns
    (summary, exit code)."""
    out = out or sys.stdout

    def log(*a):
        print(*a, file=out, flush=True)

    from steadfast.prover import api
    from steadfast.prover.blocks.proof import TxBlockProof
    from steadfast.rv32.blockfile import load_block

    def verify(*a, **kw):               # looked up per call (the tests replace it)
        return api.verify(*a, **kw)

    config = dict(config or {})
    block = load_block(block_path)
    verify_kw = {} if min_security_bits is None else {"min_security_bits": min_security_bits}
    for attempt in (0, 1):              # the honest proof must pass (a stale cache: re-prove)
        raw, cache_path, cached = honest_proof(block_path, config, log, prove_in_process)
        honest = TxBlockProof.from_bytes(raw)
        t = time.perf_counter()
        try:
            verify(raw, block=block, **verify_kw)
            verify(honest, block=block, **verify_kw)
            break
        except Exception as exc:
            os.remove(cache_path)
            if attempt:
                raise RuntimeError(f"the honest proof of {block_path} does not verify: "
                                   f"{type(exc).__name__}: {exc}") from exc
            log(f"the {'cached' if cached else 'new'} honest proof does not verify "
                f"({type(exc).__name__}: {exc}); proving again")
    honest_s = time.perf_counter() - t
    bp_layout, inner_off = block_proof_layout(raw)
    h = honest_cases(raw, block, bp_layout, inner_off)
    log(f"honest proof: {len(raw):,} bytes ({'cached' if cached else 'new'}: {cache_path}); "
        f"verify {honest_s / 2:.3f} s; seed {seed}")
    save_dir = save_dir or os.path.join(tempfile.gettempdir(), "steadfast_fuzz_verify", "found")
    indices = list(cases) if cases is not None else list(range(n))
    outcomes, kinds, errors = Counter(), Counter(), Counter()
    accepted, untyped, slow_cases, hogs = [], [], [], []
    rss0 = peak = _peak_rss()
    times = []
    t_all = time.perf_counter()
    for i in indices:
        target, kind, desc, data = draw_case(seed, i, h)
        before = _peak_rss()
        t0 = time.perf_counter()
        outcome, err, last, tb = run_case(verify, TxBlockProof, target, data, honest, block,
                                          hard_timeout, verify_kw)
        dt = time.perf_counter() - t0
        after = _peak_rss()
        times.append(dt)
        outcomes[outcome] += 1
        kinds[(kind, err or outcome)] += 1
        errors[err or outcome] += 1
        what = f"case {i} [{target}/{kind}] {desc}"
        if outcome == "accepted":
            os.makedirs(save_dir, exist_ok=True)
            path = os.path.join(save_dir, f"accepted_seed{seed}_case{i}")
            if target == "statement":
                path += ".json"
                with open(path, "w") as fh:
                    json.dump(data.to_json(), fh)
            else:
                path += ".stb2"
                blob = TxBlockProof(honest.n_tx, data).to_bytes() if target == "proof" else data
                with open(path, "wb") as fh:
                    fh.write(blob)
            accepted.append({"case": i, "target": target, "kind": kind, "mutation": desc,
                             "saved": path})
            log(f"ACCEPTED {what} -> saved {path}")
        elif outcome == "untyped":
            untyped.append({"case": i, "target": target, "kind": kind, "mutation": desc,
                            "error": last})
            log(f"UNTYPED {what}: {last}")
            if cases is not None:
                log(tb)
        if dt > slow:
            slow_cases.append({"case": i, "kind": kind, "mutation": desc, "seconds": round(dt, 2)})
            log(f"SLOW {what}: {dt:.1f} s")
        if after - before > max_rss_growth_mib * 2**20:
            hogs.append({"case": i, "kind": kind, "mutation": desc,
                         "peak_growth_mib": round((after - before) / 2**20, 1)})
            log(f"MEMORY {what}: peak RSS grew by {(after - before) / 2**20:.0f} MiB")
        peak = max(peak, after)
    wall = time.perf_counter() - t_all
    m = len(indices)
    summary = {
        "n": m, "seed": seed, "block": os.path.relpath(block_path, ROOT),
        "proof_bytes": len(raw), "honest_verify_s": round(honest_s / 2, 4),
        "accepted": len(accepted), "untyped": len(untyped), "typed": outcomes["typed"],
        "wall_s": round(wall, 1), "mean_case_s": round(wall / max(m, 1), 4),
        "max_case_s": round(max(times, default=0.0), 3),
        "peak_rss_mib": round(peak / 2**20, 1),
        "peak_rss_growth_mib": round((peak - rss0) / 2**20, 1),
        "errors": dict(sorted(errors.items())),
        "kinds": {f"{k}/{o}": c for (k, o), c in sorted(kinds.items())},
        "accepted_cases": accepted, "untyped_cases": untyped, "slow_cases": slow_cases,
        "memory_cases": hogs,
    }
    if as_json:
        log(json.dumps(summary, indent=1))
    else:
        log(f"{m} cases in {wall:.1f} s ({wall / max(m, 1) * 1e3:.1f} ms mean, "
            f"{summary['max_case_s']:.2f} s max); peak RSS {summary['peak_rss_mib']:.0f} MiB "
            f"(+{summary['peak_rss_growth_mib']:.0f} MiB while fuzzing); "
            f"{len(slow_cases)} over {slow:g} s")
        log("by mutation: " + ", ".join(
            f"{k} {sum(c for (kk, _), c in kinds.items() if kk == k)}" for k in _KIND_WEIGHTS))
        log("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(errors.items())))
    log(f"fuzz: {m} mutated, {len(accepted)} accepted, {len(untyped)} untyped errors")
    return summary, (1 if accepted or untyped or hogs else 0)


def main(argv=None, out=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int, nargs="?", default=1000, help="number of mutated cases")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--block", default=DEFAULT_BLOCK,
                    help="version-2 block JSON (default examples/block.json)")
    ap.add_argument("--json", action="store_true", help="the summary as JSON")
    ap.add_argument("--case", type=int, action="append",
                    help="replay only this case (repeatable; prints full tracebacks)")
    ap.add_argument("--save-dir", default=None, help="where accepted proofs are written")
    ap.add_argument("--slow", type=float, default=5.0, help="report cases slower than this (s)")
    ap.add_argument("--hard-timeout", type=float, default=120.0,
                    help="a case still running after this many seconds is an untyped error")
    ap.add_argument("--max-rss-growth", type=float, default=1024.0,
                    help="MiB a case may raise the peak RSS by before it fails the run")
    ap.add_argument("--min-security-bits", type=int, default=None,
                    help="passed to verify (default: the library's default)")
    ap.add_argument("--queries", type=int, default=None, help="honest proof: num_queries")
    ap.add_argument("--pow-bits", type=int, default=None, help="honest proof: pow_bits")
    ap.add_argument("--profile", default=None,
                    help="honest proof: a ProverConfig profile's parameters and layout "
                         "(fast, fastest, small, smallest; --queries / --pow-bits on top)")
    ap.add_argument("--prove-in-process", action="store_true",
                    help="prove the honest proof in this process (faster when the kernels are "
                         "loaded; the peak RSS then includes proving)")
    ap.add_argument("--prove-to", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--config", default="{}", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.prove_to:
        _prove_to(args.block, args.prove_to, json.loads(args.config))
        return 0
    if args.n < 0:
        ap.error("N must be >= 0")
    config = {}
    if args.profile is not None:
        from steadfast.prover.engine.config import PROFILES
        if args.profile not in PROFILES:
            ap.error(f"--profile: one of {', '.join(PROFILES)}, not {args.profile!r}")
        config.update(PROFILES[args.profile])
    if args.queries is not None:
        config["num_queries"] = args.queries
    if args.pow_bits is not None:
        config["pow_bits"] = args.pow_bits
    _, rc = fuzz(args.n, args.seed, os.path.abspath(args.block), args.json, args.save_dir,
                 args.slow, args.hard_timeout, args.max_rss_growth, config,
                 args.min_security_bits, args.case, out, args.prove_in_process)
    return rc


if __name__ == "__main__":
    sys.exit(main())
