"""``prove BLOCK.json`` for a block of RISC-V transactions (docs/block-format.md), and what
``verify PROOF --block BLOCK.json`` (:mod:`prover.cli.verify`) shares with it:
:mod:`prover.cli` hands every file that is not an ELF over.
The options are the block's -- backends, ``--execute-only``, development mode, ``--json``,
``--stats-json``, ``--timeline``, the self-check, ``--precompile`` -- and so are the exit
statuses: 2 for a malformed block (``error: FILE: $.transactions[1].input: ...``), 1 for
one that cannot be proven (a transaction fails or a claim is false) or a proof that does
not verify, naming the transaction.

In these commands' JSON, ``status`` and the top-level ``exit_code`` are the command's
exit status; each entry of ``transactions`` has the
transaction's ``exit_code`` and ``output`` (hex).
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time

from ..common.text import show_output
from . import prove as _P
from .common import (DEFAULT_MIN_SECURITY_BITS, EXIT_INVALID, EXIT_OK, EXIT_USAGE, Fail,
                     check_outputs, default_output, err, version, warn)


def load(path: str, raw: bytes | None = None):
    """The block at ``path`` (its bytes ``raw`` when read already); exit 2 for a file that
    cannot be read or a malformed block, with the JSON path of the bad field."""
    from ...rv32.blockfile import BlockError, load_block, loads_block
    try:
        if raw is None:
            return load_block(path)
        return loads_block(raw, os.path.dirname(os.path.abspath(path)))
    except OSError as exc:
        raise Fail(EXIT_USAGE, f"cannot read {path}: {exc.strerror or exc}") from None
    except BlockError as exc:
        raise Fail(EXIT_USAGE, f"{path}: {exc}") from None


def _referenced_files(path: str, raw: bytes) -> list:
    """``[(what, path)]``: the block file and every ELF and input file it names (no output
    may overwrite them)."""
    base = os.path.dirname(os.path.abspath(path))
    files = [("block", path)]
    obj = json.loads(raw)
    for key, entries in (("programs", obj.get("programs")), ("transactions",
                                                             obj.get("transactions"))):
        for i, e in enumerate(entries or []):
            for field in ("elf", "input_file"):
                if isinstance(e, dict) and isinstance(e.get(field), str):
                    files.append((f"$.{key}[{i}].{field}", os.path.join(base, e[field])))
    return files


def tx_json(block, claims) -> list:
    return [{"index": i, "program": tx.name, "exit_code": c.exit_code,
             "output": c.output.hex(), "output_len": len(c.output)}
            for i, (tx, c) in enumerate(zip(block.transactions, claims))]


def tx_lines(block, claims) -> list:
    return [f"  tx {i} ({tx.name}): exit code {c.exit_code}, output ({len(c.output):,} "
            f"bytes): {show_output(c.output)}"
            for i, (tx, c) in enumerate(zip(block.transactions, claims))]


class Claim:
    """A transaction's proven exit code and output."""
    __slots__ = ("exit_code", "output")

    def __init__(self, exit_code: int, output: bytes):
        self.exit_code, self.output = exit_code, output


def _failure_record(exc) -> dict:
    return {"error": type(exc).__name__, "message": str(exc),
            "details": list(getattr(exc, "details", ()) or ())}


# --------------------------------------------------------------------------- prove

def run_prove_txblock(args, raw: bytes, t_start: float, kernels_cached) -> int:
    """Prove the version-2 block in ``raw`` (the file ``args.block``'s bytes);
    ``kernels_cached()`` says whether numba's cache holds the host kernels."""
    from ...rv32 import block as rblock
    path = args.block
    block = load(path, raw)
    n = len(block.transactions)
    out = None if (args.execute_only or args.precompile) else (
        args.output or default_output(path))
    if out is not None:
        check_outputs(args, out, _referenced_files(path, raw))
    from .program import segment_cycles_of
    seg = segment_cycles_of(args)           # validated before any work
    session = _P.setup(args, out, tables=rblock.num_tables(n),
                       **({} if seg is None else {"segment_cycles": seg}))
    prover, dev, quiet = session.prover, session.dev, session.quiet
    if args.precompile:
        return _P.precompile_steps(prover, lambda show: prover.precompile_txblock(
            block, progress=show), quiet, "block")
    meta = {"steadfast_version": version(), "block": path, "block_version": 2,
            "block_sha256": hashlib.sha256(raw).hexdigest(), "max_cycles": block.max_cycles,
            "state_in": block.state_in.hex(), "backend": prover.backend}
    if args.execute_only:
        return _execute_only(prover, block, args, meta)
    params = session.cfg.params()
    _P.warn_weak_params(params, dev)
    cold = not kernels_cached()
    _P.cold_start(cold, quiet)
    if not quiet:
        progs = len({tx.program.digest() for tx in block.transactions})
        print(f"proving {path}: {n} transactions, {progs} programs, max_cycles "
              f"{block.max_cycles:,}, backend {prover.backend}", file=sys.stderr)
    _P.proof_meta(meta, session, out, params, ("block", "block_sha256", "device"))
    proof, failure = _P.run_proof(lambda: prover.prove_txblock(block), session, "block")
    if failure is not None:
        _P.fail_with_stats(args, session, failure, dict(
            meta, ok=False, proof=None, failure=failure.record, exit_code=failure.code,
            status=failure.code))
    data = proof.to_bytes()
    st = proof.stats
    claims = proof.claims
    parts = getattr(proof, "parts", None)
    sec = None if dev else (_security_epochs(block, data) if parts
                            else _security(block, proof, params))
    wall = time.perf_counter() - t_start
    stats = dict(st.to_json(), **meta, ok=True, proof_file_bytes=len(data), exit_code=EXIT_OK,
                 status=EXIT_OK, transactions=tx_json(block, claims),
                 state_out=proof.state_out.hex(), wall_s=wall)
    if parts:
        stats.update(segment_cycles=proof.segment_cycles, parts=[
            {"kind": "long" if p.kind else "group", "first": p.first, "count": p.count,
             "seconds": round(s, 4)} for p, s in zip(parts, proof.part_seconds)])
    if _P.finish(args, session, out, data, stats, sec, "block"):
        print(_P.wrote_line(out, data, st, wall, cold, dev, "block"))
        print(f"{n} transactions" + (":" if n else ""))
        for line in tx_lines(block, claims):
            print(line)
        print(f"state out {proof.state_out.hex()}")
        if parts:
            print(f"proved in {len(parts)} parts (epochs of {proof.segment_cycles:,} cycles):")
            for j, (p, s) in enumerate(zip(parts, proof.part_seconds)):
                last = p.first + p.count - 1
                txs = f"tx {p.first}" + (f"..{last}" if last != p.first else "")
                what = "in segments" if p.kind else "one block STARK"
                print(f"  part {j}: {txs} {what}, {len(p.proof):,} bytes, {s:.1f}s")
        if dev:
            print(_P.DEV_LINE)
            return EXIT_OK
        if not parts:               # a block in epochs: the per-part lines above
            print(st.summary())
        if args.verbose:
            _P.print_verbose(st)
    return EXIT_OK


def _security(block, proof, params):
    """The proof's conjectured security for its tables (the AIRs a verifier builds)."""
    from ...rv32 import block as rblock
    from ...verifier.security import proof_security
    from ..engine.air_proof import decode_proof
    decoded = decode_proof(proof.proof)
    n = len(block.transactions)
    claims = rblock.claims_of(decoded, n)
    tx_slots, p2 = rblock.slots_of(decoded, n)
    airs = rblock.block_airs([t.program for t in block.transactions],
                             [t.input for t in block.transactions],
                             [c.output for c in claims], params.log_blowup, tx_slots, p2)
    return proof_security(params, airs, [t.log_n for t in decoded.tables])


class _Bits:
    """The security a verifier finds for a block proved in epochs: its weakest part's."""

    def __init__(self, bits: int):
        self.bits, self.limiting, self.terms = bits, "the weakest part", {}


def _security_epochs(block, data: bytes):
    """A block proved in epochs: the weakest part's conjectured bits, as verify finds
    them (every part verified once more, min_security_bits 0: about 50 ms a segment)."""
    from ..blocks.proof import verify_txblock
    return _Bits(verify_txblock(data, block, min_security_bits=0).security_bits)


def _execute_only(prover, block, args, meta: dict) -> int:
    """``prove BLOCK.json --execute-only``: every transaction's run and the proof's size,
    no proof; a false claim is reported (``claims_ok`` false, exit 1)."""
    from ..common.errors import UnprovableBlock
    try:
        rep = prover.execute_txblock(block)
    except UnprovableBlock as exc:
        if args.json:
            print(json.dumps(dict(meta, ok=False, status=EXIT_INVALID, exit_code=EXIT_INVALID,
                                  failure=_failure_record(exc))))
        lines = [f"block cannot be proven: {exc}"] + [f"  {d}" for d in exc.details]
        raise Fail(EXIT_INVALID, "\n".join(lines)) from None
    code = EXIT_OK if rep.claims_ok else EXIT_INVALID
    if args.json:
        print(json.dumps(dict(meta, **rep.to_json(), ok=rep.claims_ok, status=code,
                              exit_code=code,
                              min_security_bits_default=DEFAULT_MIN_SECURITY_BITS)))
    elif not args.quiet:
        print(rep.summary())
    if rep.security_bits < DEFAULT_MIN_SECURITY_BITS:
        warn(f"these parameters give this block {rep.security_bits} conjectured security "
             f"bits; a default verify requires {DEFAULT_MIN_SECURITY_BITS}")
    if not rep.claims_ok:
        err("the block's claims are not what execution does: " + "; ".join(
            t.claim_error for t in rep.transactions if t.claims_ok is False))
    return code


__all__ = ["run_prove_txblock", "load", "tx_json", "tx_lines",
           "Claim"]
