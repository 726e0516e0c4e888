"""Block JSON: the loader's errors (with JSON paths), limits, the schema and examples."""
from __future__ import annotations

import copy
import json
import os

import pytest

from steadfast.vm import block as B
from steadfast.vm.block import BlockError, load_block, loads_block, parse_block

from tests.vm_blocks import one_tx_block

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "block.json")
SCHEMA = os.path.join(ROOT, "vm", "block.schema.json")


def good() -> dict:
    return one_tx_block().to_json()


def edit(path, value):
    """A copy of good() with the field at ``path`` (tuple of keys/indices) set or removed."""
    obj = good()
    node = obj
    for k in path[:-1]:
        node = node[k]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return obj


DELETE = object()
P = 2013265921

BAD = [
    # (document, JSON path, message fragment)
    ({}, "$", "missing required field 'format'"),
    ([], "$", "expected an object, got array"),
    (edit(("version",), DELETE), "$", "missing required field 'version'"),
    (edit(("version",), 2), "$.version", "unsupported version 2"),
    (edit(("version",), "1"), "$.version", "expected an integer, got string"),
    (edit(("format",), "other"), "$.format", "expected 'steadfast-block'"),
    (edit(("memory_size",), "64"), "$.memory_size", "got string"),
    (edit(("memory_size",), True), "$.memory_size", "got boolean"),
    (edit(("memory_size",), 64.0), "$.memory_size", "got number"),
    (edit(("memory_size",), 60), "$.memory_size", "not a multiple of 8"),
    (edit(("memory_size",), 10 ** 12), "$.memory_size", "out of range [8, 65536]"),
    (edit(("max_cycles",), 1 << 30), "$.max_cycles", "out of range"),
    (edit(("extra",), 1), "$.extra", "unknown field"),
    (edit(("initial_memory",), {}), "$.initial_memory", "expected an array"),
    (edit(("initial_memory", 0, "values", 1), P), "$.initial_memory[0].values[1]", "out of range"),
    (edit(("initial_memory", 0, "values", 0), -1), "$.initial_memory[0].values[0]", "out of range"),
    (edit(("initial_memory", 0, "values", 0), "7"), "$.initial_memory[0].values[0]", "got string"),
    (edit(("initial_memory", 0, "address"), 62), "$.initial_memory[0].values", "runs past"),
    (edit(("initial_memory", 0, "address"), DELETE), "$.initial_memory[0]", "missing required field 'address'"),
    (edit(("initial_memory",), [{"address": 0, "values": [1, 2]}, {"address": 1, "values": [3]}]),
     "$.initial_memory[1].address", "overlaps $.initial_memory[0]"),
    (edit(("programs",), None), "$.programs", "got null"),
    (edit(("programs", 0, "code"), []), "$.programs[0].code", "at least one instruction"),
    (edit(("programs", 0, "name"), ""), "$.programs[0].name", "1..128 characters"),
    (edit(("programs", 0, "code", 2), "ADD 2 0 1"), "$.programs[0].code[2]", "expected an instruction array"),
    (edit(("programs", 0, "code", 2), []), "$.programs[0].code[2]", "empty instruction"),
    (edit(("programs", 0, "code", 2), [7, 2, 0, 1]), "$.programs[0].code[2][0]", "opcode name"),
    (edit(("programs", 0, "code", 2), ["ADD", 2, 0]), "$.programs[0].code[2]", "ADD takes 3 operand(s)"),
    (edit(("programs", 0, "code", 2), ["ADD", 2, "0", 1]), "$.programs[0].code[2][2]", "got string"),
    (edit(("programs", 0, "code", 2), ["ADD", 2, 0, 1 << 40]), "$.programs[0].code[2][3]", "out of range"),
    (edit(("transactions", 0, "program"), 1), "$.transactions[0].program", "out of range [0, 0]"),
    (edit(("transactions", 0, "program"), "sum"), "$.transactions[0].program", "expected a program index"),
    (edit(("transactions", 0, "outputs"), DELETE), "$.transactions[0]", "missing required field 'outputs'"),
    (edit(("transactions", 0, "inputs"), [1.5]), "$.transactions[0].inputs[0]", "got number"),
    (edit(("transactions", 0, "inputs"), [0] * (B.MAX_IO_PER_TX + 1)), "$.transactions[0].inputs",
     "too many entries: 65537"),
    (edit(("transactions",), [0] * (B.MAX_TRANSACTIONS + 1)), "$.transactions", "too many entries"),
    (edit(("programs",), []), "$.transactions[0].program", "no programs"),
]


@pytest.mark.parametrize("doc,path,fragment", BAD, ids=[f"{i}:{p}" for i, (_, p, _) in enumerate(BAD)])
def test_malformed_blocks_name_the_path(doc, path, fragment):
    with pytest.raises(BlockError) as ei:
        parse_block(copy.deepcopy(doc))
    assert ei.value.path == path
    assert fragment in ei.value.message
    assert str(ei.value).startswith(path + ": ")


@pytest.mark.parametrize("text,fragment", [
    ("", "empty document"), ("   \n", "empty document"), ("not json", "not valid JSON"),
    ('{"format": "steadfast-block",', "not valid JSON"), ('{"a": 1, "a": 2}', "duplicate key"),
    ('{"memory_size": NaN}', "NaN is not valid JSON"), ("[" * 100000 + "]" * 100000, "not valid JSON"),
    (b"\xff\xfe{}", "not UTF-8"), ("1" * 5000, "not valid JSON"),
])
def test_unreadable_documents(text, fragment):
    with pytest.raises(BlockError) as ei:
        loads_block(text)
    assert ei.value.path == "$"
    assert fragment in ei.value.message


def test_file_size_limit(tmp_path, monkeypatch):
    f = tmp_path / "b.json"
    f.write_text(json.dumps(good()))
    assert load_block(f) == one_tx_block()
    monkeypatch.setattr(B, "MAX_FILE_BYTES", 100)
    with pytest.raises(BlockError, match=r"^\$: file is \d+ bytes; the limit is 100"):
        load_block(f)


def test_roundtrip_and_example():
    blk = load_block(EXAMPLE)
    assert parse_block(blk.to_json()) == blk
    assert len(blk.programs) == 3 and len(blk.transactions) == 6
    empty = edit(("transactions",), [])
    assert parse_block(empty).transactions == ()


def test_unknown_opcode_is_well_formed():
    blk = parse_block(edit(("programs", 0, "code", 2), ["FROB", 1]))
    assert blk.programs[0].code[2].error == "bad opcode 'FROB'"


def test_schema_limits_agree_with_loader():
    s = json.load(open(SCHEMA))
    assert set(s["required"]) == {"format", "version", "memory_size", "initial_memory",
                                  "programs", "transactions"}
    props = s["properties"]
    assert props["memory_size"]["maximum"] == B.MAX_MEMORY_SIZE
    assert props["max_cycles"]["maximum"] == B.MAX_CYCLES
    assert props["programs"]["maxItems"] == B.MAX_PROGRAMS
    assert props["transactions"]["maxItems"] == B.MAX_TRANSACTIONS
    assert props["version"]["const"] == B.VERSION and props["format"]["const"] == B.FORMAT
    assert s["$defs"]["felt"]["maximum"] == P - 1
    from steadfast.vm import isa
    arity = {}
    for rule in s["$defs"]["instruction"]["allOf"]:
        n = rule["then"]["maxItems"] - 1
        for op in rule["if"]["prefixItems"][0]["enum"]:
            arity[op] = n
    assert arity == {name: len(spec.operands) for name, spec in isa.USER_OPS.items()}


def test_schema_accepts_valid_and_rejects_malformed():
    jsonschema = pytest.importorskip("jsonschema")
    s = json.load(open(SCHEMA))
    jsonschema.Draft202012Validator.check_schema(s)
    v = jsonschema.Draft202012Validator(s)
    assert not list(v.iter_errors(json.load(open(EXAMPLE))))
    assert not list(v.iter_errors(good()))
    schema_only = {"$.initial_memory[1].address", "$.initial_memory[0].values", "$.transactions[0].program", "$.version",
                   "$.programs[0].code[2][3]"}      # cross-field or loader-only checks
    for doc, path, fragment in BAD:
        if path in schema_only or fragment == "got number" and path == "$.memory_size":
            continue                        # (JSON Schema calls 64.0 an integer)
        if "too many entries" in fragment:
            continue                        # maxItems is asserted above; skip 65537 items
        assert list(v.iter_errors(doc)), f"schema accepts a block the loader rejects at {path}"
