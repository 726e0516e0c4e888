"""Blocks: the JSON format (docs/block-format.md, vm/block.schema.json), parsing and
validation with JSON-path error messages.

A block is a JSON object::

    {"format": "steadfast-block", "version": 1, "memory_size": 64,
     "initial_memory": [{"address": 0, "values": [1, 2, 3]}],
     "programs": [{"name": "sum", "code": [["READ", 0], ["READ", 1], ["ADD", 2, 0, 1],
                                           ["WRITE", 2], ["HALT"]]}],
     "transactions": [{"program": 0, "inputs": [2, 3], "outputs": [5]}]}

Every listed field is required (``{}`` is an error, not an empty block); ``max_cycles`` is
the only optional one.  Validation is total: any problem raises :class:`BlockError` whose
``path`` names the offending field (``$.transactions[3].inputs[0]``).  Two kinds of problem
are *not* format errors, because a well-formed block may contain them in code that never
runs: an unknown opcode name and an operand out of range (a memory address outside
``[0, memory_size)`` or a jump target outside the program).  Such an instruction is encoded
as INVALID in the ROM and fails when -- if ever -- it executes (see :mod:`vm.interpreter`).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from . import isa
from steadfast.errors import SteadfastError

FORMAT = "steadfast-block"
VERSION = 1

# Size limits (docs/block-format.md "Limits").  Addresses and LT operands are range-checked
# against the 2^16-row RANGE table, and memory times must stay below 2^24 (3 per cycle).
MAX_FILE_BYTES = 256 << 20
MAX_MEMORY_SIZE = 1 << 16
MAX_PROGRAMS = 1024
MAX_PROGRAM_LEN = 1 << 16
MAX_TOTAL_CODE = 1 << 18
MAX_TRANSACTIONS = 1 << 16
MAX_IO_PER_TX = 1 << 16
MAX_TOTAL_IO = 1 << 20
MAX_SEGMENTS = 1 << 16
# The one cycle ceiling: the block format caps max_cycles here, the CPU AIR enforces the
# public max_cycles at the STOP row (a 21-bit slack), and the block verifier
# (prover.api.verify) refuses a CPU table of more than 2^MAX_LOG_CYCLES rows.
MAX_LOG_CYCLES = 21
MAX_CYCLES = 1 << MAX_LOG_CYCLES
MAX_NAME_LEN = 128


class BlockError(SteadfastError, ValueError):
    """A malformed block: ``path`` is the JSON path of the bad field (``$`` = the root)."""

    def __init__(self, path: str, message: str):
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}")


@dataclass(frozen=True)
class Instruction:
    """One instruction as written: opcode name and raw operands (ints).  ``error`` is set
    when the instruction cannot execute (unknown opcode, operand out of range)."""
    op: str
    operands: tuple
    error: str | None = None


@dataclass(frozen=True)
class Program:
    name: str
    code: tuple                      # of Instruction


@dataclass(frozen=True)
class Transaction:
    program: int
    inputs: tuple                    # canonical field elements
    outputs: tuple                   # the claimed outputs


@dataclass(frozen=True)
class Block:
    """A validated block.  ``initial_memory`` is a tuple of (address, values) segments."""
    memory_size: int
    initial_memory: tuple
    programs: tuple
    transactions: tuple
    max_cycles: int = MAX_CYCLES
    version: int = VERSION

    def dense_memory(self) -> list[int]:
        mem = [0] * self.memory_size
        for addr, values in self.initial_memory:
            mem[addr:addr + len(values)] = values
        return mem

    def to_json(self) -> dict:
        """The canonical JSON form (``parse_block(b.to_json()) == b``)."""
        obj = {"format": FORMAT, "version": self.version, "memory_size": self.memory_size,
               "initial_memory": [{"address": a, "values": list(v)} for a, v in self.initial_memory],
               "programs": [{"name": p.name, "code": [[i.op, *i.operands] for i in p.code]}
                            for p in self.programs],
               "transactions": [{"program": t.program, "inputs": list(t.inputs),
                                 "outputs": list(t.outputs)} for t in self.transactions]}
        if self.max_cycles != MAX_CYCLES:
            obj["max_cycles"] = self.max_cycles
        return obj


# --------------------------------------------------------------------------- helpers

def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def _expect(v: Any, kind: type, path: str, what: str):
    ok = isinstance(v, kind) and not (kind is int and isinstance(v, bool))
    if not ok:
        raise BlockError(path, f"expected {what}, got {_type_name(v)}")
    return v


def _int(v: Any, path: str, lo: int, hi: int, what: str = "an integer") -> int:
    _expect(v, int, path, what)
    if not lo <= v <= hi:
        raise BlockError(path, f"{v} is out of range [{lo}, {hi}]")
    return v


def _array(v: Any, path: str, max_len: int, what: str) -> list:
    _expect(v, list, path, what)
    if len(v) > max_len:
        raise BlockError(path, f"too many entries: {len(v)} (the limit is {max_len})")
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


def _field_elements(v: Any, path: str, max_len: int) -> tuple:
    arr = _array(v, path, max_len, "an array of field elements")
    out = []
    for i, x in enumerate(arr):
        out.append(_int(x, f"{path}[{i}]", 0, isa.P - 1, "a field element (integer)"))
    return tuple(out)


# --------------------------------------------------------------------------- parsing

def _parse_instruction(v: Any, path: str, memory_size: int, length: int) -> Instruction:
    _expect(v, list, path, "an instruction array such as [\"ADD\", 2, 0, 1]")
    if not v:
        raise BlockError(path, "empty instruction (expected [OPCODE, operands...])")
    op = _expect(v[0], str, f"{path}[0]", "an opcode name (string)")
    raw = v[1:]
    spec = isa.USER_OPS.get(op)
    limit = isa.P - 1
    if spec is None:
        if len(raw) > 3:
            raise BlockError(path, f"too many operands ({len(raw)})")
        ops = tuple(_int(x, f"{path}[{k + 1}]", -limit, limit) for k, x in enumerate(raw))
        return Instruction(op, ops, f"bad opcode {op!r}")
    if len(raw) != len(spec.operands):
        raise BlockError(path, f"{op} takes {len(spec.operands)} operand(s) "
                               f"({', '.join(spec.operands) or 'none'}), got {len(raw)}")
    ops = tuple(_int(x, f"{path}[{k + 1}]", -limit, limit) for k, x in enumerate(raw))
    error = None
    for k, (kind, x) in enumerate(zip(spec.operands, ops)):
        if kind == "addr" and not (0 <= x and x + spec.hash_width <= memory_size):
            span = f"{x}..{x + spec.hash_width - 1}" if spec.hash_width > 1 else str(x)
            error = f"memory address {span} out of range [0, {memory_size})"
        elif kind == "target" and not 0 <= x < length:
            error = f"jump target {x} out of range [0, {length})"
        if error:
            break
    return Instruction(op, ops, error)


def parse_block(obj: Any) -> Block:
    """Validate a decoded JSON value and return a :class:`Block` (or raise BlockError)."""
    root = "$"
    _object(obj, root, ("format", "version", "memory_size", "initial_memory", "programs",
                        "transactions"), ("max_cycles",))
    fmt = _expect(obj["format"], str, "$.format", "a string")
    if fmt != FORMAT:
        raise BlockError("$.format", f"expected {FORMAT!r}, got {fmt!r}")
    version = _expect(obj["version"], int, "$.version", "an integer")
    if version != VERSION:
        raise BlockError("$.version", f"unsupported version {version} (this build reads {VERSION})")
    msize = _int(obj["memory_size"], "$.memory_size", 8, MAX_MEMORY_SIZE)
    if msize % 8:
        raise BlockError("$.memory_size", f"{msize} is not a multiple of 8")
    max_cycles = MAX_CYCLES
    if "max_cycles" in obj:
        max_cycles = _int(obj["max_cycles"], "$.max_cycles", 1, MAX_CYCLES)

    segments = []
    covered = []
    for i, seg in enumerate(_array(obj["initial_memory"], "$.initial_memory", MAX_SEGMENTS,
                                   "an array of memory segments")):
        p = f"$.initial_memory[{i}]"
        _object(seg, p, ("address", "values"))
        addr = _int(seg["address"], f"{p}.address", 0, msize - 1)
        values = _field_elements(seg["values"], f"{p}.values", msize)
        if addr + len(values) > msize:
            raise BlockError(f"{p}.values", f"segment {addr}..{addr + len(values) - 1} runs past "
                                            f"memory_size {msize}")
        segments.append((addr, values))
        covered.append((addr, addr + len(values), i))
    covered.sort()
    for (a0, e0, i0), (a1, _e1, i1) in zip(covered, covered[1:]):
        if a1 < e0:
            raise BlockError(f"$.initial_memory[{i1}].address",
                             f"segment overlaps $.initial_memory[{i0}] at address {a1}")

    programs = []
    total = 0
    for i, prog in enumerate(_array(obj["programs"], "$.programs", MAX_PROGRAMS,
                                    "an array of programs")):
        p = f"$.programs[{i}]"
        _object(prog, p, ("name", "code"))
        name = _expect(prog["name"], str, f"{p}.name", "a string")
        if not 0 < len(name) <= MAX_NAME_LEN:
            raise BlockError(f"{p}.name", f"name must have 1..{MAX_NAME_LEN} characters")
        code = _array(prog["code"], f"{p}.code", MAX_PROGRAM_LEN, "an array of instructions")
        if not code:
            raise BlockError(f"{p}.code", "a program needs at least one instruction")
        total += len(code)
        if total > MAX_TOTAL_CODE:
            raise BlockError(f"{p}.code", f"the programs hold more than {MAX_TOTAL_CODE} "
                                          "instructions in all")
        instrs = tuple(_parse_instruction(ins, f"{p}.code[{k}]", msize, len(code))
                       for k, ins in enumerate(code))
        programs.append(Program(name, instrs))

    txs = []
    io_total = 0
    for i, tx in enumerate(_array(obj["transactions"], "$.transactions", MAX_TRANSACTIONS,
                                  "an array of transactions")):
        p = f"$.transactions[{i}]"
        _object(tx, p, ("program", "inputs", "outputs"))
        if not programs:
            raise BlockError(f"{p}.program", "the block has no programs to run")
        prog = _int(tx["program"], f"{p}.program", 0, len(programs) - 1, "a program index")
        inputs = _field_elements(tx["inputs"], f"{p}.inputs", MAX_IO_PER_TX)
        outputs = _field_elements(tx["outputs"], f"{p}.outputs", MAX_IO_PER_TX)
        io_total += len(inputs) + len(outputs)
        if io_total > MAX_TOTAL_IO:
            raise BlockError(p, f"the transactions carry more than {MAX_TOTAL_IO} inputs and "
                                "outputs in all")
        txs.append(Transaction(prog, inputs, outputs))
    return Block(msize, tuple(segments), tuple(programs), tuple(txs), max_cycles, version)


def _reject_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


def _no_duplicates(pairs):
    obj = {}
    for k, v in pairs:
        if k in obj:
            raise ValueError(f"duplicate key {k!r}")
        obj[k] = v
    return obj


def loads_block(text: str | bytes) -> Block:
    """Parse block JSON text; syntax errors become ``BlockError('$', ...)`` with the line."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
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
    return parse_block(obj)


def load_block(path: str | os.PathLike) -> Block:
    """Read and validate a block file.  OSError (missing/unreadable file) propagates;
    everything about the content is a BlockError."""
    size = os.path.getsize(path)
    if size > MAX_FILE_BYTES:
        raise BlockError("$", f"file is {size} bytes; the limit is {MAX_FILE_BYTES}")
    with open(path, "rb") as fh:
        return loads_block(fh.read())
