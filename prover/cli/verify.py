"""The ``verify PROOF`` command (docs/api.md "Command line"): a proof of a block of RISC-V
transactions against its block (``--block BLOCK.json``, :mod:`prover.cli.txblock`) or a
program proof against its program and input (``--elf PROGRAM.elf [--input FILE]
[--max-cycles N]``), told apart by the proof file's magic.  Exit status 0 valid, 1 invalid or refused (with the reason), 2 bad usage or
unreadable input; ``--json`` prints one JSON object with the same status.
"""
from __future__ import annotations

import argparse
import json

from .common import (DEFAULT_MIN_SECURITY_BITS, EXIT_INVALID, EXIT_OK, EXIT_USAGE, Fail,
                     Parser, add_verbosity, log_to_stderr, version)

EPILOG = ("exit status: 0 the proof is valid; 1 invalid proof or refused (with the reason); "
          "2 bad usage or unreadable input; 3 internal error")


def verify_parser() -> argparse.ArgumentParser:
    ap = Parser(prog="verify", description="Verify a Steadfast block or program proof "
                                           "(docs/api.md).", epilog=EPILOG)
    ap.add_argument("proof", help="the proof file written by prove")
    ap.add_argument("--block", help="the block the proof is for, whose every statement "
                         "value is checked (required for a block proof; default: none)")
    ap.add_argument("--elf", metavar="PROGRAM.elf",
                    help="a program proof: the program it must be for (required for one; "
                         "default: none, a block proof)")
    ap.add_argument("--input", metavar="FILE",
                    help="with --elf: the program's input it must be for (default: none, "
                         "the empty input)")
    ap.add_argument("--max-cycles", type=int, default=None, metavar="N",
                    help="with --elf: the cycle limit it must be for (default: the proof's "
                         "own, reported)")
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
                         "public values (a program's exit code and output), parameters, "
                         "security bits and terms, seconds; the exit status is unchanged")
    add_verbosity(ap)
    return ap


def _security_json(sec) -> dict:
    return {"security_bits": None if sec is None else sec.bits,
            "security_terms": None if sec is None else {
                k: (None if v == float("inf") else v) for k, v in sec.terms.items()},
            "limiting_term": None if sec is None else sec.limiting}


def _params_line(p, sec, bits: int, minimum: int) -> str:
    return (f"parameters: log_blowup {p.log_blowup}, {p.num_queries} queries, "
            f"{p.pow_bits} proof-of-work bits, log_final_poly_len {p.log_final_poly_len}, "
            f"grinding LogUp/DEEP/commit {p.logup_pow_bits}/{p.deep_pow_bits}/"
            f"{p.commit_pow_bits} bits: {bits} conjectured security bits "
            f"(minimum {minimum}; weakest term {sec.limiting if sec else '-'})")


def run_verify(argv) -> int:
    args = verify_parser().parse_args(argv)
    if args.min_security_bits < 0:
        raise Fail(EXIT_USAGE, f"--min-security-bits must be >= 0, got {args.min_security_bits}")
    log_to_stderr(args.quiet or args.json)
    program = args.elf is not None
    report = {"steadfast_version": version(), "proof": args.proof,
              "min_security_bits": args.min_security_bits, "ok": False, "error": None}
    if program:
        report.update(elf=args.elf, input=args.input, exit_code=None, status=None)
    else:
        report["block"] = args.block

    def fail(code, message, exc=None):
        if args.json:
            report["error"] = {"class": type(exc).__name__ if exc else "UsageError",
                               "message": str(exc) if exc else message}
            report["status" if program else "exit_code"] = code
            print(json.dumps(report))
        return Fail(code, message)

    if program and args.block:
        raise fail(EXIT_USAGE, "--elf (a program proof) and --block (a block proof) exclude "
                               "each other")
    if not program and (args.input is not None or args.max_cycles is not None):
        raise fail(EXIT_USAGE, "--input and --max-cycles apply to program proofs (with --elf)")
    try:
        with open(args.proof, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise fail(EXIT_USAGE, f"cannot read {args.proof}: {exc.strerror or exc}", exc) from None
    from ..programs.proof import is_program_proof
    if not program and is_program_proof(data):
        if args.block:
            from ...verifier.errors import ShapeError
            raise _refusal(ShapeError("this is a program proof, not a block proof (verify it "
                                      "with --elf PROGRAM.elf --input FILE)"), fail)
        raise fail(EXIT_USAGE, f"{args.proof} is a program proof: give its program with --elf "
                               "PROGRAM.elf (and its input with --input FILE)")
    if program:
        return _verify_program(args, data, report, fail)
    return _verify_txblock(args, data, report, fail)


def _refusal(exc, fail):
    """The Fail for a refused proof (exit 1)."""
    from ...verifier.errors import ParameterError
    from ..common.errors import DevProofRefused
    if isinstance(exc, DevProofRefused):
        return fail(EXIT_INVALID, f"proof refused: {exc}", exc)
    if isinstance(exc, ParameterError):
        return fail(EXIT_INVALID, f"proof refused: {exc} (--min-security-bits)", exc)
    return fail(EXIT_INVALID, f"invalid proof: {type(exc).__name__}: {exc}", exc)


def _verify_txblock(args, data: bytes, report: dict, fail) -> int:
    """``verify PROOF --block BLOCK.json`` for a block of transactions: every statement
    value checked (each transaction's program, input, output, exit code, the block's
    max_cycles and claims), then the STARK; exit 1 naming the transaction on rejection."""
    from ...verifier.errors import ShapeError, VerificationError
    from .txblock import Claim, load, tx_json, tx_lines
    from ..blocks.proof import is_txblock_proof, verify_txblock
    if not is_txblock_proof(data):
        raise _refusal(ShapeError(f"{args.proof} is not a proof of a block of RISC-V "
                                  "transactions (STB2, STBE)" if args.block else
                                  "not a Steadfast proof (bad magic)"), fail)
    if not args.block:
        raise fail(EXIT_USAGE, f"{args.proof} is a proof of a block of RISC-V transactions: "
                               "give its block with --block BLOCK.json")
    try:
        block = load(args.block)
    except Fail as exc:
        raise fail(exc.code, str(exc)) from None
    try:
        res = verify_txblock(data, block, min_security_bits=args.min_security_bits,
                             accept_dev=args.accept_dev)
    except VerificationError as exc:
        raise _refusal(exc, fail) from None
    claims = [Claim(c, o) for c, o in zip(res.exit_codes, res.outputs)]
    p, sec = res.params, res.security
    if args.json:
        report.update(ok=True, exit_code=EXIT_OK, status=EXIT_OK, block_version=2,
                      dev=res.dev, seconds=res.seconds, transactions=tx_json(block, claims),
                      max_cycles=res.max_cycles, state_in=res.state_in.hex(),
                      state_out=res.state_out.hex(),
                      params=None if res.dev else dict(vars(p)), **_security_json(sec))
        if res.parts:
            report.update(parts=[q.to_json() for q in res.parts],
                          security_bits=res.security_bits)
        print(json.dumps(report))
        return EXIT_OK
    if not args.quiet:
        kind = "development-mode proof accepted" if res.dev else "proof OK"
        print(f"{kind} for block {args.block} ({res.seconds:.2f}s): "
              f"{len(claims)} transactions within max_cycles {res.max_cycles:,}")
        for line in tx_lines(block, claims):
            print(line)
        print(f"state in  {res.state_in.hex()}")
        print(f"state out {res.state_out.hex()}")
        for line in part_lines(res.parts):
            print(line)
        if not res.dev:
            print(_params_line(p, sec, res.security_bits, args.min_security_bits))
        if args.verbose and sec is not None:
            print(f"  security: {sec.describe()}")
    return EXIT_OK


def part_lines(parts) -> list:
    """A block verified in epochs: a line per part (kind, transactions, verify time)."""
    if not parts:
        return []
    out = [f"verified in {len(parts)} parts (the weakest part's security below):"]
    for j, q in enumerate(parts):
        last = q.first + q.count - 1
        txs = f"tx {q.first}" + (f"..{last}" if last != q.first else "")
        what = f"{q.segments} segments" if q.kind == "long" else "one block STARK"
        out.append(f"  part {j}: {q.kind} {txs}: {what}, {q.seconds:.3f}s")
    return out


def _verify_program(args, data: bytes, report: dict, fail) -> int:
    from ...rv32.elf import load_elf
    from ...rv32.errors import ElfError
    from ...verifier.errors import VerificationError
    from ..programs.verify import verify_program
    try:
        program = load_elf(args.elf)
    except OSError as exc:
        raise fail(EXIT_USAGE, f"cannot read {args.elf}: {exc.strerror or exc}", exc) from None
    except ElfError as exc:
        raise fail(EXIT_USAGE, f"{args.elf}: not a program the RV32IM machine runs: {exc}",
                   exc) from None
    inp = b""
    if args.input is not None:
        try:
            with open(args.input, "rb") as fh:
                inp = fh.read()
        except OSError as exc:
            raise fail(EXIT_USAGE, f"cannot read {args.input}: {exc.strerror or exc}",
                       exc) from None
    try:
        result = verify_program(data, program, inp, max_cycles=args.max_cycles,
                                min_security_bits=args.min_security_bits,
                                accept_dev=args.accept_dev)
    except VerificationError as exc:
        raise _refusal(exc, fail) from None
    except (TypeError, ValueError) as exc:          # --max-cycles, an over-long input
        raise fail(EXIT_USAGE, _option_words(str(exc)), exc) from None
    from ..programs.segment_proof import VerifiedSegments
    if isinstance(result, VerifiedSegments):
        return _segments_ok(args, result, report)
    p, sec = result.params, result.security
    if args.json:
        report.update(ok=True, status=EXIT_OK, exit_code=result.exit_code,
                      output=result.output.hex(), output_len=len(result.output),
                      max_cycles=result.max_cycles, cycles=result.cycles,
                      program_digest=result.program_digest.hex(),
                      input_sha256=result.input_sha256.hex(), input_len=len(inp),
                      dev=result.dev, seconds=result.seconds,
                      params=None if result.dev else dict(vars(p)), **_security_json(sec))
        print(json.dumps(report))
        return EXIT_OK
    if not args.quiet:
        kind = "development-mode proof accepted" if result.dev else "proof OK"
        on = f" on {args.input}" if args.input else " on the empty input"
        print(f"{kind} for program {args.elf}{on} ({result.seconds:.2f}s): exit code "
              f"{result.exit_code}, {len(result.output):,} output bytes, within max_cycles "
              f"{result.max_cycles:,}")
        out = result.output
        print(f"output: {out[:200]!r}" + (f" ... ({len(out):,} bytes)" if len(out) > 200 else ""))
        if not result.dev:
            print(_params_line(p, sec, result.security_bits, args.min_security_bits))
        if args.verbose:
            if sec is not None:
                print(f"  security: {sec.describe()}")
            print(f"  program digest {result.program_digest.hex()}")
            print(f"  input sha256   {result.input_sha256.hex()} ({len(inp):,} bytes)")
            print(f"  output (hex)   {out.hex()}")
    return EXIT_OK


def _segments_ok(args, result, report: dict) -> int:
    """A verified segmented run: the statement, the segments and their verify times."""
    if args.json:
        report.update(ok=True, status=EXIT_OK, exit_code=result.exit_code,
                      output=result.output.hex(), output_len=len(result.output),
                      max_cycles=result.max_cycles, cycles=result.cycles,
                      claimed_cycles=result.claimed_cycles,
                      segments=result.segments, segment_seconds=list(result.segment_seconds),
                      program_digest=result.program_digest.hex(), seconds=result.seconds,
                      security_bits=result.security_bits, params=dict(vars(result.params)))
        print(json.dumps(report))
        return EXIT_OK
    if not args.quiet:
        on = f" on {args.input}" if args.input else " on the empty input"
        ss = result.segment_seconds
        print(f"proof OK for program {args.elf}{on} ({result.seconds:.2f}s): exit code "
              f"{result.exit_code}, {len(result.output):,} output bytes, in "
              f"{result.segments} segments, within max_cycles {result.max_cycles:,} (the "
              f"file counts {result.claimed_cycles:,} cycles; the proofs bind the exit "
              f"within max_cycles, not the count)")
        out = result.output
        print(f"output: {out[:200]!r}" + (f" ... ({len(out):,} bytes)" if len(out) > 200 else ""))
        print(f"segments verified in {min(ss):.3f}..{max(ss):.3f} s each; "
              f"{result.security_bits} bits (the weakest segment's)")
    return EXIT_OK


def _option_words(message: str) -> str:
    """A library argument error in the command's words."""
    return message.replace("max_cycles", "--max-cycles")


__all__ = ["run_verify", "verify_parser"]
