"""Running a program: :func:`execute` picks an engine -- the compiled loop
(:mod:`rv32.fastexec`, the default) or the reference interpreter (:mod:`rv32.interp`) --
and returns its :class:`~rv32.execution.Execution`."""
from __future__ import annotations

from . import abi
from .execution import Execution


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


__all__ = ["execute", "ENGINES"]
