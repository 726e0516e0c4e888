"""Block format 2's limits (docs/block-format.md "Version 2", Limits), the part of the format
that tests/test_txblock.py (every field's errors with their JSON paths, malformed texts,
the example, the canonical form, version 1 refused, the 4095-transaction limit) leaves
out: the file size, the program list, ELF and input sizes in each form (hex, base64,
file), the inputs' total, the claimed output, and max_cycles at both ends; each
BlockError names the field's JSON path.  The sizes are checked with the module's limits
lowered (monkeypatch), the rule being the same at any size; the fixtures' blocks
(tests/txblocks.py) round-trip through Block.to_json."""
from __future__ import annotations

import base64
import json

import pytest

from steadfast.rv32 import abi
from steadfast.rv32 import blockfile as B
from steadfast.rv32.blockfile import BlockError, load_block, loads_block, parse_block

from tests import txblocks

HELLO = txblocks.BIN / "hello.elf"


def doc(**tx) -> dict:
    """A one-transaction block of hello (by path) with the transaction's fields ``tx``."""
    return {"format": "steadfast-block", "version": 2,
            "transactions": [dict({"elf": "hello.elf"}, **tx)]}


def error(obj, base=txblocks.BIN) -> BlockError:
    with pytest.raises(BlockError) as ei:
        parse_block(obj, base)
    assert str(ei.value) == f"{ei.value.path}: {ei.value.message}"
    return ei.value


def test_file_size_limit(tmp_path, monkeypatch):
    f = tmp_path / "b.json"
    f.write_text(json.dumps(txblocks.one_tx_block().to_json()))
    assert load_block(f).transactions[0].output == b"hello from rv32im\ncba"
    monkeypatch.setattr(B, "MAX_FILE_BYTES", 100)
    with pytest.raises(BlockError, match=r"^\$: file is \d+ bytes; the limit is 100$"):
        load_block(f)


def test_program_list_limit(monkeypatch):
    monkeypatch.setattr(B, "MAX_PROGRAMS", 2)
    progs = [{"name": f"p{i}", "elf": "hello.elf"} for i in range(3)]
    obj = {"format": "steadfast-block", "version": 2, "programs": progs[:2],
           "transactions": [{"program": "p1"}]}
    assert parse_block(obj, txblocks.BIN).transactions[0].name == "p1"
    obj["programs"] = progs
    e = error(obj)
    assert e.path == "$.programs" and e.message == "too many entries: 3 (the limit is 2)"


def test_elf_size_limit_in_each_form(monkeypatch):
    size = HELLO.stat().st_size
    monkeypatch.setattr(B, "MAX_ELF_BYTES", size - 1)
    e = error(doc())
    assert e.path == "$.transactions[0].elf"
    assert e.message == f"hello.elf: {size} bytes; the limit is {size - 1}"
    inline = {"format": "steadfast-block", "version": 2, "transactions": [
        {"elf_base64": base64.b64encode(HELLO.read_bytes()).decode()}]}
    monkeypatch.setattr(B, "MAX_ELF_BYTES", size - 1)     # base64: the decoded size, exactly
    e = error(inline)
    assert e.path == "$.transactions[0].elf_base64" and f"more than {size - 1} bytes" in e.message
    monkeypatch.setattr(B, "MAX_ELF_BYTES", size)
    assert parse_block(inline).transactions[0].program == parse_block(doc(), txblocks.BIN) \
        .transactions[0].program


@pytest.mark.parametrize("form", ["input", "input_base64", "input_file"])
def test_input_size_limit_in_each_form(form, tmp_path, monkeypatch):
    data = bytes(range(48))
    (tmp_path / "hello.elf").write_bytes(HELLO.read_bytes())
    (tmp_path / "x.in").write_bytes(data)
    value = {"input": data.hex(), "input_base64": base64.b64encode(data).decode(),
             "input_file": "x.in"}[form]
    monkeypatch.setattr(B, "MAX_INPUT_BYTES", 48)
    assert parse_block(doc(**{form: value}), tmp_path).transactions[0].input == data
    low = 47                        # one byte over: every form refuses it

    monkeypatch.setattr(B, "MAX_INPUT_BYTES", low)
    e = error(doc(**{form: value}), tmp_path)
    assert e.path == f"$.transactions[0].{form}"
    assert e.message == (f"x.in: 48 bytes; the limit is {low}" if form == "input_file"
                         else f"more than {low} bytes")


def test_inputs_total_limit(monkeypatch):
    monkeypatch.setattr(B, "MAX_TOTAL_INPUT", 10)
    obj = doc(input="00" * 6)
    obj["transactions"].append({"elf": "hello.elf", "input": "00" * 4})
    assert len(parse_block(obj, txblocks.BIN).transactions) == 2
    obj["transactions"].append({"elf": "hello.elf", "input": "00"})
    e = error(obj)
    assert e.path == "$.transactions[2]"
    assert e.message == "the transactions' inputs exceed 10 bytes in all"


def test_claimed_output_limit(monkeypatch):
    monkeypatch.setattr(abi, "MAX_OUTPUT_BYTES", 4)
    assert parse_block(doc(output="00" * 4), txblocks.BIN).transactions[0].output == bytes(4)
    e = error(doc(output="00" * 5))
    assert e.path == "$.transactions[0].output" and e.message == "more than 4 bytes"


def test_max_cycles_at_both_ends():
    top = abi.MAX_SEGMENTED_CYCLES
    for ok in (1, top):
        obj = dict(doc(), max_cycles=ok)
        assert parse_block(obj, txblocks.BIN).max_cycles == ok
    for bad in (0, top + 1, -1):
        e = error(dict(doc(), max_cycles=bad))
        assert e.path == "$.max_cycles" and e.message == f"{bad} is out of range [1, {top}]"


@pytest.mark.parametrize("make", [txblocks.empty_block, txblocks.one_tx_block,
                                  txblocks.hash_heavy_block, txblocks.memory_heavy_block])
def test_fixture_blocks_round_trip(make):
    """Every fixture block's self-contained JSON (ELFs inline) parses back to the same
    programs, inputs, claims, max_cycles and state_in, as an object and as text."""
    blk = make()
    canon = blk.to_json()
    for back in (parse_block(canon), loads_block(json.dumps(canon))):
        assert (back.max_cycles, back.state_in) == (blk.max_cycles, blk.state_in)
        assert [(t.program.digest(), t.input, t.output, t.exit_code)
                for t in back.transactions] == [
            (t.program.digest(), t.input, t.output, t.exit_code) for t in blk.transactions]
        assert back.to_json() == canon
