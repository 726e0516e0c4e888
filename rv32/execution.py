"""Running a program: :func:`execute` and what it returns, an :class:`Execution`.

``execute(program, input=b"", max_cycles=DEFAULT_MAX_CYCLES, record=False)`` runs the
compiled loop (:mod:`rv32.fastexec`); ``engine="python"`` runs the reference interpreter
(:mod:`rv32.interp`) instead -- the two agree exactly.  A run ends at exit/exit_group
(an :class:`Execution`) or fails with :class:`~rv32.errors.ExecutionError`; an input or
limit the machine does not accept (input over MAX_INPUT_BYTES, max_cycles outside
[1, MAX_CYCLES_CEILING]) raises ValueError before anything runs.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import abi
from .memory import Memory
from .record import Record


@dataclass(frozen=True, eq=False)
class Execution:
    """One finished run: ``cycles`` executed (the exit ECALL included), ``exit_code``
    (a0 mod 256 at exit), ``output`` (fd 1's bytes), ``stderr`` (fd 2's), the final
    ``regs`` (uint32[32]) and ``pc`` (the exit ECALL's), the final ``memory`` and, when
    asked for, the ``record`` (:mod:`rv32.record`)."""
    cycles: int
    exit_code: int
    output: bytes
    stderr: bytes
    regs: np.ndarray
    pc: int
    memory: Memory
    record: Record | None = None

    def __post_init__(self):
        regs = np.array(self.regs, dtype=np.uint32)
        regs.setflags(write=False)
        object.__setattr__(self, "regs", regs)


ENGINES = ("compiled", "python")


def execute(program, input: bytes = b"", max_cycles: int = abi.DEFAULT_MAX_CYCLES,
            record: bool = False, engine: str = "compiled") -> Execution:
    """Run ``program`` (an :class:`~rv32.elf.Program`) on ``input`` (fd 0's bytes)."""
    from .elf import Program
    if not isinstance(program, Program):
        raise TypeError(f"expected a Program (rv32.load_elf, parse_elf or Program.from_words), "
                        f"got {type(program).__name__}")
    if engine == "compiled":
        from . import fastexec
        return fastexec.run(program, input, max_cycles, record)
    if engine == "python":
        from . import interp
        return interp.run(program, input, max_cycles, record)
    raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")


__all__ = ["Execution", "execute", "ENGINES"]
