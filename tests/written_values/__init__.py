"""The written-values analysis of tests/test_rv32_written_values.py (docs/rv32.md "Written
values: the inventory"; the method is that file's docstring), by concept:

* :mod:`written_values.algebra` -- polynomials mod p over an AIR's columns and *domains*
  (intervals with a congruence) with their arithmetic;
* :mod:`written_values.model` -- one AIR as polynomials: its constraints, its interactions'
  facts, one-hot groups, and the targets (the values it writes);
* :mod:`written_values.search` -- the bound of one target: case splits over one column
  component's flags, propagation of domains through the constraints;
* :mod:`written_values.analysis` -- whole proofs: the fixed tables' ranges, every AIR's
  report, the inventory and its markdown table, and the BYTES lookups per row (docs/rv32.md
  "No count wraps mod p").
"""
