"""Blocks in epochs (docs/rv32.md "Blocks in epochs", prover/blocks/epochs.py): a block
that does not fit one epoch of segment_cycles cycles is proved as parts -- groups of short
transactions (block STARKs) and long transactions (segmented proofs) -- in one STBE file;
a block within one epoch keeps its one-STARK bytes.  The verifier accepts the parts only
if they cover the block's transactions exactly once, in order, each proving its own
transactions; every refusal is typed.

WEAK PARAMETERS (6 queries, 1 bit of grinding): these tests check the parts, the bytes and
the refusals, not security; they verify with min_security_bits=0."""
from __future__ import annotations

import dataclasses
import struct

import pytest
from hypothesis import given, settings, strategies as st

from steadfast import rv32
from steadfast.prover.api import Prover, verify
from steadfast.prover.blocks.epochs import (GROUP, LONG, BlockEpochsProof, Part,
                                            check_cover, plan_parts)
from steadfast.prover.blocks.proof import TxBlockProof
from steadfast.prover.common.errors import UnprovableBlock
from steadfast.prover.programs.segment_proof import SegmentedProof
from steadfast.rv32 import block as rblock
from steadfast.rv32.blockfile import Block, Transaction
from steadfast.verifier.errors import PublicValuesError, ShapeError, VerificationError

import txblocks
from test_rv32_segments import FAST, INPUT, program

S = 1024
CFG = dataclasses.replace(FAST, segment_cycles=S)


def _long(data: bytes = INPUT) -> Transaction:
    return Transaction(program(900), data, None, None, "loop")


def _long_of(iterations: int) -> Transaction:
    return Transaction(program(iterations), INPUT, None, None, "loop")


def _block(hello_in: bytes = b"", long_in: bytes = INPUT, **claims) -> Block:
    """hello, a long loop (9 segments of 2^10), then eight hellos (141 cycles each: seven
    fit one epoch, the eighth starts another)."""
    txs = [txblocks.tx("hello", hello_in), _long(long_in)] + [txblocks.tx("hello")] * 8
    for i, (code, out) in claims.items():
        txs[int(i[1:])] = dataclasses.replace(txs[int(i[1:])], exit_code=code, output=out)
    return Block(tuple(txs), 1 << 20)


@pytest.fixture(scope="module")
def proved():
    blk = _block()
    return blk, Prover(CFG).prove_block(blk)


def _verify(data, blk, **kw):
    return verify(data, blk, min_security_bits=0, **kw)


def _with_parts(proof: BlockEpochsProof, parts) -> bytes:
    return dataclasses.replace(proof, parts=tuple(parts)).to_bytes()


# --------------------------------------------------------------------------- the plan

@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(1, 3000)), max_size=40))
def test_plan_covers_every_transaction_once_in_order(cycles):
    """The greedy plan: the parts cover the transactions in order, a long one (None or
    more than S cycles) alone, a group within S cycles in all and not extendable by the
    next transaction."""
    plan = plan_parts(cycles, S)
    parts = [Part(k, a, c, b"") for k, a, c in plan]
    check_cover(parts, len(cycles))
    for j, (k, a, c) in enumerate(plan):
        run = cycles[a:a + c]
        if k == LONG:
            assert c == 1 and (run[0] is None or run[0] > S)
            continue
        assert all(x is not None and x <= S for x in run) and sum(run) <= S
        nxt = cycles[a + c] if a + c < len(cycles) else None
        if j + 1 < len(plan) and plan[j + 1][0] == GROUP:
            assert sum(run) + nxt > S


def test_cover_refusals():
    ok = [Part(GROUP, 0, 2, b""), Part(LONG, 2, 1, b""), Part(GROUP, 3, 1, b"")]
    check_cover(ok, 4)
    for parts, n, msg in [
            (ok[:2], 4, "the parts end at transaction 3"),
            ([ok[0], ok[0]] + ok[1:], 4, "repeats or overlaps"),
            ([ok[1], ok[0], ok[2]], 4, "skips"),
            ([ok[0], ok[2], ok[1]], 4, "skips"),
            ([ok[0], Part(LONG, 2, 2, b"")], 4, "a long part of 2"),
            ([Part(GROUP, 0, 0, b"")] + ok, 4, "a group part of 0"),
            (ok, 3, "the block has 3")]:
        with pytest.raises(ShapeError, match=msg):
            check_cover(parts, n)


# --------------------------------------------------------------------------- proving

def test_a_block_within_one_epoch_keeps_its_one_stark_bytes():
    """segment_cycles changes nothing for a block that fits one epoch: the STB2 file,
    byte for byte the proof made without epochs."""
    blk = txblocks.block(txblocks.tx("hello"), txblocks.tx("hello", b"ab"))
    a = Prover(CFG).prove_block(blk)
    b = Prover(dataclasses.replace(CFG, segment_cycles=None)).prove_block(blk)
    assert isinstance(a, TxBlockProof) and a.to_bytes() == b.to_bytes()
    assert a.to_bytes()[:4] == b"STB2"


def test_a_long_block_is_proved_in_parts_and_verifies(proved):
    """The plan (hello | the long loop in segments | seven hellos | one hello), the
    results the machine gives, the chain state the one-STARK proof of the same block
    gives, every part's verify time and the long part's segments."""
    blk, proof = proved
    assert isinstance(proof, BlockEpochsProof)
    assert [(p.kind, p.first, p.count) for p in proof.parts] == \
        [(GROUP, 0, 1), (LONG, 1, 1), (GROUP, 2, 7), (GROUP, 9, 1)]
    runs = [rv32.execute(t.program, t.input, 1 << 20) for t in blk.transactions]
    assert proof.exit_codes == [r.exit_code for r in runs]
    assert proof.outputs == [bytes(r.output) for r in runs]
    c = proof.stats.counters
    assert c["parts"]["groups"] == 3 and c["parts"]["long"] == 1
    assert c["parts"]["segments"] == -(-runs[1].cycles // S)
    assert c["parts"]["downgrades"] == [0, 0, 0, 0]
    data = proof.to_bytes()
    assert data[:4] == b"STBE" and BlockEpochsProof.from_bytes(data) == \
        dataclasses.replace(proof, stats=None, state_out=None)
    res = _verify(data, blk)
    assert res.exit_codes == proof.exit_codes and res.outputs == proof.outputs
    # the object prove_block returns, as the library's verify takes it (docs/api.md)
    assert _verify(proof, blk).outputs == res.outputs
    one = Prover(dataclasses.replace(CFG, segment_cycles=None)).prove_block(blk)
    assert res.state_out == proof.state_out == one.state_out
    assert [(p.kind, p.segments) for p in res.parts] == \
        [("group", 0), ("long", c["parts"]["segments"]), ("group", 0), ("group", 0)]
    assert res.parts[1].cycles is None and all(p.seconds > 0 for p in res.parts)


def test_execute_only_reports_the_parts():
    rep = Prover(CFG).execute(_block())
    assert [(p["kind"], p["first"], p["count"]) for p in rep.parts] == \
        [("group", 0, 1), ("long", 1, 1), ("group", 2, 7), ("group", 9, 1)]
    assert rep.parts[1]["segments"] == 9 and rep.segment_cycles == S
    assert rep.to_json()["parts"][1]["cycles"] == rep.transactions[1].cycles
    assert rep.tables and "proved in 4 parts" in rep.summary()


def test_a_false_claim_is_refused_before_any_proving():
    blk = _block(t1=(7, None))
    with pytest.raises(UnprovableBlock, match="transaction 1 .*claims exit code 7"):
        Prover(CFG).prove_block(blk)


# --------------------------------------------------------------------------- refusals

@pytest.fixture(scope="module")
def other():
    """The same programs on other inputs (the loop's input the same length: the same
    cut)."""
    blk = _block(b"xy", b"ABCDEFGH")
    return blk, Prover(CFG).prove_block(blk)


def test_parts_dropped_duplicated_reordered_or_truncated_are_refused(proved):
    blk, proof = proved
    p = list(proof.parts)
    for parts in ([p[0], p[1], p[2]], [p[0], p[1], p[1], p[2], p[3]],
                  [p[0], p[2], p[1], p[3]], [p[1], p[0], p[2], p[3]]):
        with pytest.raises(ShapeError, match="part"):
            _verify(_with_parts(proof, parts), blk)
    data = proof.to_bytes()
    for cut in (len(data) - 1, len(data) // 2, 30):
        with pytest.raises(ShapeError, match="truncated|bad magic"):
            _verify(data[:cut], blk)
    with pytest.raises(ShapeError, match="bytes after the last part"):
        _verify(data + b"\0", blk)
    bad = bytearray(data)
    struct.pack_into("<I", bad, 8, 9)               # n_tx
    with pytest.raises(ShapeError, match="9 transactions, this block has 10"):
        _verify(bytes(bad), blk)
    relabelled = [p[0], dataclasses.replace(p[1], kind=GROUP), p[2], p[3]]
    with pytest.raises(VerificationError, match="part 1"):
        _verify(_with_parts(proof, relabelled), blk)


def test_a_part_of_another_block_is_refused(proved, other):
    """A group or a long part proved for other inputs, spliced in: its AIRs (or its
    segments' chain) are rebuilt from this block's transactions and do not match."""
    blk, proof = proved
    _, theirs = other
    for j in (0, 1):
        parts = list(proof.parts)
        parts[j] = theirs.parts[j]
        with pytest.raises(VerificationError, match=f"part {j}"):
            _verify(_with_parts(proof, parts), blk)


def test_a_long_part_missing_a_segment_is_refused(proved):
    blk, proof = proved
    seg = SegmentedProof.from_bytes(proof.parts[1].proof)
    for segs in (seg.segments[1:], seg.segments[:-1], seg.segments[:3] + seg.segments[4:]):
        inner = dataclasses.replace(seg, segments=segs).to_bytes()
        parts = list(proof.parts)
        parts[1] = dataclasses.replace(parts[1], proof=inner)
        with pytest.raises(VerificationError, match="part 1"):
            _verify(_with_parts(proof, parts), blk)


def test_claims_and_max_cycles_must_be_the_proofs(proved):
    blk, proof = proved
    data = proof.to_bytes()
    out1 = proof.outputs[1]
    for bad, msg in [(_block(t1=(proof.exit_codes[1] + 1, None)), "transaction 1.*exit code"),
                     (_block(t1=(None, out1 + b"!")), "transaction 1.*output"),
                     (_block(t4=(None, b"nope")), "transaction 4.*output")]:
        with pytest.raises(PublicValuesError, match=msg):
            _verify(data, bad)
    with pytest.raises(PublicValuesError, match="max_cycles"):
        _verify(data, dataclasses.replace(blk, max_cycles=1 << 21))
    # the block's own claims, true ones, are accepted
    ok = _block(t1=(proof.exit_codes[1], out1), t4=(0, proof.outputs[4]))
    assert _verify(data, ok).exit_codes == proof.exit_codes


def test_a_block_stark_past_2_24_carries_the_ceiling():
    """A block whose max_cycles is past the one-STARK ceiling: its STARK's transactions
    carry min(max_cycles, 2^24), and the proof verifies against the block's own limit
    only."""
    blk = Block((txblocks.tx("hello"),), 1 << 30)
    proof = Prover(CFG).prove_block(blk)
    assert isinstance(proof, TxBlockProof)
    pv = rblock.tx_public_values(proof.public_values, 0)
    assert rblock.stark_limit(1 << 30) == 1 << 24 and (1 << 24) in pv[rblock.INDEX["registers"]]
    assert _verify(proof.to_bytes(), blk).exit_codes == [0]
    with pytest.raises(PublicValuesError, match="max_cycles"):
        _verify(proof.to_bytes(), dataclasses.replace(blk, max_cycles=1 << 16))


# --------------------------------------------------------------------------- command line

def test_the_command_line_proves_verifies_and_reports_parts(proved, tmp_path, capsys):
    """``prove BLOCK --segment-cycles 1024`` writes the STBE file
    and prints the parts; ``verify`` prints a line per part and its JSON the parts; a
    truncated file is exit 1 naming the part; execute-only's JSON reports the parts; a
    bad segment size is exit 2 before any work."""
    import json
    from steadfast.prover.cli import main_prove, main_verify
    from tests.cli_helpers import run, write
    blk, proof = proved
    path = write(tmp_path, "blk.json", blk.to_json())
    out = tmp_path / "blk.proof"
    fast = ["--queries", "6", "--pow-bits", "1", "--backend", "host"]
    code, so, _ = run(main_prove, [path, "--segment-cycles", S, "-o", out] + fast, capsys)
    assert code == 0 and out.read_bytes()[:4] == b"STBE"
    assert "proved in 4 parts" in so and "part 1: tx 1 in segments" in so
    code, so, _ = run(main_verify, [out, "--block", path, "--min-security-bits", 0], capsys)
    assert code == 0 and "verified in 4 parts" in so and "part 1: long tx 1: 9 segments" in so
    code, so, _ = run(main_verify, [out, "--block", path, "--min-security-bits", 0, "--json"],
                      capsys)
    rep = json.loads(so)
    assert rep["ok"] and [p["kind"] for p in rep["parts"]] == ["group", "long", "group", "group"]
    cut = tmp_path / "cut.proof"
    cut.write_bytes(out.read_bytes()[:100_000])
    code, _, se = run(main_verify, [cut, "--block", path], capsys)
    assert code == 1 and "part 1: the file is truncated" in se
    code, so, _ = run(main_prove, [path, "--segment-cycles", S, "--execute-only", "--json"],
                      capsys)
    rep = json.loads(so)
    assert code == 0 and rep["segment_cycles"] == S and len(rep["parts"]) == 4
    assert rep["parts"][1] == {"kind": "long", "first": 1, "count": 1, "cycles": 9208,
                               "segments": 9}
    code, _, se = run(main_prove, [path, "--segment-cycles", 1000], capsys)
    assert code == 2 and "--segment-cycles must be a power of two" in se


def test_the_display_counts_parts():
    """The plain display writes a line per proved part (its transactions) and, within the
    long part, a line per segment; the board's overall row names the part and then the
    segment."""
    import io
    from steadfast.prover.cli.display import Board, LineProgress
    out = io.StringIO()
    lp = LineProgress(out, tables=rblock.num_tables(7))
    Prover(CFG, progress=lp).prove_block(_block())
    text = out.getvalue()
    for j, name in enumerate(["group part (transaction 0)", "long part (transaction 1)",
                              "group part (transactions 2..8)",
                              "group part (transaction 9)"], 1):
        assert f"part {j}/4 proved" in text and name in text
    assert "segment 9/9 proved" in text
    b = Board(2)
    b.set_part(1, 4)
    assert "part 2/4" in b.overall(0.0)
    b.segment(3, 9, 9)
    assert "part 2/4, segment 4/9" in b.overall(0.0)
    b.set_part(2, 4)
    assert "part 3/4" in b.overall(0.0) and "segment" not in b.overall(0.0)


def test_device_fault_in_one_part_recovers_there(monkeypatch):
    """On the device pipeline (emu) every part draws its own faults (its index is the proof
    id of PROVER_FAULTS; a long part's segments by segment index): with out-of-memory at
    R2 for some tables, the parts that drew one downgrade those tables (counted per part),
    the others run clean, and the bytes are the host's."""
    blk = Block((txblocks.tx("hello"), _long_of(300), txblocks.tx("hello")), 1 << 20)
    host = Prover(CFG).prove_block(blk)
    monkeypatch.setenv("PROVER_FAULTS", "oom@r2:0.05,seed=4")
    dev = Prover(dataclasses.replace(CFG, backend="emu")).prove_block(blk)
    assert dev.to_bytes() == host.to_bytes()
    per = dev.stats.counters["parts"]["downgrades"]
    assert len(per) == 3 and any(per) and not all(per), per


def test_precompile_covers_every_part(monkeypatch):
    """precompile of a block in epochs goes part by part: the groups' namespaced tables and
    the long part's segment tables (PAGEMEM, SEGREGS), never the whole block at once."""
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    steps = Prover(dataclasses.replace(CFG, backend="sim")).precompile(_block())
    names = {s["name"].split(" ", 1)[1] for s in steps}
    assert {"tx0/rv32_program", "rv32_pagemem", "rv32_segregs", "tx6/rv32_alu"} <= names, \
        sorted(names)[:40]
