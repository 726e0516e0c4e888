"""A proof of a block of RISC-V transactions (rv32/block.py) and its file, and its
verification against the block (docs/api.md "Blocks").

File layout, all little-endian::

    b"STB2"          magic (b"STD2": a development-mode fake, proves nothing)
    u16 version      3 (2: before the P2CALL output limbs were range-checked, #40)
    u16 reserved     0
    u32 n_tx         the block's transactions
    u32 n            the body's length
    n bytes          the protocol proof (docs/protocol.md), or for a fake
                     (prover.programs.proof.dev_body): DEV_NOTICE, u32 tables, then per
                     table u32 count and count u32 public values

The block (its programs and inputs) is not in the file: the verifier holds it (``verify
PROOF --block BLOCK.json``), as a node holds the block it received; the proof's public
values carry every transaction's program digest, input digest, exit code, output and
max_cycles.
"""
from __future__ import annotations

import logging
import os
import struct
import time
from dataclasses import dataclass, field
from typing import Union

from ...rv32 import block as rblock
from ...rv32.blockfile import MAX_TRANSACTIONS, Block, load_block, loads_block, parse_block
from ...rv32.statement import PV_MAX_CYCLES, Claim, claimed_output
from ...rv32.tables import INDEX
from ...verifier import verify as _verify_proof
from ...verifier.errors import PublicValuesError, ShapeError
from ...verifier.proof_format import Params, decode
from ...verifier.security import SecurityReport
from ...verifier.verify import (DEFAULT_MIN_SECURITY_BITS, check_security,
                                validate_min_security_bits)

from ..engine.air_proof import decode_proof, read_proof
from ..common.errors import DevProofRefused
from ..programs.proof import dev_body as _dev_body, parse_dev_body
from ..common.proof_file import ProofFile
from ..common.stats import ProofStats
from ...verifier.errors import VerificationError
from .parts import EPOCHS_MAGIC, PartReport

log = logging.getLogger("steadfast.prover")

MAGIC = b"STB2"
DEV_MAGIC = b"STD2"
VERSION = 3                 # 3: P2CALL range-checks its output limbs (#40)
MAX_BODY = 1 << 31
DEV_NOTICE = (b"STEADFAST DEVELOPMENT-MODE BLOCK PROOF: execution and constraint check only; "
              b"NOT A STARK, PROVES NOTHING\n")


@dataclass(frozen=True)
class TxBlockProof(ProofFile):
    """The proof that every transaction of a block, in order, exits with
    :attr:`exit_codes` having written :attr:`outputs` to fd 1.  ``proof``: the protocol
    proof (a fake's body when ``dev``); ``stats``: the prover's record (None once read
    back); ``state_out``: the chain state after the block (rv32/block.py), set by the
    prover and by :func:`verify_txblock`, not stored in the file."""
    n_tx: int
    proof: bytes
    stats: ProofStats | None = field(default=None, compare=False, repr=False)
    dev: bool = False
    state_out: bytes | None = field(default=None, compare=False)

    @property
    def public_values(self) -> list:
        if self.dev:
            return _dev_values(self.proof, self.n_tx)
        return [[int(v) for v in t.public_values] for t in decode(self.proof).tables]

    @property
    def claims(self) -> list:
        """Every transaction's :class:`rv32.statement.Claim` (exit code, output)."""
        pvs = self.public_values
        return [claimed_output(rblock.tx_public_values(pvs, i)) for i in range(self.n_tx)]

    @property
    def exit_codes(self) -> list:
        return [c.exit_code for c in self.claims]

    @property
    def outputs(self) -> list:
        return [c.output for c in self.claims]

    def to_bytes(self) -> bytes:
        magic = DEV_MAGIC if self.dev else MAGIC
        return b"".join([magic, struct.pack("<HHII", VERSION, 0, self.n_tx, len(self.proof)),
                         self.proof])

    @classmethod
    def from_bytes(cls, data: bytes) -> "TxBlockProof":
        """Parse; any malformation is a :class:`verifier.errors.ShapeError`."""
        data = bytes(data)
        if data[:4] in (b"STRV", b"STRD"):
            raise ShapeError("this is a program proof, not a block proof (verify it with "
                             "--elf)")
        if len(data) < 16 or data[:4] not in (MAGIC, DEV_MAGIC):
            raise ShapeError("not a Steadfast block proof (bad magic)")
        dev = data[:4] == DEV_MAGIC
        version, reserved, n_tx, n = struct.unpack_from("<HHII", data, 4)
        if version != VERSION or reserved:
            raise ShapeError(f"unsupported block-proof version {version}")
        if n_tx > MAX_TRANSACTIONS:
            raise ShapeError(f"a block proof of {n_tx} transactions (at most "
                             f"{MAX_TRANSACTIONS})")
        if len(data) != 16 + n:
            raise ShapeError(f"block proof of {len(data)} bytes does not match its header "
                             f"({16 + n})")
        body = data[16:]
        if dev:
            _dev_values(body, n_tx)
        return cls(n_tx, body, dev=dev)


def dev_body(public_values) -> bytes:
    """A development-mode fake's body (prover.programs.proof.dev_body, this notice)."""
    return _dev_body(public_values, DEV_NOTICE)


def _dev_values(body: bytes, n_tx: int) -> list:
    return parse_dev_body(body, DEV_NOTICE, rblock.num_tables(n_tx), "block proof")


#: What a block argument may be: a parsed Block, its JSON object (dict), JSON text (str
#: starting with "{", or bytes), or a path to the block file.
TxBlockLike = Union[Block, dict, str, bytes, os.PathLike[str]]


def as_txblock(block: TxBlockLike) -> Block:
    """A block argument as a parsed :class:`rv32.blockfile.Block`: a Block, its JSON
    object (dict), JSON text, or a path (relative ELF and input paths from its folder)."""
    if isinstance(block, Block):
        return block
    if isinstance(block, dict):
        return parse_block(block)
    if isinstance(block, (str, bytes)) and (isinstance(block, bytes)
                                            or block.lstrip().startswith("{")):
        return loads_block(block)
    if isinstance(block, (str, os.PathLike)):
        return load_block(block)
    raise TypeError(f"a block is a Block, a dict, JSON text or a path, not "
                    f"{type(block).__name__}")


# --------------------------------------------------------------------------- verifying

@dataclass(frozen=True)
class VerifiedTxBlock:
    """What a successful :func:`verify_txblock` establishes: every transaction's exit code
    and output (in order) for the block's programs and inputs within its max_cycles, and
    the chain state after the block."""
    exit_codes: list[int]
    outputs: list[bytes]
    max_cycles: int
    state_in: bytes
    state_out: bytes
    public_values: list[list[int]] = field(repr=False)
    seconds: float = 0.0
    params: Params = field(default_factory=Params)
    security: SecurityReport | None = None
    dev: bool = False
    #: a block proved in epochs: each part's :class:`prover.blocks.epochs.PartReport`
    parts: tuple[PartReport, ...] = ()
    bits: int = 0                   # in epochs: the weakest part's conjectured bits

    @property
    def security_bits(self) -> int:
        return self.security.bits if self.security is not None else self.bits


def verify_txblock(proof: TxBlockProof | bytes | str | os.PathLike[str],
                   block: TxBlockLike, *,
                   min_security_bits: int | None = DEFAULT_MIN_SECURITY_BITS,
                   accept_dev: bool = False) -> VerifiedTxBlock:
    """Verify a block proof (a :class:`TxBlockProof`, its bytes or a path) against
    ``block``: the AIRs are rebuilt from every transaction's program and input and the
    output the proof claims, the parameters' security checked before any hashing, every
    transaction's statement values compared (naming the transaction and what differs),
    the block's claimed outputs and exit codes compared with the proof's, then the
    protocol verifier runs.  Raises a :class:`verifier.errors.VerificationError`
    subclass on rejection.  A block proved in epochs (a
    :class:`prover.blocks.epochs.BlockEpochsProof`, b"STBE") is verified part by part
    (:func:`prover.blocks.epochs.verify_epochs`; the result's ``parts``)."""
    min_security_bits = validate_min_security_bits(min_security_bits)
    if isinstance(proof, (str, os.PathLike)):
        with open(proof, "rb") as fh:
            proof = fh.read()
    raw = isinstance(proof, (bytes, bytearray, memoryview))
    if not (isinstance(proof, TxBlockProof) or raw and bytes(proof[:4]) in (MAGIC, DEV_MAGIC)):
        # not one STARK: a block in epochs? Its modules (segments, their execution) load
        # only then, so that verifying a plain block does not import them
        from .epochs import BlockEpochsProof
        if isinstance(proof, BlockEpochsProof) or (raw and bytes(proof[:4]) == EPOCHS_MAGIC):
            return verify_epochs(proof, as_txblock(block),
                                 min_security_bits=min_security_bits)
    proof = read_proof(proof, TxBlockProof, "a TxBlockProof")
    return verify_block_body(proof, as_txblock(block), min_security_bits,
                             accept_dev=accept_dev)


def verify_block_body(proof: TxBlockProof, blk: Block, min_security_bits, *,
                      accept_dev: bool = False, first: int = 0) -> VerifiedTxBlock:
    """:func:`verify_txblock` of one block STARK (``first``: the block index of its first
    transaction, for the messages of a block proved in epochs)."""
    t0 = time.perf_counter()
    n = len(blk.transactions)
    if proof.n_tx != n:
        raise ShapeError(f"the proof is for a block of {proof.n_tx} transactions, this block "
                         f"has {n}")
    if proof.dev:
        if not accept_dev:
            raise DevProofRefused("this is a development-mode proof (made with "
                                  "PROVER_DEV_MODE=1 / dev_mode=True): execution and "
                                  "constraint check only, no STARK, it proves nothing; "
                                  "accept it only in development with --accept-dev (verify) "
                                  "/ accept_dev=True (library)")
        got = proof.public_values
        claims = [claimed_output(rblock.tx_public_values(got, i)) for i in range(n)]
        _check_statement(blk, claims, got, first)
        log.warning("accepted a development-mode proof: it proves nothing")
        return _result(blk, claims, got, t0, Params(), None, dev=True)
    decoded = decode_proof(proof.proof)
    claims = rblock.claims_of(decoded, n)
    got = [[int(v) for v in t.public_values] for t in decoded.tables]
    tx_slots, p2 = rblock.slots_of(decoded, n)
    progs = [t.program for t in blk.transactions]
    ins = [t.input for t in blk.transactions]
    outs = [c.output for c in claims]
    airs = rblock.block_airs(progs, ins, outs, decoded.params.log_blowup, tx_slots, p2)
    sec = check_security(decoded.params, min_security_bits, airs,
                         [t.log_n for t in decoded.tables])
    rblock.check_block_size(decoded, airs)
    expected = _check_statement(blk, claims, got, first, tx_slots)
    res = _verify_proof(decoded, airs, expected, min_security_bits=min_security_bits)
    return _result(blk, claims, got, t0, decoded.params, res.security or sec)


def _check_statement(blk: Block, claims: list, got: list, first: int = 0,
                     tx_slots=()) -> list:
    """Every transaction's public values are its statement's (PublicValuesError naming the
    transaction and what differs) and the block's claims hold; returns the expected
    public values."""
    from ..programs.verify import _check_statement as check_tx
    progs = [t.program for t in blk.transactions]
    ins = [t.input for t in blk.transactions]
    expected = rblock.block_public_values(progs, ins, [c.output for c in claims],
                                          [c.exit_code for c in claims], blk.max_cycles,
                                          tx_slots)
    want = rblock.stark_limit(blk.max_cycles)
    for k, (tx, claim) in enumerate(zip(blk.transactions, claims)):
        i = first + k
        e = rblock.tx_public_values(expected, k)
        g = rblock.tx_public_values(got, k)
        lim = g[INDEX["registers"]][PV_MAX_CYCLES] if len(g[INDEX["registers"]]) > \
            PV_MAX_CYCLES else None
        if lim is not None and lim != want:
            raise PublicValuesError(f"transaction {i}: the proof is for max_cycles {lim:,}, "
                                    f"the block's is {blk.max_cycles:,}"
                                    + (f" (a block STARK carries {want:,})"
                                       if want != blk.max_cycles else ""), "rv32_registers")
        try:
            check_tx(e, g)
        except PublicValuesError as exc:
            msg = str(exc)
            if exc.table and msg.startswith(f"[{exc.table}] "):
                msg = msg[len(exc.table) + 3:]
            raise PublicValuesError(f"transaction {i}: {msg}", exc.table) from None
        _check_claims(i, tx, claim)
    base = rblock.num_tables(len(blk.transactions))     # the shared tables end there
    shared = slice(base - len(rblock.SHARED), base)
    for a, b in zip(expected[shared], got[shared]):
        if a != b:
            raise PublicValuesError("a shared table carries public values", "rv32_bytes")
    return expected


def _check_claims(i: int, tx, claim: Claim) -> None:
    if tx.exit_code is not None and tx.exit_code != claim.exit_code:
        raise PublicValuesError(f"transaction {i}: the block claims exit code {tx.exit_code}, "
                                f"the proof {claim.exit_code}", "rv32_registers")
    if tx.output is not None and tx.output != claim.output:
        raise PublicValuesError(f"transaction {i}: the block's claimed output "
                                f"({len(tx.output)} bytes) is not the proof's "
                                f"({len(claim.output)} bytes{_first_diff(tx.output, claim.output)})",
                                "rv32_io")


def _first_diff(a: bytes, b: bytes) -> str:
    for k, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"; first difference at byte {k}"
    return ""


def state_out_of(blk: Block, results) -> bytes:
    """The chain state after ``blk`` given every transaction's result -- anything with
    ``exit_code`` and ``output``: a Claim read off a proof, or an execution."""
    return rblock.state_out(blk.state_in, [(t.program.digest(), t.input, int(r.exit_code),
                                            bytes(r.output))
                                           for t, r in zip(blk.transactions, results)])


def _result(blk: Block, claims, got, t0, params, security, dev: bool = False):
    return VerifiedTxBlock([c.exit_code for c in claims], [c.output for c in claims],
                           blk.max_cycles, blk.state_in, state_out_of(blk, claims),
                           got, time.perf_counter() - t0, params, security, dev)


def verify_epochs(proof: "BlockEpochsProof | bytes | str | os.PathLike[str]", blk: Block, *,
                  min_security_bits, accept_dev: bool = False):
    """Verify a block proof in epochs against ``blk`` (docs/rv32.md "Blocks in epochs")
    -> :class:`VerifiedTxBlock` with ``parts``; any refusal is a
    :class:`VerificationError` subclass naming the part."""
    from ..programs.segment_proof import SegmentedProof, verify_segmented
    from .epochs import GROUP, KIND_NAMES, BlockEpochsProof, check_cover
    from dataclasses import replace
    t0 = time.perf_counter()
    if isinstance(proof, (str, os.PathLike)):
        proof = BlockEpochsProof.load(proof)
    elif isinstance(proof, (bytes, bytearray, memoryview)):
        proof = BlockEpochsProof.from_bytes(bytes(proof))
    n = len(blk.transactions)
    if proof.n_tx != n:
        raise ShapeError(f"the proof is for a block of {proof.n_tx} transactions, this block "
                         f"has {n}")
    check_cover(proof.parts, n)
    claims, reports, bits, params, got = [], [], None, None, []
    for j, p in enumerate(proof.parts):
        t1 = time.perf_counter()
        txs = blk.transactions[p.first:p.stop]
        try:
            if p.kind == GROUP:
                sub = replace(blk, transactions=txs)
                res = verify_block_body(TxBlockProof(p.count, p.proof), sub,
                                        min_security_bits, first=p.first)
                part_claims, segs = [Claim(c, o) for c, o in zip(res.exit_codes, res.outputs)], 0
                sec, pp, cycles = res.security_bits, res.params, None
                got += res.public_values
            else:
                seg = SegmentedProof.from_bytes(p.proof)
                if seg.segment_cycles != proof.segment_cycles:
                    raise ShapeError(f"segments of {seg.segment_cycles:,} cycles in a block "
                                     f"proved in epochs of {proof.segment_cycles:,}")
                tx = txs[0]
                res = verify_segmented(seg, tx.program, tx.input, blk.max_cycles,
                                       min_security_bits)
                part_claims = [Claim(res.exit_code, res.output)]
                segs, sec, pp, cycles = res.segments, res.security_bits, res.params, res.cycles
                _check_claims(p.first, tx, part_claims[0])
        except VerificationError as e:
            raise type(e)(f"part {j}, the {p.name}: {e}") from None
        if params is not None and pp != params:
            raise ShapeError(f"part {j}: other parameters than part 0's")
        params = pp
        bits = sec if bits is None else min(bits, sec)
        claims += part_claims
        reports.append(PartReport(KIND_NAMES[p.kind], p.first, p.count, segs, cycles,
                                  time.perf_counter() - t1))
    out = _result(blk, claims, got, t0, params, None)
    return replace(out, parts=tuple(reports), bits=int(bits or 0))


def is_txblock_proof(data: bytes) -> bool:
    """A block proof's magic: one STARK (STB2), its fake (STD2) or in epochs (STBE)."""
    return bytes(data[:4]) in (MAGIC, DEV_MAGIC, EPOCHS_MAGIC)


__all__ = ["TxBlockProof", "VerifiedTxBlock", "verify_txblock", "as_txblock", "dev_body",
           "TxBlockLike", "state_out_of",
           "is_txblock_proof", "MAGIC", "DEV_MAGIC", "DEV_NOTICE"]

