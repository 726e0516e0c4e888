"""Blocks, format version 2 (docs/block-format.md): a JSON list of RISC-V transactions, parsed
and validated with JSON-path error messages.

A block is a JSON object::

    {"format": "steadfast-block", "version": 2, "max_cycles": 1048576,
     "state_in": "00...00",
     "programs": [{"name": "transfer", "elf": "transfer.elf"}],
     "transactions": [{"program": "transfer", "input": "0100000002000000",
                       "output": "...", "exit_code": 0},
                      {"elf_base64": "f0VMRgEBAQ...", "input_file": "data.bin"}]}

A transaction names its RV32IM program in exactly one way -- ``program`` (a name from the
block's ``programs``), ``elf`` (a path relative to the block file) or ``elf_base64`` (the
ELF inline) -- and its fd 0 bytes in at most one: ``input`` (hex), ``input_base64`` or
``input_file`` (a path relative to the block file); none is the empty input.  ``output``
(hex) and ``exit_code`` are optional *claims*: the prover refuses a block whose execution
does not bear them out, and the verifier compares them with the proof's.  ``max_cycles``
(optional, default 2^22; at most 2^32 - 1: a transaction longer than one epoch is proved in
segments, docs/rv32.md "Blocks in epochs") is every transaction's cycle limit and part of
the statement;
``state_in`` (optional, 32 bytes in hex, default zeros) is the chain state the block
extends (rv32/block.py ``state_out``).

Validation is total: any problem raises :class:`BlockError` whose ``path`` names the
offending field (``$.transactions[3].input``).  A version-1 block (the retired
field-element VM's) is refused with its version named.
"""
from __future__ import annotations

import base64
import binascii
import json
import os
from dataclasses import dataclass
from typing import Any

from steadfast.errors import SteadfastError

from . import abi
from .elf import ElfError, Program, parse_elf, write_elf

FORMAT = "steadfast-block"
VERSION = 2
MAX_FILE_BYTES = 256 << 20
MAX_PROGRAMS = 1024
MAX_TRANSACTIONS = 4095     # 16 tables each + 2 shared: the proof format counts tables in a u16
MAX_ELF_BYTES = 64 << 20
MAX_INPUT_BYTES = 64 << 20
MAX_TOTAL_INPUT = 256 << 20
MAX_NAME_LEN = 128
STATE_BYTES = 32
DEFAULT_MAX_CYCLES = abi.DEFAULT_MAX_CYCLES


class BlockError(SteadfastError, ValueError):
    """A malformed block: ``path`` is the JSON path of the bad field (``$`` = the root)."""

    def __init__(self, path: str, message: str):
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}")


@dataclass(frozen=True)
class Transaction:
    """One transaction: the program, its fd 0 bytes, and the optional claims."""
    program: Program
    input: bytes
    output: bytes | None = None      # the claimed fd 1 bytes, if the block claims them
    exit_code: int | None = None     # the claimed exit code, if the block claims it
    name: str = ""                   # the program's name in the block (or its source)


@dataclass(frozen=True)
class Block:
    """A validated block: transactions in order, every transaction's cycle limit, and the
    chain state it extends."""
    transactions: tuple
    max_cycles: int = DEFAULT_MAX_CYCLES
    state_in: bytes = bytes(STATE_BYTES)
    version: int = VERSION

    def to_json(self) -> dict:
        """The canonical, self-contained JSON form (ELFs and inputs inline; programs once
        each, by digest): ``parse_block(b.to_json()) == b`` up to program names."""
        programs, names = [], {}
        for tx in self.transactions:
            d = tx.program.digest()
            if d not in names:
                names[d] = f"p{len(programs)}"
                programs.append({"name": names[d], "elf_base64": base64.b64encode(
                    program_bytes(tx.program)).decode()})
        txs = []
        for tx in self.transactions:
            t: dict = {"program": names[tx.program.digest()], "input": tx.input.hex()}
            if tx.output is not None:
                t["output"] = tx.output.hex()
            if tx.exit_code is not None:
                t["exit_code"] = tx.exit_code
            txs.append(t)
        return {"format": FORMAT, "version": VERSION, "max_cycles": self.max_cycles,
                "state_in": self.state_in.hex(), "programs": programs, "transactions": txs}


def program_bytes(program: Program) -> bytes:
    """An ELF of the program (rv32.elf ``write_elf``: its segments and entry point, so the
    same digest)."""
    return write_elf(program)


# --------------------------------------------------------------------------- helpers

def _type_name(v: Any) -> str:
    for kind, name in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
                       (list, "array"), (dict, "object")):
        if isinstance(v, kind):
            return name
    return "null" if v is None else type(v).__name__


def _expect(v: Any, kind: type, path: str, what: str):
    if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
        raise BlockError(path, f"expected {what}, got {_type_name(v)}")
    return v


def _int(v: Any, path: str, lo: int, hi: int, what: str = "an integer") -> int:
    _expect(v, int, path, what)
    if not lo <= v <= hi:
        raise BlockError(path, f"{v} is out of range [{lo}, {hi}]")
    return v


def _object(v: Any, path: str, required: tuple, optional: tuple = ()) -> dict:
    _expect(v, dict, path, "an object")
    for key in required:
        if key not in v:
            raise BlockError(path, f"missing required field {key!r}")
    for key in v:
        if key not in required and key not in optional:
            raise BlockError(f"{path}.{key}", "unknown field")
    return v


def _hex(v: Any, path: str, limit: int) -> bytes:
    _expect(v, str, path, "a hex string")
    if len(v) > 2 * limit:
        raise BlockError(path, f"more than {limit} bytes")
    try:
        return bytes.fromhex(v)
    except ValueError:
        raise BlockError(path, "not an even-length hex string") from None


def _b64(v: Any, path: str, limit: int) -> bytes:
    _expect(v, str, path, "a base64 string")
    if len(v) > 4 * (limit // 3 + 1):
        raise BlockError(path, f"more than {limit} bytes")
    try:
        data = base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError):
        raise BlockError(path, "not valid base64") from None
    if len(data) > limit:
        raise BlockError(path, f"more than {limit} bytes")
    return data


def _file(v: Any, path: str, base_dir: str | None, limit: int) -> bytes:
    _expect(v, str, path, "a file path (string)")
    if not v:
        raise BlockError(path, "empty file path")
    full = v if os.path.isabs(v) else os.path.join(base_dir or os.getcwd(), v)
    try:
        if os.path.exists(full) and not os.path.isfile(full):
            raise BlockError(path, f"{v}: not a regular file")    # a FIFO, /dev/zero: no end
        size = os.path.getsize(full)
        if size > limit:
            raise BlockError(path, f"{v}: {size} bytes; the limit is {limit}")
        with open(full, "rb") as fh:
            data = fh.read(limit + 1)
        if len(data) > limit:                   # grew since getsize
            raise BlockError(path, f"{v}: more than {limit} bytes; the limit is {limit}")
        return data
    except OSError as exc:
        raise BlockError(path, f"cannot read {v!r}: {exc.strerror or exc}") from None


def _elf(data: bytes, path: str) -> Program:
    try:
        return parse_elf(data)
    except ElfError as exc:
        raise BlockError(path, f"not an RV32IM program the machine loads: {exc}") from None


def _program_source(obj: dict, path: str, base_dir, keys=("elf", "elf_base64")):
    given = [k for k in keys if k in obj]
    if len(given) != 1:
        raise BlockError(path, "give the program exactly once: " + " or ".join(repr(k) for k in keys))
    k = given[0]
    p = f"{path}.{k}"
    if k == "elf":
        return _elf(_file(obj[k], p, base_dir, MAX_ELF_BYTES), p), obj[k]
    if k == "elf_base64":
        return _elf(_b64(obj[k], p, MAX_ELF_BYTES), p), "inline"
    raise AssertionError(k)


def _input(obj: dict, path: str, base_dir) -> bytes:
    given = [k for k in ("input", "input_base64", "input_file") if k in obj]
    if len(given) > 1:
        raise BlockError(path, "give the input at most once: 'input' (hex), 'input_base64' "
                               "or 'input_file'")
    if not given:
        return b""
    k = given[0]
    p = f"{path}.{k}"
    if k == "input":
        return _hex(obj[k], p, MAX_INPUT_BYTES)
    if k == "input_base64":
        return _b64(obj[k], p, MAX_INPUT_BYTES)
    return _file(obj[k], p, base_dir, MAX_INPUT_BYTES)


# --------------------------------------------------------------------------- parsing

_TX_FIELDS = ("program", "elf", "elf_base64", "input", "input_base64", "input_file", "output",
              "exit_code")


def parse_block(obj: Any, base_dir: str | os.PathLike | None = None) -> Block:
    """Validate a decoded JSON value and return a :class:`Block` (or raise BlockError);
    relative paths are taken from ``base_dir`` (the block file's folder; default: the
    working directory)."""
    base = None if base_dir is None else os.fspath(base_dir)
    _expect(obj, dict, "$", "an object")
    if "version" in obj and obj["version"] != VERSION:
        v = obj["version"]
        old = " (the field-element VM's format, retired: see docs/block-format.md)" \
            if v == 1 else ""
        raise BlockError("$.version", f"unsupported version {v!r}{old}; this build reads "
                                      f"version {VERSION}")
    _object(obj, "$", ("format", "version", "transactions"),
            ("max_cycles", "state_in", "programs"))
    fmt = _expect(obj["format"], str, "$.format", "a string")
    if fmt != FORMAT:
        raise BlockError("$.format", f"expected {FORMAT!r}, got {fmt!r}")
    max_cycles = DEFAULT_MAX_CYCLES
    if "max_cycles" in obj:
        max_cycles = _int(obj["max_cycles"], "$.max_cycles", 1, abi.MAX_SEGMENTED_CYCLES)
    state_in = bytes(STATE_BYTES)
    if "state_in" in obj:
        state_in = _hex(obj["state_in"], "$.state_in", STATE_BYTES)
        if len(state_in) != STATE_BYTES:
            raise BlockError("$.state_in", f"expected {STATE_BYTES} bytes (64 hex digits), "
                                           f"got {len(state_in)}")
    programs: dict = {}
    progs = _expect(obj.get("programs", []), list, "$.programs", "an array of programs")
    if len(progs) > MAX_PROGRAMS:
        raise BlockError("$.programs", f"too many entries: {len(progs)} (the limit is "
                                       f"{MAX_PROGRAMS})")
    for i, prog in enumerate(progs):
        p = f"$.programs[{i}]"
        _object(prog, p, ("name",), ("elf", "elf_base64"))
        name = _expect(prog["name"], str, f"{p}.name", "a string")
        if not 0 < len(name) <= MAX_NAME_LEN:
            raise BlockError(f"{p}.name", f"name must have 1..{MAX_NAME_LEN} characters")
        if name in programs:
            raise BlockError(f"{p}.name", f"duplicate program name {name!r}")
        programs[name] = _program_source(prog, p, base)[0]
    txs_in = _expect(obj["transactions"], list, "$.transactions", "an array of transactions")
    if len(txs_in) > MAX_TRANSACTIONS:
        raise BlockError("$.transactions", f"too many entries: {len(txs_in)} (the limit is "
                                           f"{MAX_TRANSACTIONS})")
    txs, total = [], 0
    for i, tx in enumerate(txs_in):
        p = f"$.transactions[{i}]"
        _object(tx, p, (), _TX_FIELDS)
        if "program" in tx:
            if "elf" in tx or "elf_base64" in tx:
                raise BlockError(p, "give the program exactly once: 'program', 'elf' or "
                                    "'elf_base64'")
            name = _expect(tx["program"], str, f"{p}.program", "a program name (string)")
            if name not in programs:
                raise BlockError(f"{p}.program", f"no program named {name!r} in $.programs")
            program = programs[name]
        else:
            program, name = _program_source(tx, p, base)
        data = _input(tx, p, base)
        total += len(data)
        if total > MAX_TOTAL_INPUT:
            raise BlockError(p, f"the transactions' inputs exceed {MAX_TOTAL_INPUT} bytes in all")
        output = _hex(tx["output"], f"{p}.output", abi.MAX_OUTPUT_BYTES) \
            if "output" in tx else None
        code = _int(tx["exit_code"], f"{p}.exit_code", 0, 255) if "exit_code" in tx else None
        txs.append(Transaction(program, data, output, code, name))
    return Block(tuple(txs), max_cycles, state_in)


def _reject_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


def _no_duplicates(pairs):
    obj = {}
    for k, v in pairs:
        if k in obj:
            raise ValueError(f"duplicate key {k!r}")
        obj[k] = v
    return obj


def loads_block(text: str | bytes, base_dir: str | os.PathLike | None = None) -> Block:
    """Parse block JSON text; syntax errors become ``BlockError('$', ...)`` with the line."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BlockError("$", f"not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise BlockError("$", "empty document (expected a JSON object)")
    try:
        obj = json.loads(text, parse_constant=_reject_constant,
                         object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise BlockError("$", f"not valid JSON: {exc.msg} at line {exc.lineno} "
                              f"column {exc.colno}") from None
    except (ValueError, RecursionError) as exc:
        raise BlockError("$", f"not valid JSON: {exc}") from None
    return parse_block(obj, base_dir)


def load_block(path: str | os.PathLike) -> Block:
    """Read and validate a block file; its relative paths are taken from its folder.
    OSError (missing/unreadable file) propagates; everything about the content is a
    BlockError."""
    size = os.path.getsize(path)
    if size > MAX_FILE_BYTES:
        raise BlockError("$", f"file is {size} bytes; the limit is {MAX_FILE_BYTES}")
    with open(path, "rb") as fh:
        return loads_block(fh.read(), os.path.dirname(os.path.abspath(path)))


__all__ = ["Block", "Transaction", "BlockError", "parse_block", "loads_block", "load_block",
           "program_bytes", "FORMAT", "VERSION", "DEFAULT_MAX_CYCLES", "STATE_BYTES"]
