"""The Steadfast reference VM: its ISA, block format, interpreter and tables.

* :mod:`vm.isa` -- the instruction set (docs/vm.md);
* :mod:`vm.block` -- block JSON parsing/validation (docs/block-format.md, block.schema.json);
* :mod:`vm.rom` -- the ROM layout of programs and system code;
* :mod:`vm.interpreter` -- execution, producing an :class:`~vm.interpreter.ExecutionRecord`;
* :mod:`vm.statement` -- the public values of a block proof;
* :mod:`vm.airs` and :mod:`vm.traces` -- the five tables (CPU, PROGRAM, MEMORY, RANGE,
  POSEIDON2) as AIRs and their trace generators.
"""
from .block import Block, BlockError, load_block, loads_block, parse_block
from .interpreter import ExecutionError, ExecutionRecord, execute

__all__ = ["Block", "BlockError", "load_block", "loads_block", "parse_block", "ExecutionError",
           "ExecutionRecord", "execute"]
