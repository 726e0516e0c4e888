"""Symbolic AIRs for Steadfast: write a table's constraints once, derive everything else.

``air`` depends on numpy only -- never on ``kernels`` or ``prover`` -- so that the
verifier can import the same definitions the prover uses.

The DSL
-------
An :class:`AirBuilder` declares columns and collects constraints and interactions;
``build()`` freezes an :class:`Air`.  Expressions are ordinary Python arithmetic
(``+ - * **``, ints are field constants, ``-1`` is p-1) over:

* ``b.main("x")`` / ``b.main_cols("limb", 8)``: main (witness) columns, base field;
* ``b.prep("opcode")`` / ``b.prep_cols(...)``: preprocessed columns -- fixed per AIR
  instance (a ROM, a selector pattern), values passed to ``build(preprocessed=uint32[n,k])``;
* ``col.next``: the same column on the next row;
* ``b.pv("name")``: a public value of this table (declared on first use, or up front
  with ``AirBuilder(name, public=[...])``); prover and verifier receive them as a list
  in declaration order.

Constraints (each ``expr = 0`` on some rows; an optional ``name`` shows up in check mode):

* ``b.assert_zero(e)`` (every row), ``b.assert_eq(a, b)``, ``b.assert_bool(x)``;
* ``b.when_first_row(e)``, ``b.when_last_row(e)``;
* ``b.when_transition(e)``: every row but the last -- the only kind that may use ``.next``.

Conditions on data are written as products, e.g. ``b.assert_zero(is_add * (c - a - b))``.

Interactions (LogUp, across tables): ``b.send(bus, [v0, v1, ...], multiplicity=1)`` and
``b.receive(bus, [...], multiplicity=m)``; over all tables of a proof every tuple's total
sent multiplicity must equal its total received multiplicity (mod p).  Values and
multiplicities are base-field expressions of the current row (main/prep columns, public
values, constants).  Each bus carries tuples of a single arity.

Derived from one definition
---------------------------
* ``air.max_degree`` (Plonky3 count: degree in trace columns, +1 for first/last-row
  conditions) and ``air.num_parts = max(1, D - 1)``; ``air.check_parts(log_blowup)``
  refuses an AIR needing more than 2^log_blowup parts.
* LogUp: the interactions are batched (greedily, declaration order, while the batch
  constraint's degree stays <= max(D_user, 2, single-interaction degree)); the aux trace
  has one EF column h_k per batch but the last (h_k = sum of sign*m/d over the batch)
  and an accumulator ``acc``; constraints ``h_k * prod(d) = ...`` (every row) and one
  cyclic constraint on every row that makes the last batch's fractions the increment
  ``acc' - acc - sum h_k + U`` (U = the table's LogUp sum divided by n, the ``term``
  leaf: see :func:`air.builder._derive_logup`); d = gamma - (bus_id + sum_j
  beta^(j+1) v_j).  ``air.constraints`` lists user constraints, then these.
* ``air.constraint_program`` / ``air.interaction_program``: straight-line programs
  (:mod:`air.program`) -- the structure a numba or CUDA kernel generator walks.
* :func:`quotient_on_coset` (numpy, vectorised over a domain), :func:`numerator_at_point`
  (EF, at the out-of-domain point), :func:`check_traces` (check mode).

Worked example
--------------
A Fibonacci table whose outputs are range-checked by a RANGE table (multiplicities),
plus a preprocessed ROM table::

    import numpy as np
    from steadfast.air import AirBuilder, check_traces

    fib = AirBuilder("fib", public=["a0", "b0", "out"])
    a, b = fib.main("a"), fib.main("b")
    fib.when_first_row(a - fib.pv("a0"), name="start_a")
    fib.when_first_row(b - fib.pv("b0"), name="start_b")
    fib.when_transition(a.next - b, name="shift")
    fib.when_transition(b.next - (a + b), name="add")
    fib.when_last_row(b - fib.pv("out"), name="result")
    fib.send("range8", [a])                        # every a must be < 256
    FIB = fib.build()

    rng = AirBuilder("range8")
    value, mult = rng.main("value"), rng.main("mult")
    rng.when_first_row(value, name="v0")
    rng.when_transition(value.next - value - 1, name="inc")
    rng.receive("range8", [value], multiplicity=mult)
    RANGE = rng.build()

    rom = AirBuilder("rom")
    pc, op = rom.prep("pc"), rom.prep("op")         # fixed columns, part of the statement
    x = rom.main("x")
    rom.assert_zero(op * (x - pc), name="x_is_pc_when_op")
    ROM = rom.build(preprocessed=np.array([[i, i % 2] for i in range(8)], dtype=np.uint32))

    # traces are uint32[n, width] with n a power of two
    check_traces([FIB, RANGE], [fib_trace, range_trace], [[0, 1, out], []])

Degrees: ``FIB.max_degree`` is 2 (first/last-row conditions on degree-1 expressions;
LogUp's h*d - m is 2 as well), so ``FIB.num_parts == 1``; a degree-3 transition such as
``b.when_transition(x.next - x * x * y)`` makes D = 3 and 2 parts (needs log_blowup >= 1).
"""
from .builder import Air, AirBuilder, AirError, Constraint, Interaction, bus_id, check_buses
from .check import (ConstraintViolation, LookupImbalance, check_constraints, check_lookups,
                    check_shapes, check_traces, interaction_rows)
from .eval import (CHALLENGE_NAMES, coset_points, constraint_values, domain_leaf,
                   fold_constraints, numerator_at_point, point_leaf, quotient_on_coset,
                   selectors_at_point, selectors_on_coset)
from .expr import Expr, const
from .program import Program, compile_program, evaluate

__all__ = [
    "Air", "AirBuilder", "AirError", "Constraint", "Interaction", "bus_id", "check_buses",
    "ConstraintViolation", "LookupImbalance", "check_constraints", "check_lookups",
    "check_shapes", "check_traces", "interaction_rows", "CHALLENGE_NAMES", "coset_points",
    "constraint_values", "domain_leaf", "fold_constraints", "numerator_at_point",
    "point_leaf", "quotient_on_coset", "selectors_at_point", "selectors_on_coset", "Expr",
    "const", "Program", "compile_program", "evaluate",
]
