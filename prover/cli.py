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
give 110 on the example block): exit 1, before any hashing.  ``--min-security-bits 0`` accepts any parameters.

No Python traceback ever reaches the terminal; ``-v`` adds detail, ``-q`` keeps only errors.
``prove --cluster`` is :mod:`prover.cluster_cli`; both share :mod:`prover.cli_common`.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import tempfile
import time

from .cli_common import (EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_INVALID, EXIT_OK, EXIT_USAGE,
                         EXIT_XCHECK, default_output, prover_config)
from .cli_common import Fail as _Fail

DEFAULT_MIN_SECURITY_BITS = 100    # conjectured bits (docs/protocol.md section 7; = the library's)

_EPILOG = ("exit status: 0 success; 1 unprovable block or invalid proof (with the reason); "
           "2 bad usage or unreadable input (a malformed block names the JSON path of the bad "
           "field); 3 internal error; 4 the proof failed the self-check or PROVER_GPU_XCHECK "
           "caught device corruption (a post-mortem was written, no proof)")


class _Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """Defaults in every option's help: argparse's "(default: X)", or the help's own words
    where the default is not a value (None: the help says what happens)."""

    def _get_help_string(self, action):
        if action.default in (None, False) or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so every exit goes through one place;
    every option's help shows its default; ``--version``."""

    def __init__(self, **kw):
        super().__init__(formatter_class=_Formatter, **kw)
        self.add_argument("--version", action="version", version=f"%(prog)s {_version()}",
                          help="print the Steadfast version and exit")

    def error(self, message):
        raise _Fail(EXIT_USAGE, f"{message} (see --help)")


def _version() -> str:
    from steadfast import __version__
    return __version__


def _err(msg: str) -> None:
    sys.stderr.write(f"error: {msg}\n")
    sys.stderr.flush()


_QUIET = [False]                    # -q: errors only, no warnings


def _warn(msg: str) -> None:
    if _QUIET[0]:
        return
    sys.stderr.write(f"warning: {msg}\n")
    sys.stderr.flush()


# ProverConfig field (as ConfigError messages name it) -> the prove option that sets it
_FLAG_OF = {"num_queries": "--queries", "log_blowup": "--log-blowup", "pow_bits": "--pow-bits",
            "log_cap": "--cap-height",
            "threads": "--threads", "vram budget": "--vram-budget",
            "postmortem_dir": "--postmortem-dir"}


def _flagify(message: str) -> str:
    """A ConfigError message in the command's words: field names become option names
    (``num_queries`` -> ``--queries``); a backend problem is prefixed ``--backend:``."""
    for name, flag in _FLAG_OF.items():
        message = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w])", flag, message)
    if re.search(r"\bbackend '", message) and "--" not in message:
        message = f"--backend: {message}"
    return message


# --------------------------------------------------------------------------- progress

# The display itself is prover/display.py: a live rich display on a terminal, plain
# deterministic lines otherwise (logs, CI, pipes); nothing with -q or --json.

# --------------------------------------------------------------------------- prove

def _prove_parser() -> argparse.ArgumentParser:
    from steadfast.verifier.proof_format import Params     # the defaults (light import)
    ap = _Parser(prog="prove", description="Prove a Steadfast block (docs/api.md).",
                 epilog=_EPILOG)
    ap.add_argument("block", nargs="*", help="the block JSON file (docs/block-format.md); "
                    "several with --cluster")
    ap.add_argument("--cluster", nargs="?", const="", metavar="ADDRESS", default=None,
                    help="prove on a Ray cluster (pip install 'steadfast[cluster]'): ADDRESS "
                         "of `ray start --head`, none for a local Ray; several blocks allowed "
                         "(default: no cluster, prove here)")
    ap.add_argument("--shard-tables", action="store_true",
                    help="with --cluster: prove one block with its tables spread over workers")
    ap.add_argument("--workers", type=int, default=None, help="with --cluster: workers (default 2)")
    ap.add_argument("-o", "--output",
                    help="proof file (default: the block's path with .proof for .json)")
    ap.add_argument("--backend", default=os.environ.get("PROVER_BACKEND", "auto"),
                    help="host, cuda, sim, emu or auto (auto: cuda when usable, else host; "
                         "the default is $PROVER_BACKEND, else auto)")
    ap.add_argument("--vram-budget", default=os.environ.get("PROVER_VRAM_BUDGET"),
                    help="device memory the prover may use, e.g. 6GiB (default: "
                         "$PROVER_VRAM_BUDGET, else what the device has free)")
    ap.add_argument("--log-blowup", type=int, default=Params.log_blowup,
                    help="log2 of the LDE blowup")
    ap.add_argument("--queries", type=int, default=Params.num_queries, help="FRI queries")
    ap.add_argument("--pow-bits", type=int, default=Params.pow_bits,
                    help="proof-of-work bits before the queries")
    ap.add_argument("--fri-arity", type=int, default=None, metavar="A",
                    help="FRI folding arity: 2, 4, 8 or 16 (default: the protocol's, "
                         f"{1 << Params.log_fri_arity}); larger: fewer layers, smaller proofs")
    ap.add_argument("--cap-height", type=int, default=None, metavar="C",
                    help="Merkle cap height: every commitment is 2^C nodes, 0..8 (default: "
                         f"the protocol's, {Params.log_cap}); openings stop C levels below "
                         "the root")
    ap.add_argument("--threads", type=int, default=None,
                    help="host threads for the numba kernels (default: numba's, all cores)")
    ap.add_argument("--execute-only", action="store_true",
                    help="run the VM and size the proof without proving: cycles, rows and "
                         "padded height per table, committed cells, host and device bytes, "
                         "the parameters' security and the claimed-output check (exit 1 "
                         "when the claims are false)")
    ap.add_argument("--json", action="store_true",
                    help="print the result as one JSON object on stdout (the --execute-only "
                         "report, or the proof's statistics) instead of text")
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
    ap.add_argument("--stats-json", metavar="FILE",
                    help="write the proof statistics as JSON, for failed proofs too (default: "
                         "none)")
    ap.add_argument("--timeline", metavar="FILE",
                    help="write a Chrome/Perfetto trace of every table's stages (device "
                         "backends; default: none)")
    ap.add_argument("--postmortem-dir", metavar="DIR", default=".",
                    help="where the self-check and PROVER_GPU_XCHECK write post-mortems")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    g.add_argument("-v", "--verbose", action="store_true", help="more detail")
    return ap


def _fri_options(args) -> dict:
    """ProverConfig fields of --fri-arity / --cap-height (only those given)."""
    kw = {}
    if args.fri_arity is not None:
        a = args.fri_arity
        if a not in (2, 4, 8, 16):
            raise _Fail(EXIT_USAGE, f"--fri-arity must be 2, 4, 8 or 16, got {a}")
        kw["log_fri_arity"] = a.bit_length() - 1
    if args.cap_height is not None:
        kw["log_cap"] = args.cap_height          # range: Params.validate -> ConfigError
    return kw


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


def _write_all(files) -> None:
    """Write ``[(path, bytes), ...]`` all or nothing: every file goes to a temporary file
    beside its target first; only when all are written are they renamed into place
    (os.replace), so a failing output never leaves a half-written file or a proof without
    its statistics.  Failure: exit 2 naming the file."""
    tmps = []
    try:
        for path, data in files:
            d = os.path.dirname(os.path.abspath(path))
            try:
                fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{os.path.basename(path)}.",
                                           suffix=".tmp")
                tmps.append(tmp)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
            except OSError as exc:
                raise _Fail(EXIT_USAGE, f"cannot write {path}: {exc.strerror or exc}; "
                                        "nothing was written") from None
        for (path, _), tmp in zip(files, tmps):
            os.replace(tmp, path)
        tmps = []
    finally:
        for tmp in tmps:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _check_outputs(args, out: str | None) -> None:
    """Before any work: every output's directory exists and is writable, and the proof
    does not overwrite the block.  Exit 2 naming the option."""
    block = os.path.realpath(args.block)
    paths = [("--output", out), ("--stats-json", args.stats_json), ("--timeline", args.timeline)]
    for flag, path in paths:
        if not path:
            continue
        if os.path.realpath(path) == block:
            raise _Fail(EXIT_USAGE, f"{flag} {path} is the input block; refusing to overwrite it")
        if os.path.isdir(path):
            raise _Fail(EXIT_USAGE, f"{flag} {path} is a directory")
        d = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(d):
            raise _Fail(EXIT_USAGE, f"{flag} {path}: no directory {d}")
        if not os.access(d, os.W_OK | os.X_OK):
            raise _Fail(EXIT_USAGE, f"{flag} {path}: directory {d} is not writable")
    pm = args.postmortem_dir        # created when a post-mortem is written: its parent must do
    where = pm if os.path.exists(pm) else os.path.dirname(os.path.abspath(pm))
    if not os.path.isdir(where):
        raise _Fail(EXIT_USAGE, f"--postmortem-dir {pm}: "
                                + ("not a directory" if where == pm else f"no directory {where}"))
    if not os.access(where, os.W_OK | os.X_OK):
        raise _Fail(EXIT_USAGE, f"--postmortem-dir {pm}: directory {where} is not writable")
    outs = [os.path.realpath(p) for _, p in paths if p]
    if len(set(outs)) != len(outs):
        raise _Fail(EXIT_USAGE, "--output, --stats-json and --timeline must be different files")


def _device_name(backend: str) -> str:
    """The machine the proof ran on, in words (the stats' ``device``)."""
    if backend == "cuda":
        try:
            from numba import cuda
            name = cuda.get_current_device().name
            return name.decode() if isinstance(name, bytes) else str(name)
        except Exception as exc:        # the stats must not fail over a name
            return f"cuda (name unavailable: {type(exc).__name__})"
    cpu = ""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    if not cpu:
        import platform
        cpu = platform.processor() or platform.machine()
    return {"sim": f"numba CUDA simulator on {cpu}", "emu": f"device emulation on {cpu}"}.get(
        backend, cpu)


def _host_kernels_cached() -> bool:
    """Whether numba's on-disk cache holds the host kernels (a ``hostlib.*.nbi`` index):
    in ``kernels/__pycache__``, under ``NUMBA_CACHE_DIR``, or numba's user-wide cache.
    False means this process compiles them first: a cold start."""
    import numba
    from steadfast import kernels
    here = os.path.join(os.path.dirname(os.path.abspath(kernels.__file__)), "__pycache__")
    roots = [numba.config.CACHE_DIR] if numba.config.CACHE_DIR else [
        here, os.path.join(os.path.expanduser("~"), ".cache", "numba")]
    for root in roots:
        for dirpath, _, files in os.walk(root):
            if any(f.startswith("hostlib.") and f.endswith(".nbi") for f in files):
                return True
    return False


_FIRST_COMPILE = " (with the first compilation of the host kernels)"


def _run_prove(argv) -> int:
    t_start = time.perf_counter()       # what the user waits for: imports, compilation too
    args = _prove_parser().parse_args(argv)
    if args.cluster is not None or args.shard_tables:
        from .cluster_cli import run_cli
        return run_cli(args)
    if len(args.block) != 1:
        raise _Fail(EXIT_USAGE, "prove takes one block (several need --cluster; see --help)")
    args.block = args.block[0]
    from steadfast.vm.block import BlockError, loads_block
    from .api import ConfigError, Prover, UnprovableBlock, digest_hex

    _log_to_stderr(args.quiet)
    out = None if (args.execute_only or args.precompile) else (
        args.output or default_output(args.block))
    try:
        with open(args.block, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise _Fail(EXIT_USAGE, f"cannot read {args.block}: {exc.strerror or exc}") from None
    try:
        block = loads_block(raw)
    except BlockError as exc:
        raise _Fail(EXIT_USAGE, f"{args.block}: {exc}") from None
    if out is not None:
        _check_outputs(args, out)
    try:
        cfg = prover_config(args, **_fri_options(args))
        dev = cfg.dev()
    except ConfigError as exc:
        raise _Fail(EXIT_USAGE, _flagify(str(exc))) from None
    if dev and args.quiet:              # -q silences warnings, never this one
        sys.stderr.write("warning: DEVELOPMENT MODE (PROVER_DEV_MODE=1): the proof will be a "
                         "marked fake, no STARK\n")
    quiet = args.quiet or args.json
    from .display import make_progress
    progress = None if (quiet or args.execute_only) else make_progress(sys.stderr.isatty())
    timeline = None
    if args.timeline and out is not None:
        from .timeline import Timeline
        timeline = Timeline()
    try:
        prover = Prover(cfg, progress=progress, timeline=timeline)
    except ConfigError as exc:
        if progress is not None:
            progress.close()
        raise _Fail(EXIT_USAGE, _flagify(str(exc))) from None
    if args.precompile:
        return _precompile(prover, block, quiet)
    if args.execute_only:
        return _execute_only(prover, block, args)
    params = cfg.params()
    if not dev and params.query_bits() < DEFAULT_MIN_SECURITY_BITS:
        _warn(f"--log-blowup {params.log_blowup} x --queries {params.num_queries} + --pow-bits "
              f"{params.pow_bits} = {params.query_bits()} bits, below the "
              f"{DEFAULT_MIN_SECURITY_BITS} a default verify requires: it will refuse this "
              f"proof (verify --min-security-bits N accepts weaker ones)")
    cold = not _host_kernels_cached()   # numba compiles them lazily, inside the proof
    if not quiet and cold:
        print("first run here: compiling the host kernels (numba; once per machine and "
              "Python, then loaded from its cache) -- this adds about 30-90 s, more on a "
              "busy machine",
              file=sys.stderr, flush=True)
    if not quiet:
        print(f"proving {args.block}: {len(block.transactions)} transactions, "
              f"{len(block.programs)} programs, memory {block.memory_size} cells, "
              f"backend {prover.backend}", file=sys.stderr)
    meta = {"steadfast_version": _version(), "block": args.block,
            "block_sha256": hashlib.sha256(raw).hexdigest(), "proof": out,
            "backend": prover.backend, "device": _device_name(prover.backend),
            "params": dict(vars(params)), "dev_mode": dev,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    from .xcheck import POSTMORTEM_CONTEXT
    POSTMORTEM_CONTEXT.update({k: meta[k] for k in ("block", "block_sha256", "device")})
    from .api import ProofSelfCheckFailure
    from .xcheck import XcheckFailure
    failure = None
    try:
        proof = prover.prove_block(block)
    except UnprovableBlock as exc:
        lines = [f"block cannot be proven: {exc}"] + [f"  {d}" for d in exc.details]
        failure = _Fail(EXIT_INVALID, "\n".join(lines))
        failure.record = {"error": type(exc).__name__, "message": str(exc),
                          "details": list(exc.details)}
    except (XcheckFailure, ProofSelfCheckFailure) as exc:
        failure = _Fail(EXIT_XCHECK, f"{exc}; no proof written")
        failure.record = {"error": type(exc).__name__, "message": str(exc),
                          "postmortem": getattr(exc, "postmortem", None)}
    finally:
        if progress is not None:
            progress.close()
    side = []
    if timeline is not None:
        side.append((args.timeline, json.dumps(timeline.to_json()).encode()))
    if failure is not None:
        if args.stats_json:
            rec = dict(meta, ok=False, proof=None, failure=failure.record,
                       exit_code=failure.code)
            side.append((args.stats_json, json.dumps(rec, indent=1).encode()))
        _write_all(side)
        raise failure
    data = proof.to_bytes()
    st = proof.stats
    sec = None
    if not dev:
        from steadfast.verifier.security import proof_security
        from steadfast.vm.airs import block_airs, slots_from_widths
        slots = slots_from_widths([t.main_width for t in st.tables])
        sec = proof_security(params, block_airs(proof.rom, slots, params.log_blowup),
                             [t.rows.bit_length() - 1 for t in st.tables])
    wall = time.perf_counter() - t_start
    stats = dict(st.to_json(), **meta, ok=True, proof_file_bytes=len(data), exit_code=EXIT_OK,
                 final_digest=digest_hex(proof.final_digest), wall_s=wall)
    if sec is not None:
        stats["security_bits"] = sec.bits
    files = [(out, data)] + side
    if args.stats_json:
        files.append((args.stats_json, json.dumps(stats, indent=1).encode()))
    _write_all(files)
    if sec is not None and sec.bits < DEFAULT_MIN_SECURITY_BITS:
        _warn(f"these parameters give this block {sec.bits} conjectured security bits "
              f"(weakest term {sec.limiting}); a default verify requires "
              f"{DEFAULT_MIN_SECURITY_BITS} and will refuse the proof: raise --queries or "
              f"--log-blowup, or verify with --min-security-bits {sec.bits}")
    if args.json:
        print(json.dumps(stats))
        return EXIT_OK
    if not args.quiet:
        total = st.phases.get("total", 0.0)
        print(f"wrote {out}: {len(data):,} bytes; {st.cycles:,} cycles in {wall:.2f}s wall "
              f"({st.cycles / wall if wall else 0:,.0f} cycles/s), of which the proof "
              f"{total:.2f}s{_FIRST_COMPILE if cold and not dev else ''}"
              f" and start-up (imports, reading the block) {max(0.0, wall - total):.2f}s")
        if dev:
            print("DEVELOPMENT-MODE proof: execution and constraint check only, NOT a STARK; "
                  "verify refuses it without --accept-dev")
            return EXIT_OK
        print(st.summary())
        print(f"final state digest {digest_hex(proof.final_digest)}")
        if args.verbose:
            print("phases: " + ", ".join(f"{k} {v:.2f}s" for k, v in st.phases.items()))
            for t in st.tables:
                print(f"  {t.name:<10} " + ", ".join(f"{k} {v:.2f}s" for k, v in t.seconds.items()))
            flat = {k: v for k, v in st.counters.items() if not isinstance(v, dict)}
            if flat:
                print("counters: " + ", ".join(f"{k}={v}" for k, v in flat.items()))
            dev_c = st.counters.get("device")
            if dev_c:
                rec = dev_c.get("recovery", {})
                retries = sum(r.get("retries", 0) for r in rec.values())
                downgrades = sum(r.get("downgrades", 0) for r in rec.values())
                print(f"device {dev_c.get('backend')}: peak {dev_c.get('peak_device_bytes', 0):,} B, "
                      f"spilled {dev_c.get('spilled_bytes', 0):,} B, {retries} retries, "
                      f"{downgrades} downgrades")
            print(f"peak RSS {st.peak_rss_bytes / 2**20:.0f} MiB")
    return EXIT_OK


def _execute_only(prover, block, args) -> int:
    """``prove --execute-only``: the VM run and the proof's size, no proof."""
    from .api import UnprovableBlock
    try:
        rep = prover.execute(block)
    except UnprovableBlock as exc:
        raise _Fail(EXIT_INVALID, f"block cannot be proven: {exc}") from None
    if args.json:
        print(json.dumps(dict(rep.to_json(), backend=prover.backend,
                              min_security_bits_default=DEFAULT_MIN_SECURITY_BITS)))
    elif not args.quiet:
        print(rep.summary())
    if rep.security_bits < DEFAULT_MIN_SECURITY_BITS:
        _warn(f"these parameters give this block {rep.security_bits} conjectured security "
              f"bits; a default verify requires {DEFAULT_MIN_SECURITY_BITS}")
    if not rep.claims_ok:
        _err("the claimed outputs are not what execution writes: " + ", ".join(rep.mismatches))
        return EXIT_INVALID
    return EXIT_OK


def _log_to_stderr(quiet: bool = False) -> None:
    """The library's warnings (development mode, diagnostics the host ignores) reach the
    terminal as ``warning: ...`` lines (one handler per process); -q keeps errors only."""
    import logging
    _QUIET[0] = bool(quiet)
    lg = logging.getLogger("steadfast")
    for h in lg.handlers:
        if getattr(h, "_steadfast_cli", False):
            h.setLevel(logging.ERROR if quiet else logging.WARNING)
            return

    class _H(logging.StreamHandler):
        _steadfast_cli = True

        def emit(self, record):
            self.stream = sys.stderr        # the current stderr (tests capture it)
            super().emit(record)
    class _F(logging.Formatter):
        def format(self, record):
            return f"{record.levelname.lower()}: {record.getMessage()}"
    h = _H()
    h.setLevel(logging.ERROR if quiet else logging.WARNING)
    h.setFormatter(_F())
    lg.addHandler(h)


# --------------------------------------------------------------------------- verify

def _verify_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="verify", description="Verify a Steadfast block proof (docs/api.md).",
                 epilog=_EPILOG)
    ap.add_argument("proof", help="the proof file written by prove")
    ap.add_argument("--block", help="also check the proof's public values against this block (default: "
                         "no block; the proof's own statement only)")
    ap.add_argument("--min-security-bits", type=int, default=DEFAULT_MIN_SECURITY_BITS,
                    metavar="N",
                    help="refuse proofs whose parameters give fewer conjectured security "
                         "bits (the sum of every soundness term for the proof's tables, "
                         "docs/protocol.md section 7; 0 accepts any parameters)")
    ap.add_argument("--accept-dev", action="store_true",
                    help="accept a development-mode proof (PROVER_DEV_MODE=1: execution and "
                         "constraint check only, proves nothing); for development only")
    ap.add_argument("--json", action="store_true",
                    help="print one JSON object on stdout: ok, error (class and message), "
                         "public values, parameters, security bits and terms, seconds; the "
                         "exit status is unchanged")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    g.add_argument("-v", "--verbose", action="store_true", help="more detail")
    return ap


def _pv_json(pv) -> dict:
    """The public values by name; digests in the one digest notation (:func:`digest_hex`)."""
    from steadfast.vm.statement import PV_NAMES
    from .api import digest_hex
    return {name: (pv[idx] if isinstance(idx, int) else digest_hex(pv[idx]))
            for name, idx in PV_NAMES.items()}


def _run_verify(argv) -> int:
    args = _verify_parser().parse_args(argv)
    if args.min_security_bits < 0:
        raise _Fail(EXIT_USAGE, f"--min-security-bits must be >= 0, got {args.min_security_bits}")
    from steadfast.verifier.errors import ParameterError, VerificationError
    from steadfast.vm.block import BlockError, load_block
    from .api import DevProofRefused, digest_hex, verify

    _log_to_stderr(args.quiet or args.json)
    report = {"steadfast_version": _version(), "proof": args.proof, "block": args.block,
              "min_security_bits": args.min_security_bits, "ok": False, "error": None}

    def fail(code, message, exc=None):
        if args.json:
            report["error"] = {"class": type(exc).__name__ if exc else "UsageError",
                               "message": str(exc) if exc else message}
            report["exit_code"] = code
            print(json.dumps(report))
        return _Fail(code, message)

    try:
        with open(args.proof, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise fail(EXIT_USAGE, f"cannot read {args.proof}: {exc.strerror or exc}", exc) from None
    block = None
    if args.block:
        try:
            block = load_block(args.block)
        except OSError as exc:
            raise fail(EXIT_USAGE, f"cannot read {args.block}: {exc.strerror or exc}", exc) from None
        except BlockError as exc:
            raise fail(EXIT_USAGE, f"{args.block}: {exc}", exc) from None
    try:
        result = verify(data, block=block, min_security_bits=args.min_security_bits,
                        accept_dev=args.accept_dev)
    except DevProofRefused as exc:
        raise fail(EXIT_INVALID, f"proof refused: {exc}", exc) from None
    except ParameterError as exc:
        raise fail(EXIT_INVALID, f"proof refused: {exc} (--min-security-bits)", exc) from None
    except VerificationError as exc:
        raise fail(EXIT_INVALID, f"invalid proof: {type(exc).__name__}: {exc}", exc) from None
    p = result.params
    sec = result.security
    if args.json:
        report.update(ok=True, exit_code=EXIT_OK, dev=result.dev, seconds=result.seconds,
                      public_values=_pv_json(result.public_values),
                      params=None if result.dev else dict(vars(p)),
                      security_bits=None if sec is None else sec.bits,
                      security_terms=None if sec is None else {
                          k: (None if v == float("inf") else v) for k, v in sec.terms.items()},
                      limiting_term=None if sec is None else sec.limiting)
        print(json.dumps(report))
        return EXIT_OK
    if not args.quiet:
        fd = digest_hex(result.final_digest)
        what = f" for block {args.block}" if args.block else ""
        kind = "development-mode proof accepted" if result.dev else "proof OK"
        print(f"{kind}{what} ({result.seconds:.2f}s): memory {result.memory_size} cells, "
              f"final state digest {fd}")
        if not result.dev:
            print(f"parameters: log_blowup {p.log_blowup}, {p.num_queries} queries, "
                  f"{p.pow_bits} proof-of-work bits, log_final_poly_len {p.log_final_poly_len}, "
                  f"grinding LogUp/DEEP/commit {p.logup_pow_bits}/{p.deep_pow_bits}/"
                  f"{p.commit_pow_bits} bits: {result.security_bits} conjectured security bits "
                  f"(minimum {args.min_security_bits}; weakest term "
                  f"{sec.limiting if sec else '-'})")
        if args.verbose and sec is not None:
            print(f"  security: {sec.describe()}")
        if args.verbose:
            for name, v in _pv_json(result.public_values).items():
                print(f"  {name:<15} {v}")
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
    except BrokenPipeError:                 # the reader of our output went away (| head)
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return EXIT_OK
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
