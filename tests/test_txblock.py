"""Block format version 2 (docs/block-format.md "Version 2"): the loader's errors with JSON
paths (and a property: no mutation of a good block gives anything but a Block or a
BlockError), version 1 refused by name, and the library's block proofs of RISC-V
transactions (rv32/block.py, prover/txblock_*.py): prove + verify of examples/block.json
(3 transactions), state_out recomputed here from its definition, every transaction's
output and exit code against the independent emulator (unicorn, tests/rv32_ref.py), and
verify's rejections -- a changed input, program, claimed output or exit code, max_cycles,
transaction order, a dropped transaction, two transactions' tables swapped, a truncated
or bit-flipped proof -- each a VerificationError subclass naming the transaction.

WEAK PARAMETERS: 6 queries (CFG), verified with min_security_bits=0; one proof for the
module."""
from __future__ import annotations

import base64
import copy
import hashlib
import json
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from steadfast import rv32
from steadfast.prover.api import (Prover, ProverConfig, TxBlockProof, TxBlockReport,
                                  UnprovableBlock, VerifiedTxBlock, verify)
from steadfast.rv32 import block as rblock
from steadfast.rv32.blockfile import (Block, BlockError, load_block, loads_block,
                                      parse_block)
from steadfast.verifier.errors import PublicValuesError, ShapeError, VerificationError
from steadfast.verifier.proof_format import decode, encode

from tests.rv32_ref import run as ref_run

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"
EXAMPLE = EX / "block.json"
CFG = ProverConfig(backend="host", num_queries=6, pow_bits=1)
ANY = dict(min_security_bits=0)
NAMES = ["hello", "transfer", "merkle.elf"]
CODES = [0, 7, 0]


def good() -> dict:
    return json.loads(EXAMPLE.read_text())


def parse(obj) -> Block:
    return parse_block(obj, EX)


def edit(path, value):
    """A copy of good() with the field at ``path`` (keys/indices) set, or removed."""
    obj = good()
    node = obj
    for k in path[:-1]:
        node = node[k]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return obj


def with_tx(i, **fields):
    """good() with transaction i's fields replaced (None removes one)."""
    obj = good()
    for k, v in fields.items():
        if v is None:
            obj["transactions"][i].pop(k, None)
        else:
            obj["transactions"][i][k] = v
    return obj


DELETE = object()
T1 = "$.transactions[1]"

BAD = [
    # (document, JSON path, message fragment)
    ({}, "$", "missing required field 'format'"),
    ([], "$", "expected an object, got array"),
    (edit(("version",), DELETE), "$", "missing required field 'version'"),
    (edit(("version",), 1), "$.version", "unsupported version 1 (the field-element VM"),
    (edit(("version",), 3), "$.version", "unsupported version 3"),
    (edit(("version",), "2"), "$.version", "unsupported version '2'"),
    (edit(("format",), "other"), "$.format", "expected 'steadfast-block'"),
    (edit(("format",), 2), "$.format", "expected a string, got integer"),
    (edit(("transactions",), DELETE), "$", "missing required field 'transactions'"),
    (edit(("transactions",), {}), "$.transactions", "expected an array"),
    (edit(("extra",), 1), "$.extra", "unknown field"),
    (edit(("max_cycles",), 0), "$.max_cycles", "out of range"),
    (edit(("max_cycles",), 1 << 32), "$.max_cycles", "out of range"),
    (edit(("max_cycles",), "5"), "$.max_cycles", "got string"),
    (edit(("max_cycles",), True), "$.max_cycles", "got boolean"),
    (edit(("max_cycles",), 4096.0), "$.max_cycles", "got number"),
    (edit(("state_in",), "00"), "$.state_in", "expected 32 bytes (64 hex digits), got 1"),
    (edit(("state_in",), "zz" * 32), "$.state_in", "not an even-length hex string"),
    (edit(("state_in",), None), "$.state_in", "got null"),
    (edit(("programs",), {}), "$.programs", "expected an array"),
    (edit(("programs", 0), "hello"), "$.programs[0]", "expected an object, got string"),
    (edit(("programs", 0, "name"), DELETE), "$.programs[0]", "missing required field 'name'"),
    (edit(("programs", 0, "name"), ""), "$.programs[0].name", "1..128 characters"),
    (edit(("programs", 0, "name"), "x" * 129), "$.programs[0].name", "1..128 characters"),
    (edit(("programs", 1, "name"), "hello"), "$.programs[1].name", "duplicate program name"),
    (edit(("programs", 0, "elf"), DELETE), "$.programs[0]", "exactly once"),
    (edit(("programs", 0, "elf_base64"), "AAAA"), "$.programs[0]", "exactly once"),
    (edit(("programs", 0, "elf"), "missing.elf"), "$.programs[0].elf", "cannot read"),
    (edit(("programs", 0, "elf"), ""), "$.programs[0].elf", "empty file path"),
    (edit(("programs", 0, "elf"), "."), "$.programs[0].elf", "not a regular file"),
    (edit(("programs", 0, "elf"), "transfer.in"), "$.programs[0].elf",
     "not an RV32IM program"),
    (edit(("programs", 0, "code"), []), "$.programs[0].code", "unknown field"),
    (with_tx(2, elf=None, elf_base64="!!"), "$.transactions[2].elf_base64",
     "not valid base64"),
    (with_tx(2, elf=None, elf_base64=base64.b64encode(b"\x7fELF junk").decode()),
     "$.transactions[2].elf_base64", "not an RV32IM program"),
    (edit(("transactions", 1), 5), T1, "expected an object, got integer"),
    (with_tx(1, program="nope"), f"{T1}.program", "no program named 'nope'"),
    (with_tx(1, program=0), f"{T1}.program", "expected a program name (string), got integer"),
    (with_tx(1, elf="transfer.elf"), T1, "exactly once"),
    (with_tx(1, program=None), T1, "exactly once"),
    (with_tx(1, input_file=None, input="abc"), f"{T1}.input", "not an even-length hex"),
    (with_tx(1, input_file=None, input=12), f"{T1}.input", "expected a hex string"),
    (with_tx(1, input="00"), T1, "at most once"),
    (with_tx(1, input_file=None, input_base64="***"), f"{T1}.input_base64",
     "not valid base64"),
    (with_tx(1, input_file="missing.in"), f"{T1}.input_file", "cannot read 'missing.in'"),
    (with_tx(1, input_file=""), f"{T1}.input_file", "empty file path"),
    (with_tx(1, input_file=["transfer.in"]), f"{T1}.input_file", "got array"),
    (with_tx(1, output="0"), f"{T1}.output", "not an even-length hex"),
    (with_tx(1, output=None, exit_code=None, outputs=[]), f"{T1}.outputs", "unknown field"),
    (with_tx(1, exit_code=256), f"{T1}.exit_code", "out of range [0, 255]"),
    (with_tx(1, exit_code=-1), f"{T1}.exit_code", "out of range [0, 255]"),
    (with_tx(1, exit_code=True), f"{T1}.exit_code", "got boolean"),
    (with_tx(1, exit_code="7"), f"{T1}.exit_code", "got string"),
]


@pytest.mark.parametrize("doc,path,fragment", BAD)
def test_malformed_blocks_name_the_field(doc, path, fragment):
    with pytest.raises(BlockError) as ei:
        parse(doc)
    assert ei.value.path == path, str(ei.value)
    assert fragment in ei.value.message, str(ei.value)
    assert str(ei.value) == f"{path}: {ei.value.message}"


@pytest.mark.parametrize("text,fragment", [
    ("", "empty document"), ("  \n", "empty document"),
    ("{", "not valid JSON: Expecting property name enclosed in double quotes at line 1"),
    ('{"format": "steadfast-block", "format": "x"}', "duplicate key 'format'"),
    ('{"version": NaN}', "NaN is not valid JSON"),
    (b"\xff\xfe", "not UTF-8 text (byte 0)"),
    ("[" * 100000, "not valid JSON"),
])
def test_malformed_text(text, fragment):
    with pytest.raises(BlockError) as ei:
        loads_block(text, EX)
    assert ei.value.path == "$" and fragment in ei.value.message, str(ei.value)


def test_version_1_is_refused_by_name(tmp_path):
    """A version-1 block (the retired field-element VM's format) is refused naming its
    version."""
    v1 = tmp_path / "v1.json"
    v1.write_text(json.dumps({"format": "steadfast-block", "version": 1, "memory_size": 64,
                              "initial_memory": [], "programs": [], "transactions": []}))
    with pytest.raises(BlockError) as ei:
        load_block(v1)
    assert ei.value.path == "$.version"
    assert "unsupported version 1" in str(ei.value) and "field-element VM" in str(ei.value)
    assert "version 2" in str(ei.value)


def test_example_and_canonical_form():
    """examples/block.json: each input form (hex, base64, file), programs by name and by
    path; Block.to_json is self-contained and parses back to the same block; the copies
    in examples/ are the guests' (scripts/build_guests.sh --check compares the ELFs)."""
    raw = good()
    txs = raw["transactions"]
    assert {"input", "input_base64", "input_file"} <= {k for t in txs for k in t}
    assert {"program", "elf"} <= {k for t in txs for k in t}
    blk = load_block(EXAMPLE)
    assert [t.name for t in blk.transactions] == NAMES
    assert [t.exit_code for t in blk.transactions] == CODES
    assert blk.max_cycles == 65536 and blk.state_in == bytes(32)
    assert blk.transactions[0].input == b"world!"
    assert blk.transactions[1].input == (EX / "transfer.in").read_bytes()
    assert (EX / "transfer.in").read_bytes() == (
        ROOT / "guests" / "inputs" / "transfer" / "statuses.in").read_bytes()
    for name in ("hello", "transfer", "merkle"):
        assert (EX / f"{name}.elf").read_bytes() == (
            ROOT / "guests" / "bin" / f"{name}.elf").read_bytes()
    canon = blk.to_json()
    assert json.loads(json.dumps(canon)) == canon
    back = parse_block(canon)           # no base_dir needed: everything inline
    assert back.max_cycles == blk.max_cycles and back.state_in == blk.state_in
    for a, b in zip(back.transactions, blk.transactions):
        assert (a.program.digest(), a.input, a.output, a.exit_code) == (
            b.program.digest(), b.input, b.output, b.exit_code)
    assert len(canon["programs"]) == 3
    # no claims, empty input, defaults
    bare = parse_block({"format": "steadfast-block", "version": 2,
                        "transactions": [{"elf": "hello.elf"}]}, EX)
    t = bare.transactions[0]
    assert (t.input, t.output, t.exit_code) == (b"", None, None)
    assert bare.max_cycles == rv32.DEFAULT_MAX_CYCLES and bare.state_in == bytes(32)
    assert parse_block({"format": "steadfast-block", "version": 2,
                        "transactions": []}).transactions == ()


# --------------------------------------------------------------------------- property

def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


GOOD = good()
PATHS = list(_paths(GOOD))
KEYS = ["format", "version", "max_cycles", "state_in", "programs", "transactions", "name",
        "elf", "elf_base64", "program", "input", "input_base64", "input_file", "output",
        "exit_code", "x"]
# strings from a small alphabet: hex, base64, the example's names -- no path that could
# name a device file
SAFE = st.text(alphabet="0123456789abcdefABCDEF+/=.hloetrnsfxm", max_size=40)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 1 << 33) | st.floats(allow_nan=False)
    | SAFE | st.sampled_from(["hello", "transfer", "hello.elf", "transfer.in", "merkle.elf",
                              "steadfast-block", "", "00" * 32]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS),
                                                                inner, max_size=3),
    max_leaves=6)


@st.composite
def mutations(draw):
    obj = copy.deepcopy(GOOD)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS))
        node = obj
        try:
            for k in path[:-1]:
                node = node[k]
        except (KeyError, IndexError, TypeError):
            continue
        how = draw(st.sampled_from(["set", "delete", "add"]))
        if not path:
            obj = draw(VALUES) if how == "set" else obj
            continue
        k = path[-1]
        try:
            if how == "set":
                node[k] = draw(VALUES)
            elif how == "delete":
                del node[k]
            elif isinstance(node, dict):
                node[draw(st.sampled_from(KEYS))] = draw(VALUES)
            elif isinstance(node, list):
                node.insert(k, draw(VALUES))
        except (KeyError, IndexError, TypeError):
            pass
    return obj


@settings(max_examples=150, deadline=None)
@given(mutations())
def test_mutations_give_a_block_or_a_block_error(obj):
    """Any mutation of a good block: a valid Block or a BlockError with a ``$`` path --
    never another exception; its text form (and a truncated one) likewise."""
    for attempt in (lambda: parse(obj), lambda: loads_block(json.dumps(obj), EX),
                    lambda: loads_block(json.dumps(obj)[:-3], EX)):
        try:
            blk = attempt()
        except BlockError as exc:
            assert exc.path.startswith("$") and exc.message
        else:
            assert isinstance(blk, Block)
            for t in blk.transactions:
                assert isinstance(t.input, bytes) and isinstance(t.program, rv32.Program)


# --------------------------------------------------------------------------- proofs

@pytest.fixture(scope="module")
def prover():
    return Prover(CFG)


@pytest.fixture(scope="module")
def block():
    return load_block(EXAMPLE)


@pytest.fixture(scope="module")
def proof(prover):
    return prover.prove_block(EXAMPLE)          # a path: the dispatch on version 2


@pytest.fixture(scope="module")
def proof_bytes(proof):
    return proof.to_bytes()


def expected_state_out(state_in: bytes, receipts) -> bytes:
    """docs/block-format.md "Chain state", written out here: SHA-256 over the domain
    string, state_in, the receipt count (u32) and each receipt -- program digest (32
    bytes), SHA-256(input), exit code (u32), output length (u32), SHA-256(output)."""
    msg = b"steadfast/block-state/v2\x00" + state_in + struct.pack("<I", len(receipts))
    for digest, data, code, out in receipts:
        msg += (digest + hashlib.sha256(data).digest() + struct.pack("<II", code, len(out))
                + hashlib.sha256(out).digest())
    return hashlib.sha256(msg).digest()


def test_round_trip(proof, proof_bytes, block, tmp_path):
    """prove_block on a version-2 block -> TxBlockProof (STB2 file, 3 transactions, every
    claim as the block's), verify(proof, block=) -> VerifiedTxBlock with the same exit
    codes, outputs and the state_out of its definition; the block as a path, dict, JSON
    text or Block, the proof as bytes, a path or a TxBlockProof."""
    assert isinstance(proof, TxBlockProof) and not proof.dev and proof.n_tx == 3
    assert proof.exit_codes == CODES
    assert proof.outputs == [t.output for t in block.transactions]
    assert proof_bytes[:4] == b"STB2" and len(proof_bytes) == 16 + len(proof.proof)
    assert TxBlockProof.from_bytes(proof_bytes) == proof
    assert len(decode(proof.proof).tables) == rblock.num_tables(3) == 50
    assert proof.stats.cycles == 190 + 976 + 226
    proof.save(tmp_path / "b.proof")
    receipts = [(t.program.digest(), t.input, c, t.output)
                for t, c in zip(block.transactions, CODES)]
    state = expected_state_out(bytes(32), receipts)
    assert proof.state_out == state
    for p in (proof_bytes, tmp_path / "b.proof", proof):
        for b in (EXAMPLE, str(EXAMPLE), block):
            res = verify(p, block=b, **ANY)
            assert isinstance(res, VerifiedTxBlock)
            assert res.exit_codes == CODES and res.state_out == state
            assert res.outputs == proof.outputs and res.max_cycles == 65536
    canon = block.to_json()
    assert verify(proof_bytes, block=canon, **ANY).state_out == state
    assert verify(proof_bytes, block=json.dumps(canon), **ANY).state_out == state
    assert 0 < res.security_bits < 100 and res.params.num_queries == 6
    with pytest.raises(VerificationError):      # the default minimum refuses 6 queries
        verify(proof_bytes, block=block)


def test_state_in_carries(proof_bytes, block):
    """state_in is not in the proof: the same proof verifies for any state_in, and
    state_out is the definition's over that state_in (a node checks the chain link)."""
    prev = hashlib.sha256(b"block N-1").digest()
    obj = dict(block.to_json(), state_in=prev.hex())
    res = verify(proof_bytes, block=obj, **ANY)
    receipts = [(t.program.digest(), t.input, c, o)
                for t, c, o in zip(block.transactions, res.exit_codes, res.outputs)]
    assert res.state_in == prev and res.state_out == expected_state_out(prev, receipts)
    assert res.state_out != verify(proof_bytes, block=block, **ANY).state_out


def test_against_the_independent_emulator(proof, block, prover):
    """Every transaction's exit code and output in the proof, and its cycles in
    execute's report, are unicorn's."""
    rep = prover.execute(EXAMPLE)
    assert isinstance(rep, TxBlockReport) and rep.claims_ok
    assert rep.state_out == proof.state_out and rep.cycles == sum(t.cycles
                                                                  for t in rep.transactions)
    for i, tx in enumerate(block.transactions):
        ref = ref_run(tx.program, tx.input, block.max_cycles)
        assert (proof.exit_codes[i], proof.outputs[i]) == (ref.exit_code, ref.output), i
        assert rep.transactions[i].cycles == ref.cycles, i
        assert rep.transactions[i].exit_code == ref.exit_code
        assert rep.transactions[i].output == ref.output
    js = rep.to_json()
    assert js["cycles"] == rep.cycles and js["claims_ok"] is True
    assert [t["exit_code"] for t in js["transactions"]] == CODES
    assert bytes.fromhex(js["transactions"][1]["output"]) == proof.outputs[1]
    assert len(js["tables"]) == 50 and js["security_bits"] == rep.security_bits > 0


def test_false_claims(prover):
    """A false claimed output or exit code: execute reports it (claims_ok False, the
    transaction named), prove_block refuses the block naming the transaction."""
    bad = with_tx(1, exit_code=8)
    rep = prover.execute(parse(bad))
    assert rep.claims_ok is False
    assert [t.claims_ok for t in rep.transactions] == [True, False, True]
    assert "transaction 1 (transfer)" in rep.transactions[1].claim_error
    assert "exit code 8" in rep.transactions[1].claim_error
    with pytest.raises(UnprovableBlock, match=r"transaction 1 \(transfer\).*exit code 8"):
        prover.prove_block(parse(bad))
    bad = with_tx(2, output="00" * 32)
    with pytest.raises(UnprovableBlock, match=r"transaction 2 .*claimed output differs"):
        prover.prove_block(parse(bad))
    tiny = edit(("max_cycles",), 100)
    with pytest.raises(UnprovableBlock, match=r"transaction 0 \(hello\): execution failed"):
        prover.prove_block(parse(tiny))


SHA = str(ROOT / "guests" / "bin" / "sha256.elf")

REJECTED = [
    # (changed block, error class, message fragments); each change alone (claims that
    # would also differ removed)
    (with_tx(0, input="776f726c6422", output=None), PublicValuesError,
     ["transaction 0", "input"]),
    (with_tx(1, input_file=None, input="", output=None, exit_code=None), PublicValuesError,
     ["transaction 1", "input"]),
    (with_tx(2, elf=SHA, output=None, exit_code=None), PublicValuesError,
     ["transaction 2", "program"]),
    (with_tx(0, output="00"), PublicValuesError, ["transaction 0", "claimed output"]),
    (with_tx(2, output=good()["transactions"][2]["output"][:-2] + "00"), PublicValuesError,
     ["transaction 2", "claimed output", "first difference at byte 31"]),
    (with_tx(1, exit_code=0), PublicValuesError,
     ["transaction 1", "claims exit code 0", "the proof 7"]),
    (edit(("max_cycles",), 65535), PublicValuesError, ["transaction 0", "max_cycles 65,536"]),
]


@pytest.mark.parametrize("doc,cls,fragments", REJECTED)
def test_changed_block_is_rejected(proof_bytes, doc, cls, fragments):
    with pytest.raises(cls) as ei:
        verify(proof_bytes, block=parse(doc), **ANY)
    for f in fragments:
        assert f in str(ei.value), str(ei.value)


def test_order_and_count(proof_bytes, block):
    """Transactions reordered (the claims dropped, so only the proof decides) or one
    dropped: rejected, naming the first transaction that differs / the count."""
    obj = block.to_json()
    for t in obj["transactions"]:
        t.pop("output"), t.pop("exit_code")
    swapped = copy.deepcopy(obj)
    swapped["transactions"][0], swapped["transactions"][2] = (swapped["transactions"][2],
                                                              swapped["transactions"][0])
    with pytest.raises(PublicValuesError, match="transaction 0"):
        verify(proof_bytes, block=swapped, **ANY)
    swapped = copy.deepcopy(obj)
    swapped["transactions"][1], swapped["transactions"][2] = (swapped["transactions"][2],
                                                              swapped["transactions"][1])
    with pytest.raises(PublicValuesError, match="transaction 1"):
        verify(proof_bytes, block=swapped, **ANY)
    for drop in (0, 2):
        fewer = copy.deepcopy(obj)
        del fewer["transactions"][drop]
        with pytest.raises(ShapeError, match="block of 3 transactions, this block has 2"):
            verify(proof_bytes, block=fewer, **ANY)
    more = copy.deepcopy(obj)
    more["transactions"].append(more["transactions"][0])
    with pytest.raises(ShapeError, match="this block has 4"):
        verify(proof_bytes, block=more, **ANY)
    assert verify(proof_bytes, block=obj, **ANY).exit_codes == CODES   # claims optional


def _swap_tables(proof: TxBlockProof, i: int, j: int) -> bytes:
    """The proof with transactions i's and j's 16 tables exchanged (re-encoded)."""
    d = decode(proof.proof)
    n = len(rblock.TX_TABLES)
    t = list(d.tables)
    t[i * n:(i + 1) * n], t[j * n:(j + 1) * n] = t[j * n:(j + 1) * n], t[i * n:(i + 1) * n]
    d.tables = t
    return TxBlockProof(proof.n_tx, encode(d)).to_bytes()


def test_swapped_tables_are_rejected(proof, block):
    """Cross-transaction soundness: transaction 0's and 2's tables exchanged in the proof
    (each still a valid table of its own transaction) verify neither against the block
    nor against the block with those transactions exchanged (each transaction's tables
    are in their own bus namespace, tx{i}/)."""
    bad = _swap_tables(proof, 0, 2)
    with pytest.raises(PublicValuesError, match="transaction 0: the proof is not for this "
                                                "program"):
        verify(bad, block=block, **ANY)
    obj = block.to_json()
    obj["transactions"][0], obj["transactions"][2] = (obj["transactions"][2],
                                                      obj["transactions"][0])
    with pytest.raises(VerificationError) as ei:    # the statement fits: the STARK refuses
        verify(bad, block=obj, **ANY)
    assert not isinstance(ei.value, (PublicValuesError, ShapeError)), ei.value
    with pytest.raises(PublicValuesError, match="transaction 0"):
        verify(_swap_tables(proof, 0, 1), block=block, **ANY)


def test_one_table_swapped_between_transactions(proof, block):
    """A single table without public values exchanged between two transactions where
    both have the same height (the statement still fits): the STARK refuses it."""
    d = decode(proof.proof)
    n = len(rblock.TX_TABLES)
    pairs = [k for k in range(n) if d.tables[k].log_n == d.tables[2 * n + k].log_n
             and not len(d.tables[k].public_values) and d.tables[k].log_n > 1]
    assert pairs, "no table of transaction 0 and 2 with the same height"
    for k in pairs[:2]:
        d = decode(proof.proof)
        d.tables[k], d.tables[2 * n + k] = d.tables[2 * n + k], d.tables[k]
        bad = TxBlockProof(3, encode(d)).to_bytes()
        with pytest.raises(VerificationError) as ei:
            verify(bad, block=block, **ANY)
        assert not isinstance(ei.value, (PublicValuesError, ShapeError)), (
            rblock.TX_TABLES[k], ei.value)


def test_truncated_and_flipped_proofs(proof_bytes, block):
    """A truncated proof is a ShapeError; a flipped bit anywhere -- header, statement
    values, commitments, openings, FRI -- a VerificationError."""
    for cut in (0, 3, 15, 16, 1000, len(proof_bytes) // 2, len(proof_bytes) - 1):
        with pytest.raises(ShapeError):
            verify(proof_bytes[:cut], block=block, **ANY)
    with pytest.raises(ShapeError):
        verify(proof_bytes + b"\0", block=block, **ANY)
    n = len(proof_bytes)
    for pos in (4, 8, 9, 12, 20, 40, 300, n // 7, n // 3, n // 2, 2 * n // 3, n - 40, n - 1):
        data = bytearray(proof_bytes)
        data[pos] ^= 1 << (pos % 8)
        with pytest.raises(VerificationError):
            verify(bytes(data), block=block, **ANY)


def test_development_mode(block):
    """A development-mode block proof (STD2) carries the statement, verifies only with
    accept_dev, and is refused otherwise."""
    from steadfast.prover.api import DevProofRefused
    import dataclasses
    pr = Prover(dataclasses.replace(CFG, dev_mode=True)).prove_block(block)
    assert pr.dev and pr.to_bytes()[:4] == b"STD2" and pr.exit_codes == CODES
    with pytest.raises(DevProofRefused):
        verify(pr.to_bytes(), block=block, **ANY)
    res = verify(pr.to_bytes(), block=block, accept_dev=True)
    assert res.dev and res.exit_codes == CODES and res.state_out == pr.state_out
    with pytest.raises(PublicValuesError, match="transaction 1"):
        verify(pr.to_bytes(), block=parse(with_tx(1, exit_code=3)), accept_dev=True)


def test_transaction_limit():
    """At most 4095 transactions: 16 tables each and the 2 shared ones must fit the proof
    format's u16 table count (65,522 tables); a proof header claiming more is refused."""
    obj = {"format": "steadfast-block", "version": 2,
           "programs": [{"name": "h", "elf": "hello.elf"}],
           "transactions": [{"program": "h"}] * 4095}
    assert len(parse(obj).transactions) == 4095 and rblock.num_tables(4095) <= 0xFFFF
    obj["transactions"].append({"program": "h"})
    with pytest.raises(BlockError, match=r"too many entries: 4096 \(the limit is 4095\)") as ei:
        parse(obj)
    assert ei.value.path == "$.transactions"
    with pytest.raises(ShapeError, match="4096 transactions"):
        TxBlockProof.from_bytes(b"STB2" + struct.pack("<HHII", 3, 0, 4096, 0))
