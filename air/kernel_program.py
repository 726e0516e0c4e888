"""The prover's evaluation form of an AIR's constraints (kernels/constraint_host.py's and
kernels/constraint_codegen.py's quotient kernels): the same polynomials as the AIR's own
constraint program, in an order that costs fewer extension-field products.  The AIR, its
program and fingerprint (which the transcript absorbs and the verifier rebuilds) are not
touched (tests/test_kernel_program.py)."""
from __future__ import annotations

from .builder import _denominator, _logup_exprs
from .program import Program, compile_program


def logup_kernel_exprs(batches) -> list:
    """The LogUp constraints of :func:`air.builder._derive_logup` over these batches, the same
    polynomials (so the same value at every point) in a cheaper form for the prover's
    quotient kernels: each batch's fractions are added one at a time,
    (num, den) <- (num d_i + sign_i m_i den, den d_i) from (sign_0 m_0, d_0), instead of
    every sum_i sign_i m_i prod_(j != i) d_j term multiplied out -- 2k - 2 extension-field
    products a batch of k instead of k^2 - k (the wide RV32 tables: 4 of 5-6 batches of
    4).  The AIR's own constraints, program and fingerprint are unchanged: this is an
    evaluation order, not a statement (kernels/constraint_host.py)."""
    return _logup_exprs(batches, _fractions_incremental)


def _fractions_incremental(batch):
    """(den, num) of a batch's fractions summed one at a time:
    (num, den) <- (num d_i + sign_i m_i den, den d_i), from (sign_0 m_0, d_0)."""
    num = den = None
    for it in batch:
        d = _denominator(it)
        m = it.multiplicity if it.sign > 0 else -it.multiplicity
        if den is None:
            num, den = m, d
        else:
            num, den = num * d + m * den, den * d
    return den, num


def kernel_program(air) -> Program:
    """The program the prover's quotient kernels run for ``air`` (host:
    kernels/constraint_host.py, device: kernels/constraint_codegen.py): its user
    constraints, then its LogUp constraints in :func:`logup_kernel_exprs`' form -- the
    same polynomials as ``air.constraint_program`` in the same order (the same value at
    every point: the same quotient, the same proof), ~40 % fewer extension-field products
    on the wide RV32 tables.  ``air.constraint_program`` itself for an AIR without
    interactions (or whose constraint list does not split into user and LogUp ones)."""
    user = getattr(air, "user_constraints", None)
    batches = getattr(air, "lookup_batches", ())
    if not batches or user is None or len(user) + len(batches) != len(air.constraints):
        return air.constraint_program
    return compile_program([c.expr for c in user] + logup_kernel_exprs(batches))
