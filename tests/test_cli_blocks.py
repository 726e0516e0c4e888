"""The command line on bad blocks: malformed blocks named by file and JSON path (exit 2),
wrong types, missing fields and huge sizes, where an execution fails and which claim is
false (exit 1), never a proof file.  WEAK PARAMETERS (FAST).  (Split out of
tests/test_cli.py.)"""
from __future__ import annotations


import pytest

from steadfast.prover.cli import main_prove
from steadfast.rv32.blockfile import Transaction
from steadfast.rv32.elf import Program

from tests.cli_helpers import FAST, write, run
from tests.txblocks import block, one_tx_block


MALFORMED = [
    ("", "$: empty document"),
    ("not json at all", "$: not valid JSON"),
    ("{}", "$: missing required field 'format'"),
    ('{"format": "steadfast-block", "version": 2}', "$: missing required field 'transactions'"),
    ('{"format": "steadfast-block", "version": 2, "transactions": [], "a": 1, "a": 2}',
     "$: not valid JSON: duplicate key 'a'"),
    ("[1, 2]", "$: expected an object"),
]


@pytest.mark.parametrize("text,fragment", MALFORMED)
def test_malformed_block_exit_2_with_path(tmp_path, capsys, text, fragment):
    p = write(tmp_path, "b.json", text)
    code, out, err = run(main_prove, [p] + FAST, capsys)
    assert code == 2 and f"error: {p}: {fragment}" in err and out == ""
    assert not (tmp_path / "b.proof").exists()


@pytest.mark.parametrize("edit,path", [
    (lambda o: o.update(max_cycles="64"), "$.max_cycles"),
    (lambda o: o["transactions"][0].update(input=12), "$.transactions[0].input"),
    (lambda o: o["transactions"][0].pop("program"), "$.transactions[0]"),
    (lambda o: o.update(max_cycles=1 << 40), "$.max_cycles"),
    (lambda o: o["programs"][0].update(elf_base64="!!"), "$.programs[0].elf_base64"),
    (lambda o: o["transactions"][0].update(exit_code=1 << 40), "$.transactions[0].exit_code"),
    (lambda o: o.update(transactions=[{"program": "p0"}] * 4096), "$.transactions"),
])
def test_wrong_types_missing_fields_huge_sizes(tmp_path, capsys, edit, path):
    obj = one_tx_block().to_json()
    edit(obj)
    p = write(tmp_path, "b.json", obj)
    code, _, err = run(main_prove, [p] + FAST, capsys)
    assert code == 2 and f"error: {p}: {path}: " in err


def test_execution_failure_exit_1_says_where(tmp_path, capsys):
    """A transaction that runs out of cycles, or reaches an illegal instruction: exit 1,
    the transaction, its pc and cycle; no proof."""
    obj = one_tx_block().to_json()
    obj["max_cycles"] = 50
    code, _, err = run(main_prove, [write(tmp_path, "b.json", obj)] + FAST, capsys)
    assert code == 1
    assert "block cannot be proven: transaction 0 (p0): execution failed: pc 0x" in err
    assert "cycle 50: the program did not exit within max_cycles = 50" in err
    illegal = Transaction(Program.from_words([0x13, 0xFFFFFFFF]), b"", None, None, "bad")
    p = write(tmp_path, "c.json", block(one_tx_block().transactions[0], illegal).to_json())
    code, _, err = run(main_prove, [p] + FAST, capsys)
    assert code == 1 and "transaction 1 (p1): execution failed: pc 0x00010004, cycle 1: illegal " \
                         "instruction 0xffffffff" in err
    assert not (tmp_path / "b.proof").exists() and not (tmp_path / "c.proof").exists()


def test_false_claims_exit_1_names_the_output(tmp_path, capsys):
    obj = one_tx_block().to_json()
    obj["transactions"][0]["output"] = "6869"                  # "hi"
    code, _, err = run(main_prove, [write(tmp_path, "b.json", obj)] + FAST, capsys)
    assert code == 1 and "block cannot be proven: transaction 0 (p0): the block's claimed " \
                         "output differs from what execution writes" in err
    assert "first difference at byte 1: 2 bytes claimed, 21 written" in err
    assert "  claimed 69" in err and "  written 656c6c6f" in err
