"""``prove PROGRAM.elf [--input FILE] [-o PROOF] [--max-cycles N]`` (docs/api.md "Proving
programs"): the program side of ``prove`` (:mod:`prover.cli` reads the file and hands an
ELF over), with the block's options -- backends, ``--execute-only``, development mode,
``--json``, ``--stats-json``, ``--timeline``, the self-check, ``--precompile``.

In this command's JSON (``--json``, ``--stats-json``, ``--execute-only --json``)
``exit_code`` is always the program's exit code (null when there is none: the run failed)
and ``status`` the command's exit status; ``output`` is the fd 1 bytes in hex.
"""
from __future__ import annotations

import hashlib
import json
import sys
import time

from . import prove as _P
from .common import (DEFAULT_MIN_SECURITY_BITS, EXIT_INVALID, EXIT_OK, EXIT_USAGE, Fail,
                     check_outputs, default_output, version, warn)


def _program(args, raw: bytes):
    from ...rv32.elf import parse_elf
    from ...rv32.errors import ElfError
    try:
        return parse_elf(raw)
    except ElfError as exc:
        raise Fail(EXIT_USAGE, f"{args.block}: not a program the RV32IM machine runs: "
                               f"{exc}") from None


def read_input(args) -> bytes:
    from ..programs.proof import as_input
    if args.input is None:
        return b""
    try:
        with open(args.input, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise Fail(EXIT_USAGE, f"cannot read {args.input}: {exc.strerror or exc}") from None
    try:
        return as_input(data)
    except ValueError as exc:
        raise Fail(EXIT_USAGE, f"--input {args.input}: {exc}") from None


def segment_cycles_of(args):
    n = getattr(args, "segment_cycles", None)
    if n is None:
        return None
    from ...rv32.segments import check_segment_cycles
    try:
        return check_segment_cycles(n)
    except ValueError as exc:
        raise Fail(EXIT_USAGE, str(exc).replace("segment_cycles", "--segment-cycles")) from None


def max_cycles_of(args) -> int:
    """``--max-cycles`` (default 2^30): an int in [1, 2^32 - 1] (a run longer than one
    segment is proved in segments; a one-proof carries min(max_cycles, 2^24))."""
    from ..programs.prover import DEFAULT_MAX_CYCLES
    if args.max_cycles is None:
        return DEFAULT_MAX_CYCLES
    if not 1 <= args.max_cycles <= (1 << 32) - 1:
        raise Fail(EXIT_USAGE, f"--max-cycles must be in [1, 2^32 - 1], got "
                               f"{args.max_cycles:,}")
    return args.max_cycles


def segments_arg(args):
    """What ``prove_program(segment_cycles=)`` gets: ``--segment-cycles`` when given,
    else the config's (2^20)."""
    from ..programs.prover import CONFIG
    seg = segment_cycles_of(args)
    return CONFIG if seg is None else seg


def _failure_record(exc) -> dict:
    rec = {"error": type(exc).__name__, "message": str(exc)}
    for k in ("kind", "pc", "cycle"):
        if getattr(exc, k, None) is not None:
            rec[k] = getattr(exc, k)
    return rec


def run_prove_program(args, raw: bytes, t_start: float, kernels_cached) -> int:
    """Prove the program in ``raw`` (the file ``args.block``'s bytes) on ``--input``;
    ``kernels_cached()`` says whether numba's cache holds the host kernels (a cold start
    otherwise)."""
    from ...rv32.tables import TABLES
    segment_cycles_of(args)                 # validated before any work
    program, data, limit = _program(args, raw), read_input(args), max_cycles_of(args)
    path = args.block
    out = None if (args.execute_only or args.precompile) else (
        args.output or default_output(path))
    if out is not None:
        check_outputs(args, out, [("program", path), ("input file", args.input)])
    session = _P.setup(args, out, tables=len(TABLES), what="program")
    prover, dev, quiet = session.prover, session.dev, session.quiet
    if args.precompile:
        return _P.precompile_steps(prover, lambda show: prover.precompile_program(
            program, data, max_cycles=limit, progress=show), quiet, "program")
    meta = {"steadfast_version": version(), "program": path,
            "program_sha256": hashlib.sha256(raw).hexdigest(),
            "program_digest": program.digest().hex(), "input": args.input,
            "input_len": len(data), "input_sha256": hashlib.sha256(data).hexdigest(),
            "max_cycles": limit, "backend": prover.backend}
    if args.execute_only:
        return _execute_only(prover, program, data, limit, args, meta)
    params = session.cfg.params()
    _P.warn_weak_params(params, dev)
    cold = not kernels_cached()
    _P.cold_start(cold, quiet)
    if not quiet:
        print(f"proving {path}: {len(program.segments)} ELF load segments, {len(data):,} bytes of "
              f"input, max_cycles {limit:,}, backend {prover.backend}", file=sys.stderr)
    _P.proof_meta(meta, session, out, params, ("program", "program_digest", "device"))
    seg = segments_arg(args)
    proof, failure = _P.run_proof(
        lambda: prover.prove_program(program, data, max_cycles=limit, segment_cycles=seg),
        session, "program")
    if failure is not None:
        _P.fail_with_stats(args, session, failure, dict(
            meta, ok=False, proof=None, failure=failure.record, status=failure.code,
            exit_code=None))
    blob = proof.to_bytes()
    from ..programs.segment_proof import SegmentedProof
    if isinstance(proof, SegmentedProof):
        return _segmented_done(args, out, blob, proof, t_start)
    st = proof.stats
    sec = None if dev else _security(program, data, proof, params)
    wall = time.perf_counter() - t_start
    meta["max_cycles"] = proof.max_cycles        # the statement's: min(asked, 2^24)
    stats = dict(st.to_json(), **meta, ok=True, proof_file_bytes=len(blob), status=EXIT_OK,
                 exit_code=proof.exit_code, output=proof.output.hex(),
                 output_len=len(proof.output), wall_s=wall)
    if _P.finish(args, session, out, blob, stats, sec, "program"):
        print(_P.wrote_line(out, blob, st, wall, cold, dev, "program"))
        print(f"the program exits with code {proof.exit_code}; output "
              f"({len(proof.output):,} bytes): {_show(proof.output)}")
        if dev:
            print(_P.DEV_LINE)
            return EXIT_OK
        print(st.summary())
        if args.verbose:
            _P.print_verbose(st)
    return EXIT_OK


def _segmented_done(args, out: str, blob: bytes, proof, t_start: float) -> int:
    """A segmented proof: write it, say what it holds."""
    with open(out, "wb") as fh:
        fh.write(blob)
    wall = time.perf_counter() - t_start
    cycles = proof.cycles
    print(f"wrote {out}: {len(blob):,} bytes, {len(proof.segments)} segments of "
          f"{proof.segment_cycles:,} cycles ({cycles:,} cycles, {cycles / max(wall, 1e-9):,.0f} "
          f"cycles/s) in {wall:.1f}s")
    print(f"the program exits with code {proof.exit_code}; output "
          f"({len(proof.output):,} bytes): {_show(proof.output)}")
    if getattr(args, "json", False):
        print(json.dumps({"ok": True, "proof": out, "proof_file_bytes": len(blob),
                          "segments": len(proof.segments), "cycles": cycles,
                          "segment_cycles": proof.segment_cycles,
                          "segment_cycle_counts": [s.cycles for s in proof.segments],
                          "exit_code": proof.exit_code, "output": proof.output.hex(),
                          "wall_s": wall}))
    return EXIT_OK


def _security(program, data: bytes, proof, params):
    """The proof's conjectured security for its tables (the AIRs a verifier builds)."""
    from ...rv32.statement import program_airs, split_of
    from ...rv32.tables import TABLES, slots_from_widths, table_names
    from ...verifier.security import proof_security
    st = proof.stats
    split = split_of(proof.public_values) if len(st.tables) > len(TABLES) else ()
    slots = slots_from_widths([t.main_width for t in st.tables], params.log_blowup,
                              table_names(split))
    airs = program_airs(program, data, proof.output, params.log_blowup, slots, split=split)
    return proof_security(params, airs, [t.rows.bit_length() - 1 for t in st.tables])


def _show(output: bytes, limit: int = 200) -> str:
    more = f" ... ({len(output):,} bytes)" if len(output) > limit else ""
    return f"{output[:limit]!r}{more}"


def _execute_only(prover, program, data: bytes, limit: int, args, meta: dict) -> int:
    """``prove PROGRAM.elf --execute-only``: the run and the proof's size, no proof."""
    from ..common.errors import UnprovableBlock
    try:
        rep = prover.execute_program(program, data, max_cycles=limit,
                                     segment_cycles=segments_arg(args))
    except UnprovableBlock as exc:
        if args.json:
            print(json.dumps(dict(meta, ok=False, status=EXIT_INVALID, exit_code=None,
                                  failure=_failure_record(exc))))
        raise Fail(EXIT_INVALID, f"program cannot be proven: {exc}") from None
    if args.json:
        print(json.dumps(dict(meta, **rep.to_json(), ok=True, status=EXIT_OK,
                              min_security_bits_default=DEFAULT_MIN_SECURITY_BITS)))
    elif not args.quiet:
        print(rep.summary())
        # the outputs as prove and verify print them
        print(f"the program exits with code {rep.exit_code}; output "
              f"({len(rep.output):,} bytes): {_show(rep.output)}")
    if rep.security_bits < DEFAULT_MIN_SECURITY_BITS:
        warn(f"these parameters give this program {rep.security_bits} conjectured security "
             f"bits; a default verify requires {DEFAULT_MIN_SECURITY_BITS}")
    return EXIT_OK


__all__ = ["run_prove_program", "read_input", "max_cycles_of"]
