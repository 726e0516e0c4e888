"""The RV32IM machine's two errors: a program it refuses to load, a run that cannot finish.

* :class:`ElfError` -- the file is not a program the machine runs (not an ELF, the wrong
  class, byte order, type or machine, dynamic, truncated, overlapping or oversized
  segments, ...).  An input error like a malformed block (``rv32.blockfile.BlockError``): a
  ``SteadfastError`` and a ``ValueError``; ``field`` names the part of the file at fault
  (``"e_machine"``, ``"segment 2"``, ``"file"``).
* :class:`ExecutionError` -- the program loaded but its execution fails: an illegal
  instruction, a misaligned access or jump, a bad system call, the cycle limit.  ``pc``
  and ``cycle`` locate the failing instruction (``cycle`` = the number of instructions that
  completed before it; for the cycle limit, ``pc`` is the instruction that would have run
  next and ``cycle`` the limit), ``kind`` is one of :data:`KINDS` and ``reason`` says what
  happened.  Both interpreters raise it with the same fields and text.

The compiled loop cannot raise: it returns one of the ``ERR_*`` codes below with up to four
detail values, and :func:`execution_error` turns them into the exception -- the Python
interpreter builds its errors through the same function, so the texts cannot drift apart.
"""
from __future__ import annotations

from steadfast.errors import SteadfastError


class ElfError(SteadfastError, ValueError):
    """A file the RV32IM machine does not load; ``field`` names the part at fault."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class ExecutionError(SteadfastError, RuntimeError):
    """The program's execution fails at ``pc`` in ``cycle`` (see the module docstring)."""

    def __init__(self, kind: str, pc: int, cycle: int, reason: str):
        self.kind = kind
        self.pc = pc
        self.cycle = cycle
        self.reason = reason
        super().__init__(f"pc 0x{pc:08x}, cycle {cycle}: {reason}")


# Failure codes of the interpreters (the compiled loop's status) and their detail values.
OK = 0
ERR_CYCLES = 1          # max_cycles
ERR_FETCH = 2           # -                      pc is not inside an executable segment
ERR_ILLEGAL = 3         # word
ERR_MISALIGNED = 4      # address, size, is_store
ERR_JUMP = 5            # target                 target not 4-byte aligned
ERR_SYSCALL = 6         # a7                     unknown system call number
ERR_BUFFER = 7          # a7, address, length    buffer runs past 2^32
ERR_POINTER = 8         # a7, address            POSEIDON2 pointer not 4-byte aligned
ERR_CANONICAL = 9       # address, value         POSEIDON2 input word >= p
ERR_OUTPUT = 10         # fd, length             fd 1 or fd 2 past MAX_OUTPUT_BYTES

KINDS = {ERR_CYCLES: "cycles", ERR_FETCH: "fetch", ERR_ILLEGAL: "illegal",
         ERR_MISALIGNED: "misaligned", ERR_JUMP: "jump", ERR_SYSCALL: "syscall",
         ERR_BUFFER: "buffer", ERR_POINTER: "pointer", ERR_CANONICAL: "canonical",
         ERR_OUTPUT: "output"}


def execution_error(code: int, pc: int, cycle: int, detail) -> ExecutionError:
    """The :class:`ExecutionError` for failure ``code`` with its ``detail`` values."""
    from . import abi, isa        # (isa and abi import nothing from here but this module)
    d = [int(x) for x in detail]
    if code == ERR_CYCLES:
        reason = f"the program did not exit within max_cycles = {d[0]}"
    elif code == ERR_FETCH:
        reason = "pc is not inside an executable segment of the program"
    elif code == ERR_ILLEGAL:
        reason = f"illegal instruction 0x{d[0]:08x}: {isa.describe_illegal(d[0])}"
    elif code == ERR_MISALIGNED:
        what = "store" if d[2] else "load"
        reason = f"misaligned {d[1]}-byte {what} at address 0x{d[0]:08x}"
    elif code == ERR_JUMP:
        reason = f"jump or branch target 0x{d[0]:08x} is not 4-byte aligned"
    elif code == ERR_SYSCALL:
        reason = f"unknown system call number {d[0]} (0x{d[0]:08x}) in a7"
    elif code == ERR_BUFFER:
        reason = (f"{abi.syscall_name(d[0])}: buffer of {d[2]} bytes at 0x{d[1]:08x} runs "
                  f"past the end of the 32-bit address space")
    elif code == ERR_POINTER:
        reason = f"{abi.syscall_name(d[0])}: pointer 0x{d[1]:08x} is not 4-byte aligned"
    elif code == ERR_CANONICAL:
        reason = (f"poseidon2: input word 0x{d[1]:08x} at 0x{d[0]:08x} is not a canonical "
                  f"field element (>= p = {abi.P})")
    elif code == ERR_OUTPUT:
        reason = (f"write: fd {d[0]} would exceed MAX_OUTPUT_BYTES = {abi.MAX_OUTPUT_BYTES} "
                  f"({d[1]} bytes)")
    else:
        raise ValueError(f"unknown failure code {code}")
    return ExecutionError(KINDS[code], pc, cycle, reason)


__all__ = ["ElfError", "ExecutionError", "execution_error", "KINDS", "OK", "ERR_CYCLES",
           "ERR_FETCH", "ERR_ILLEGAL", "ERR_MISALIGNED", "ERR_JUMP", "ERR_SYSCALL",
           "ERR_BUFFER", "ERR_POINTER", "ERR_CANONICAL", "ERR_OUTPUT"]
