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
"""
from .abi import (DEFAULT_MAX_CYCLES, MAX_CYCLES_CEILING, STACK_TOP, SYS_EXIT, SYS_EXIT_GROUP,
                  SYS_POSEIDON2, SYS_READ, SYS_WRITE)
from .elf import Program, Segment, load_elf, parse_elf
from .errors import ElfError, ExecutionError
from .execution import Execution
from .run import execute
from .record import Record

__all__ = ["Program", "Segment", "load_elf", "parse_elf", "ElfError", "ExecutionError",
           "Execution", "execute", "Record", "DEFAULT_MAX_CYCLES", "MAX_CYCLES_CEILING",
           "STACK_TOP", "SYS_READ", "SYS_WRITE", "SYS_EXIT", "SYS_EXIT_GROUP",
           "SYS_POSEIDON2"]
