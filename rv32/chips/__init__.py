"""The RV32IM machine's tables (AIRs) and their trace builders, one chip a module.

docs/rv32.md "Tables (AIRs)" gives every table, column, constraint and bus with the reason
it is sound; :mod:`rv32.tables` lists them in proof order, :mod:`rv32.traces` builds the
traces of an execution and :mod:`rv32.statement` holds the public values.
"""
