"""The command line: ``prove BLOCK.json`` and ``verify PROOF``.

Exit status (documented in docs/api.md and in ``--help``):

* 0 -- success (the proof was written / the proof is valid);
* 1 -- the block cannot be proven (execution fails, its claims are false, a trace breaks
  a constraint) or the proof is invalid; the reason is printed;
* 2 -- bad usage or unreadable input (a missing file, a malformed block -- with the JSON
  path of the bad field -- an unusable option, an unwritable output);
* 3 -- an internal error (a bug: please report the message);
* 4 -- ``prove`` only: the finished proof failed the prover's self-check (the verifier's
  own code, on by default), or PROVER_GPU_XCHECK caught device corruption; a post-mortem
  was written, no proof;
* 130 -- interrupted.

``verify`` refuses proofs whose parameters give fewer conjectured security bits than
``--min-security-bits`` (default :data:`DEFAULT_MIN_SECURITY_BITS`; the prover's defaults
give 116): exit 1, before any hashing.  ``--min-security-bits 0`` accepts any parameters.

No Python traceback ever reaches the terminal; ``-v`` adds detail, ``-q`` keeps only errors.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_INTERNAL, EXIT_XCHECK, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130
DEFAULT_MIN_SECURITY_BITS = 100    # conjectured bits (docs/protocol.md section 7; = the library's)

_EPILOG = ("exit status: 0 success; 1 unprovable block or invalid proof (with the reason); "
           "2 bad usage or unreadable input (a malformed block names the JSON path of the bad "
           "field); 3 internal error; 4 the proof failed the self-check or PROVER_GPU_XCHECK "
           "caught device corruption (a post-mortem was written, no proof)")


class _Fail(Exception):
    def __init__(self, code: int, message: str):
        self.code = code
        super().__init__(message)


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so every exit goes through one place."""

    def error(self, message):
        raise _Fail(EXIT_USAGE, f"{message} (see --help)")


def _err(msg: str) -> None:
    sys.stderr.write(f"error: {msg}\n")
    sys.stderr.flush()


# --------------------------------------------------------------------------- progress

class _Progress:
    """Per-table, per-stage progress: a live display when stderr is a terminal, plain log
    lines otherwise (nothing with -q)."""

    def __init__(self, live: bool, stream=None):
        self.live = live
        self.stream = stream if stream is not None else sys.stderr
        self.t0 = time.perf_counter()
        self.state: dict = {}              # row -> (stage, started or None, seconds)
        self.order: list = []
        self.drawn = 0
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker = None
        if live:
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()

    def __call__(self, table, stage, event, seconds):
        row = table or "block"
        stage = "all stages" if stage == "table" else stage
        with self.lock:
            if row not in self.state:
                self.order.append(row)
            if event == "start":
                self.state[row] = (stage, time.perf_counter(), 0.0)
            else:
                self.state[row] = (stage, None, seconds)
                if not self.live:
                    self.stream.write(f"[{time.perf_counter() - self.t0:8.2f}s] {row:<10} "
                                      f"{stage:<12} {seconds:7.2f}s\n")
                    self.stream.flush()
            if self.live:
                self._draw()

    def _draw(self):
        now = time.perf_counter()
        out = []
        if self.drawn:
            out.append(f"\x1b[{self.drawn}F")
        for row in self.order:
            stage, started, secs = self.state[row]
            if started is not None:
                status = f"{stage:<12} running {now - started:6.1f}s"
            else:
                status = f"{stage:<12} done    {secs:6.2f}s"
            out.append(f"\x1b[2K  {row:<10} {status}\n")
        out.append(f"\x1b[2K  elapsed {now - self.t0:.1f}s\n")
        self.drawn = len(self.order) + 1
        self.stream.write("".join(out))
        self.stream.flush()

    def _tick(self):
        while not self._stop.wait(0.25):
            with self.lock:
                if self.order:
                    self._draw()

    def close(self):
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()


# --------------------------------------------------------------------------- prove

def _prove_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="prove", description="Prove a Steadfast block (docs/api.md).",
                 epilog=_EPILOG)
    ap.add_argument("block", help="the block JSON file (docs/block-format.md)")
    ap.add_argument("-o", "--output", help="proof file (default: beside the block, .proof)")
    ap.add_argument("--backend", default=os.environ.get("PROVER_BACKEND", "auto"),
                    help="host, cuda, sim, emu or auto (default: $PROVER_BACKEND or auto)")
    ap.add_argument("--vram-budget", default=os.environ.get("PROVER_VRAM_BUDGET"),
                    help="device memory the prover may use, e.g. 6GiB")
    ap.add_argument("--log-blowup", type=int, default=1)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--pow-bits", type=int, default=16)
    ap.add_argument("--threads", type=int, default=None, help="host threads (numba)")
    ap.add_argument("--no-self-check", action="store_true",
                    help="do not verify the proof before writing it (saves a few percent; a "
                         "device fault that PROVER_GPU_XCHECK is not on to catch could then "
                         "write a wrong proof)")
    ap.add_argument("--check", action="store_true",
                    help="run the AIR check mode on every table before proving (names the "
                         "table, constraint and row of a violation; slower)")
    ap.add_argument("--precompile", action="store_true",
                    help="compile the device kernels BLOCK needs for the backend (into the kernel "
                         "cache, PROVER_KERNEL_CACHE), print what and how long, and exit")
    ap.add_argument("--stats-json", metavar="FILE", help="write the proof statistics as JSON")
    ap.add_argument("--timeline", metavar="FILE",
                    help="write a Chrome/Perfetto trace of every table's stages (device backends)")
    ap.add_argument("--postmortem-dir", metavar="DIR", default=".",
                    help="where PROVER_GPU_XCHECK writes post-mortems (default: .)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    g.add_argument("-v", "--verbose", action="store_true", help="more detail")
    return ap


def _default_output(block_path: str) -> str:
    root, ext = os.path.splitext(block_path)
    return (root if ext.lower() == ".json" else block_path) + ".proof"


def _precompile(prover, block, quiet: bool) -> int:
    """``prove --precompile``: compile the block's kernels, one line per step, then a total."""
    from .api import UnprovableBlock
    t0 = time.perf_counter()

    def show(row):
        if not quiet:
            print(f"  {row['name']:<64} {row['how']:<9} {row['seconds']:8.2f}s", flush=True)
    if not quiet:
        print(f"precompiling for backend {prover.backend}", flush=True)
    try:
        rows = prover.precompile(block, progress=show)
    except UnprovableBlock as exc:
        raise _Fail(EXIT_INVALID, f"block cannot be proven: {exc}") from None
    how = {}
    for r in rows:
        how[r["how"]] = how.get(r["how"], 0) + 1
    if not quiet:
        from steadfast.kernels.kernel_cache import cache_dir
        parts = ", ".join(f"{n} {h}" for h, n in sorted(how.items())) or "nothing to compile"
        where = (cache_dir() or "disabled") if rows else "not used"
        print(f"precompiled {len(rows)} steps ({parts}) in {time.perf_counter() - t0:.1f}s; "
              f"kernel cache {where}")
    return EXIT_OK


def _run_prove(argv) -> int:
    args = _prove_parser().parse_args(argv)
    from steadfast.vm.block import BlockError, load_block
    from .api import ConfigError, Prover, ProverConfig, UnprovableBlock

    out = args.output or _default_output(args.block)
    try:
        block = load_block(args.block)
    except OSError as exc:
        raise _Fail(EXIT_USAGE, f"cannot read {args.block}: {exc.strerror or exc}") from None
    except BlockError as exc:
        raise _Fail(EXIT_USAGE, f"{args.block}: {exc}") from None
    cfg = ProverConfig(backend=args.backend, vram_budget=args.vram_budget,
                       log_blowup=args.log_blowup, num_queries=args.queries,
                       pow_bits=args.pow_bits, threads=args.threads, check=args.check,
                       postmortem_dir=args.postmortem_dir,
                       self_check=not args.no_self_check)
    progress = None if args.quiet else _Progress(sys.stderr.isatty())
    timeline = None
    if args.timeline:
        from .timeline import Timeline
        timeline = Timeline()
    try:
        prover = Prover(cfg, progress=progress, timeline=timeline)
    except ConfigError as exc:
        raise _Fail(EXIT_USAGE, str(exc)) from None
    if args.precompile:
        return _precompile(prover, block, args.quiet)
    out_dir = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(out_dir):
        raise _Fail(EXIT_USAGE, f"cannot write {out}: no directory {out_dir}")
    if not args.quiet:
        print(f"proving {args.block}: {len(block.transactions)} transactions, "
              f"{len(block.programs)} programs, memory {block.memory_size} cells, "
              f"backend {prover.backend}", file=sys.stderr)
    from .api import ProofSelfCheckFailure
    from .xcheck import XcheckFailure
    try:
        proof = prover.prove_block(block)
    except UnprovableBlock as exc:
        lines = [f"block cannot be proven: {exc}"] + [f"  {d}" for d in exc.details]
        raise _Fail(EXIT_INVALID, "\n".join(lines)) from None
    except XcheckFailure as exc:
        raise _Fail(EXIT_XCHECK, f"{exc}; no proof written") from None
    except ProofSelfCheckFailure as exc:
        raise _Fail(EXIT_XCHECK, f"{exc}; no proof written") from None
    finally:
        if progress is not None:
            progress.close()
        if timeline is not None:
            try:
                timeline.write(args.timeline)
            except OSError as exc:
                _err(f"cannot write the timeline {args.timeline}: {exc.strerror or exc}")
    try:
        data = proof.to_bytes()
        with open(out, "wb") as fh:
            fh.write(data)
        if args.stats_json:
            with open(args.stats_json, "w") as fh:
                json.dump(dict(proof.stats.to_json(), block=args.block, proof=out,
                               proof_file_bytes=len(data)), fh, indent=1)
    except OSError as exc:
        raise _Fail(EXIT_USAGE, f"cannot write {exc.filename or out}: {exc.strerror or exc}") from None
    st = proof.stats
    if not args.quiet:
        total = st.phases.get("total", 0.0)
        print(f"wrote {out}: {len(data):,} bytes; {st.cycles:,} cycles in {total:.2f}s "
              f"({st.cycles / total if total else 0:,.0f} cycles/s)")
        print(st.summary())
        if args.verbose:
            print("phases: " + ", ".join(f"{k} {v:.2f}s" for k, v in st.phases.items()))
            for t in st.tables:
                print(f"  {t.name:<10} " + ", ".join(f"{k} {v:.2f}s" for k, v in t.seconds.items()))
            flat = {k: v for k, v in st.counters.items() if not isinstance(v, dict)}
            if flat:
                print("counters: " + ", ".join(f"{k}={v}" for k, v in flat.items()))
            dev = st.counters.get("device")
            if dev:
                rec = dev.get("recovery", {})
                retries = sum(r.get("retries", 0) for r in rec.values())
                downgrades = sum(r.get("downgrades", 0) for r in rec.values())
                print(f"device {dev.get('backend')}: peak {dev.get('peak_device_bytes', 0):,} B, "
                      f"spilled {dev.get('spilled_bytes', 0):,} B, {retries} retries, "
                      f"{downgrades} downgrades")
            print(f"peak RSS {st.peak_rss_bytes / 2**20:.0f} MiB")
    return EXIT_OK


# --------------------------------------------------------------------------- verify

def _verify_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="verify", description="Verify a Steadfast block proof (docs/api.md).",
                 epilog=_EPILOG)
    ap.add_argument("proof", help="the proof file written by prove")
    ap.add_argument("--block", help="also check the proof's public values against this block")
    ap.add_argument("--min-security-bits", type=int, default=DEFAULT_MIN_SECURITY_BITS,
                    metavar="N",
                    help="refuse proofs whose parameters give fewer conjectured security "
                         "bits (log_blowup * queries + pow_bits; default "
                         f"{DEFAULT_MIN_SECURITY_BITS}; 0 accepts any parameters)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    g.add_argument("-v", "--verbose", action="store_true", help="more detail")
    return ap


def _run_verify(argv) -> int:
    args = _verify_parser().parse_args(argv)
    if args.min_security_bits < 0:
        raise _Fail(EXIT_USAGE, f"--min-security-bits must be >= 0, got {args.min_security_bits}")
    from steadfast.verifier.errors import ParameterError, VerificationError
    from steadfast.vm.block import BlockError, load_block
    from steadfast.vm.statement import PV_NAMES
    from .api import verify

    try:
        with open(args.proof, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise _Fail(EXIT_USAGE, f"cannot read {args.proof}: {exc.strerror or exc}") from None
    block = None
    if args.block:
        try:
            block = load_block(args.block)
        except OSError as exc:
            raise _Fail(EXIT_USAGE, f"cannot read {args.block}: {exc.strerror or exc}") from None
        except BlockError as exc:
            raise _Fail(EXIT_USAGE, f"{args.block}: {exc}") from None
    try:
        result = verify(data, block=block, min_security_bits=args.min_security_bits)
    except ParameterError as exc:
        raise _Fail(EXIT_INVALID, f"proof refused: {exc} (--min-security-bits)") from None
    except VerificationError as exc:
        raise _Fail(EXIT_INVALID, f"invalid proof: {type(exc).__name__}: {exc}") from None
    if not args.quiet:
        fd = "".join(f"{x:08x}" for x in result.final_digest)
        what = f" for block {args.block}" if args.block else ""
        print(f"proof OK{what} ({result.seconds:.2f}s): memory {result.memory_size} cells, "
              f"final state digest {fd}")
        p = result.params
        print(f"parameters: log_blowup {p.log_blowup}, {p.num_queries} queries, "
              f"{p.pow_bits} proof-of-work bits, log_final_poly_len {p.log_final_poly_len}, "
              f"grinding LogUp/DEEP/commit {p.logup_pow_bits}/{p.deep_pow_bits}/"
              f"{p.commit_pow_bits} bits: {result.security_bits} conjectured security bits "
              f"(minimum {args.min_security_bits}; weakest term "
              f"{result.security.limiting if result.security else '-'})")
        if args.verbose and result.security is not None:
            print(f"  security: {result.security.describe()}")
        if args.verbose:
            for name, idx in PV_NAMES.items():
                v = result.public_values[idx]
                print(f"  {name:<15} {v if isinstance(v, int) else ' '.join(map(str, v))}")
    return EXIT_OK


# --------------------------------------------------------------------------- entry points

def _main(run, argv) -> int:
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except _Fail as exc:
        _err(str(exc))
        return exc.code
    except SystemExit as exc:               # --help / --version from argparse
        return int(exc.code or 0) if isinstance(exc.code, int) else EXIT_USAGE
    except KeyboardInterrupt:
        _err("interrupted")
        return EXIT_INTERRUPTED
    except MemoryError:
        _err("out of memory")
        return EXIT_INTERNAL
    except BaseException as exc:            # never a traceback: a one-line internal error
        _err(f"internal error: {type(exc).__name__}: {exc} (please report this)")
        return EXIT_INTERNAL


def main_prove(argv=None) -> int:
    """Console entry point ``prove``."""
    code = _main(_run_prove, argv)
    if argv is None:
        sys.exit(code)
    return code


def main_verify(argv=None) -> int:
    """Console entry point ``verify``."""
    code = _main(_run_verify, argv)
    if argv is None:
        sys.exit(code)
    return code
