"""What ``prove`` does the same way for a block (:mod:`prover.cli`) and a program
(:mod:`prover.cli.program`): the prover made from the options (with the progress display
and the timeline), ``--precompile``'s report, the warnings about weak parameters, the
proof run with its failures turned into exit statuses (1 unprovable, 4 the self-check or
XCHECK), and the end -- the proof, statistics and timeline written all or nothing, the
JSON or the summary.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass

from .common import (DEFAULT_MIN_SECURITY_BITS, EXIT_INVALID, EXIT_OK, EXIT_USAGE,
                     EXIT_XCHECK, FIRST_COMPILE, Fail, device_name, flagify, fri_options,
                     prover_config, warn, write_all)


@dataclass
class Session:
    """One ``prove`` run's prover and what surrounds it."""
    prover: object
    cfg: object
    dev: bool
    quiet: bool                     # -q or --json: no progress, no summary
    progress: object
    timeline: object


def setup(args, out: str | None, tables: int = 5, what: str = "block", **fields) -> Session:
    """The configuration (``fields``: more ProverConfig fields), the progress display
    (``tables`` rows, the whole proof's stages on a row named ``what``: "block" or
    "program"), the timeline and the Prover of ``prove``'s options; a bad option is exit 2
    in the command's words."""
    from ..api import ConfigError, Prover
    try:
        cfg = prover_config(args, **fri_options(args), **fields)
        dev = cfg.dev()
    except ConfigError as exc:
        raise Fail(EXIT_USAGE, flagify(str(exc))) from None
    if dev and args.quiet:              # -q silences warnings, never this one
        sys.stderr.write("warning: DEVELOPMENT MODE (PROVER_DEV_MODE=1): the proof will be a "
                         "marked fake, no STARK\n")
    quiet = args.quiet or args.json
    from .display import make_progress
    progress = (None if (quiet or args.execute_only)
                else make_progress(sys.stderr.isatty(), tables=tables, whole=what))
    timeline = None
    if args.timeline and out is not None:
        from ..common.timeline import Timeline
        timeline = Timeline()
    try:
        prover = Prover(cfg, progress=progress, timeline=timeline)
    except ConfigError as exc:
        if progress is not None:
            progress.close()
        raise Fail(EXIT_USAGE, flagify(str(exc))) from None
    return Session(prover, cfg, dev, quiet, progress, timeline)


def precompile_steps(prover, run, quiet: bool, what: str) -> int:
    """``prove --precompile``: ``run(progress)`` compiles the kernels, one line per step,
    then a total; an unprovable block or program is exit 1."""
    from ..api import UnprovableBlock
    t0 = time.perf_counter()

    def show(row):
        if not quiet:
            print(f"  {row['name']:<64} {row['how']:<9} {row['seconds']:8.2f}s", flush=True)
    if not quiet:
        print(f"precompiling for backend {prover.backend}", flush=True)
    try:
        rows = run(show)
    except UnprovableBlock as exc:
        raise Fail(EXIT_INVALID, f"{what} cannot be proven: {exc}") from None
    how: dict = {}
    for r in rows:
        how[r["how"]] = how.get(r["how"], 0) + 1
    if not quiet:
        from ...kernels.kernel_cache import cache_dir
        parts = ", ".join(f"{n} {h}" for h, n in sorted(how.items())) or "nothing to compile"
        where = (cache_dir() or "disabled") if rows else "not used"
        print(f"precompiled {len(rows)} steps ({parts}) in {time.perf_counter() - t0:.1f}s; "
              f"kernel cache {where}")
    return EXIT_OK


def warn_weak_params(params, dev: bool) -> None:
    """Before proving: the parameters' upper bound under what a default verify takes."""
    if not dev and params.query_bits() < DEFAULT_MIN_SECURITY_BITS:
        warn(f"--log-blowup {params.log_blowup} x --queries {params.num_queries} + --pow-bits "
             f"{params.pow_bits} = {params.query_bits()} bits, below the "
             f"{DEFAULT_MIN_SECURITY_BITS} a default verify requires: it will refuse this "
             f"proof (verify --min-security-bits N accepts weaker ones)")


def warn_weak_proof(sec, what: str) -> None:
    """After proving: the proof's exact figure under what a default verify takes."""
    if sec is not None and sec.bits < DEFAULT_MIN_SECURITY_BITS:
        warn(f"these parameters give this {what} {sec.bits} conjectured security bits "
             f"(weakest term {sec.limiting}); a default verify requires "
             f"{DEFAULT_MIN_SECURITY_BITS} and will refuse the proof: raise --queries or "
             f"--log-blowup, or verify with --min-security-bits {sec.bits}")


def proof_meta(meta: dict, session: Session, out: str, params, context: tuple) -> None:
    """Before the proof: what the statistics say of the run -- the proof file, the device,
    the parameters, development mode, the time -- into ``meta``, and its keys ``context``
    (the block's or program's name and digest, the device) into the context of an XCHECK
    post-mortem."""
    meta.update({"proof": out, "device": device_name(session.prover.backend),
                 "params": dict(vars(params)), "slots": session.cfg.slots,
                 "dev_mode": session.dev,
                 "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    from ..device.xcheck import POSTMORTEM_CONTEXT
    POSTMORTEM_CONTEXT.update({k: meta[k] for k in context})


def cold_start(cold: bool, quiet: bool) -> None:
    """On a cold numba cache: start the compile-ahead helper (prover/cli/compile_ahead.py: a
    second process compiling the proof's later kernels while this one proves) and say
    what the first run costs."""
    if not cold:
        return
    from .compile_ahead import start
    helper = start()
    if not quiet:
        print("first run here: compiling the host kernels (numba; once per machine and "
              "Python, then loaded from its cache"
              + ("; a second process compiles the later ones" if helper else "")
              + ") -- this adds about 30-70 s, more on a busy machine",
              file=sys.stderr, flush=True)


def run_proof(prove, session: Session, what: str):
    """``prove()`` -> (proof, None), or (None, the :class:`Fail` to end with: exit 1 when
    the block or program cannot be proven -- its ``record`` for the statistics --, 4 when
    the self-check or XCHECK refused the proof)."""
    from ..api import ProofSelfCheckFailure, UnprovableBlock
    from ..device.xcheck import XcheckFailure
    failure = None
    try:
        return prove(), None
    except UnprovableBlock as exc:
        lines = [f"{what} cannot be proven: {exc}"] + [f"  {d}" for d in exc.details]
        failure = Fail(EXIT_INVALID, "\n".join(lines))
        failure.record = {"error": type(exc).__name__, "message": str(exc),
                          "details": list(exc.details)}
        for k in ("kind", "pc", "cycle"):                  # an UnprovableProgram's place
            if getattr(exc, k, None) is not None:
                failure.record[k] = getattr(exc, k)
    except (XcheckFailure, ProofSelfCheckFailure) as exc:
        failure = Fail(EXIT_XCHECK, f"{exc}; no proof written")
        failure.record = {"error": type(exc).__name__, "message": str(exc),
                          "postmortem": getattr(exc, "postmortem", None)}
    finally:
        if session.progress is not None:
            session.progress.close()
    return None, failure


def fail_with_stats(args, session: Session, failure: Fail, record: dict) -> None:
    """A failed proof: the timeline and (``--stats-json``) ``record`` written, then the
    failure raised."""
    side = timeline_file(args, session)
    if args.stats_json:
        side.append((args.stats_json, json.dumps(record, indent=1).encode()))
    write_all(side)
    raise failure


def timeline_file(args, session: Session) -> list:
    if session.timeline is None:
        return []
    return [(args.timeline, json.dumps(session.timeline.to_json()).encode())]


def write_outputs(args, session: Session, out: str, data: bytes, stats: dict) -> None:
    """The proof, the timeline and the statistics, all or nothing."""
    files = [(out, data)] + timeline_file(args, session)
    if args.stats_json:
        files.append((args.stats_json, json.dumps(stats, indent=1).encode()))
    write_all(files)


def wrote_line(out: str, data: bytes, st, wall: float, cold: bool, dev: bool, what: str) -> str:
    total = st.phases.get("total", 0.0)
    return (f"wrote {out}: {len(data):,} bytes; {st.cycles:,} cycles in {wall:.2f}s wall "
            f"({st.cycles / wall if wall else 0:,.0f} cycles/s), of which the proof "
            f"{total:.2f}s{FIRST_COMPILE if cold and not dev else ''}"
            f" and start-up (imports, reading the {what}) {max(0.0, wall - total):.2f}s")


DEV_LINE = ("DEVELOPMENT-MODE proof: execution and constraint check only, NOT a STARK; "
            "verify refuses it without --accept-dev")


def print_verbose(st) -> None:
    """``-v``: phases, per-table rounds, counters, device recovery, peak RSS."""
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


__all__ = ["Session", "setup", "precompile_steps", "warn_weak_params", "warn_weak_proof",
           "proof_meta", "cold_start", "run_proof", "fail_with_stats", "write_outputs",
           "wrote_line", "print_verbose", "DEV_LINE", "timeline_file"]


def finish(args, session: Session, out: str, data: bytes, stats: dict, sec, what: str) -> bool:
    """The end of a proof command that succeeded: the security bits into ``stats``, the
    outputs written (:func:`write_outputs`), the weak-parameter warning, ``--json``'s
    object printed -> whether the caller prints its human summary (not with --json or
    -q)."""
    if sec is not None:
        stats["security_bits"] = sec.bits
    write_outputs(args, session, out, data, stats)
    warn_weak_proof(sec, what)
    if args.json:
        print(json.dumps(stats))
        return False
    return not args.quiet
