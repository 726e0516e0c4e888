"""The RV32IM machine: RISC-V programs (static ELF32 executables) and their execution.

docs/rv32.md is the machine's exact record.  The modules, one concept each:

* :mod:`rv32.elf` -- programs: ELF loading (:func:`parse_elf`, :func:`load_elf`),
  :class:`Program` and its digest;
* :mod:`rv32.isa` -- the instructions and their decoder; :mod:`rv32.asm` -- a tiny
  assembler (tests, bench generator);
* :mod:`rv32.abi` -- state at entry, memory map, system calls, limits;
* :mod:`rv32.memory` -- sparse 32-bit memory;
* :mod:`rv32.record` -- the execution record the AIR traces are built from;
* :mod:`rv32.run` -- :func:`execute`: it runs :mod:`rv32.fastexec` (the compiled loop)
  or :mod:`rv32.interp` (the reference); :mod:`rv32.execution` -- the
  :class:`Execution` they return;
* :mod:`rv32.errors` -- :class:`ElfError`, :class:`ExecutionError`.

Its proofs (docs/rv32.md "Tables (AIRs)"): :mod:`rv32.traces` -- :func:`build_traces`
(:class:`Rv32Traces`); :mod:`rv32.statement` -- :func:`program_airs`,
:func:`public_values`, :func:`claimed_output`, :func:`slots_of`,
:func:`verify_execution`; :mod:`rv32.tables` -- :data:`TABLES`.  They are re-exported
here and imported on first use (the AIRs pull in the constraint stack, which running a
program does not need).
"""
from .abi import (DEFAULT_MAX_CYCLES, MAX_CYCLES_CEILING, STACK_TOP, SYS_EXIT, SYS_EXIT_GROUP,
                  SYS_POSEIDON2, SYS_READ, SYS_WRITE)
from .elf import Program, Segment, load_elf, parse_elf
from .errors import ElfError, ExecutionError
from .execution import Execution
from .run import execute
from .record import Record

_LAZY = {"build_traces": "traces", "Rv32Traces": "traces", "program_airs": "statement",
         "public_values": "statement", "claimed_output": "statement", "slots_of": "statement",
         "verify_execution": "statement", "TABLES": "tables"}


def __getattr__(name):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value


__all__ = ["Program", "Segment", "load_elf", "parse_elf", "ElfError", "ExecutionError",
           "Execution", "execute", "Record", "DEFAULT_MAX_CYCLES", "MAX_CYCLES_CEILING",
           "STACK_TOP", "SYS_READ", "SYS_WRITE", "SYS_EXIT", "SYS_EXIT_GROUP",
           "SYS_POSEIDON2", *_LAZY]
