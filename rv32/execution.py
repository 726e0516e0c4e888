"""What a run of a program returns: an :class:`Execution` (:func:`rv32.run.execute` runs
one; the engines build it).

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


__all__ = ["Execution"]
