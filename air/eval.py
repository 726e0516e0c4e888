"""Evaluators derived from an AIR: over a coset domain (vectorised, base-field trace
values) and at one extension-field point (the out-of-domain check).

Row conditions are polynomials on x (Plonky3's unnormalised selectors), with
H = <w_n> the trace domain and Z_H(x) = x^n - 1:

* ``all``:        1
* ``first``:      Z_H(x) / (x - 1)          (zero on H except at row 0 = w^0)
* ``last``:       Z_H(x) / (x - w^-1)       (zero on H except at row n-1)
* ``transition``: x - w^-1                  (zero exactly at the last row)

α-folding (the order is the AIR's canonical constraint order, user constraints then
LogUp constraints, Horner style so the first constraint gets the highest power)::

    N(x) = sum_k alpha^(K-1-k) * sel_k(x) * C_k(x),      Q(x) = N(x) / Z_H(x)

The verifier checks N(z) = Z_H(z) * Q(z) with Q(z) rebuilt from the opened parts.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from . import field as F
from .builder import Air
from .program import POINT_EF_KINDS, evaluate, evaluate_point, _mul

CHALLENGE_NAMES = ("logup_beta", "logup_gamma")


def _ef_scalar(v) -> np.ndarray:
    """Accept an EF scalar as 4 coefficients (any layout) -> (4, 1) uint64."""
    a = np.asarray(v, dtype=np.uint64).reshape(4, 1)
    return a


def constraint_values(air: Air, leaf, ef_kinds=None) -> list:
    """Every constraint's value (no selector applied), canonical order."""
    return evaluate(air.constraint_program, leaf, ef_kinds)


def fold_constraints(air: Air, values: Sequence, alpha, selectors: Mapping,
                     all_ef: bool = False) -> np.ndarray:
    """sum_k alpha^(K-1-k) sel_k C_k as an EF array (4, M).  ``selectors`` maps
    ``first``/``last``/``transition`` to base arrays (M,) or EF values (4, 1) (the number
    of dimensions tells them apart)."""
    alpha = _ef_scalar(alpha)
    K = len(values)
    apow = F.ef_powers(alpha, K)                 # (4, K): alpha^0 .. alpha^(K-1)
    groups: dict[str, np.ndarray] = {}
    for k, (c, v) in enumerate(zip(air.constraints, values)):
        coeff = apow[:, K - 1 - k: K - k]        # (4, 1)
        term = F.ef_mul(coeff, v) if (all_ef or c.expr.is_ef) else F.ef_mul_base(coeff, v)
        groups[c.when] = term if c.when not in groups else F.ef_add(groups[c.when], term)
    total = None
    for when, acc in groups.items():
        if when != "all":
            sel = selectors[when]
            acc = _mul(acc, sel, True, np.ndim(sel) == 2)   # EF selectors are (4, 1)
        total = acc if total is None else F.ef_add(total, acc)
    if total is None:
        return np.zeros((4, 1), dtype=np.uint64)
    return total


# ------------------------------------------------------------------ selectors

def coset_points(shift: int, log_m: int) -> np.ndarray:
    """x_j = shift * w_M^j for j < M = 2^log_m (natural order), uint64."""
    return F.mul(F.powers(F.root_of_unity(log_m), 1 << log_m), shift % F.P)


def selectors_on_coset(log_n: int, shift: int, log_m: int) -> tuple[dict, np.ndarray]:
    """Selectors and 1/Z_H on the coset shift*<w_M> (M >= n), base arrays (M,).
    Z_H(x) = x^n - 1 takes only M/n distinct values there: (shift^n) * w_(M/n)^j."""
    n, M = 1 << log_n, 1 << log_m
    x = coset_points(shift, log_m)
    omega_inv = pow(F.root_of_unity(log_n), F.P - 2, F.P)
    distinct = F.sub(F.mul(F.powers(F.root_of_unity(log_m - log_n), M // n),
                           pow(shift, n, F.P)), 1)
    if np.any(distinct == 0):
        raise ValueError("the coset meets the trace domain (Z_H vanishes)")
    zh = np.tile(distinct, n)                 # x_j^n depends on j mod M/n
    inv_zh = np.tile(F.inv(distinct), n)
    xm1 = F.sub(x, 1)
    xmw = F.sub(x, omega_inv)
    sel = {"first": F.mul(zh, F.inv(xm1)),
           "last": F.mul(zh, F.inv(xmw)),
           "transition": xmw}
    return sel, inv_zh


def selectors_at_point(z, log_n: int) -> tuple[dict, np.ndarray]:
    """Selectors (EF (4,1) values) and Z_H(z) at an EF point z (not in H)."""
    z = _ef_scalar(z)
    n = 1 << log_n
    omega_inv = pow(F.root_of_unity(log_n), F.P - 2, F.P)
    zh = F.ef_add_base(F.ef_pow(z, n), F.P - 1)
    zm1 = F.ef_add_base(z, F.P - 1)
    zmw = F.ef_add_base(z, (F.P - omega_inv) % F.P)
    sel = {"first": (F.ef_mul(zh, F.ef_inv(zm1))),
           "last": (F.ef_mul(zh, F.ef_inv(zmw))),
           "transition": (zmw)}
    return sel, zh


# ------------------------------------------------------------------ leaf suppliers

def domain_leaf(main, prep, aux, next_shift: int, public_values, challenges: Mapping,
                terminal=None):
    """A leaf function over a domain of M points in natural order.

    main: (w, M) base values; prep: (k, M) or None; aux: (4, a, M) EF or None;
    next_shift: how many positions the next trace row is away (M / n); the next-row value
    at position j is the value at (j + next_shift) mod M.
    """
    cache: dict = {}

    def leaf(op, payload):
        if op in ("main", "prep", "aux"):
            j, nxt = payload
            key = (op, j, nxt)
            if key in cache:
                return cache[key]
            src = {"main": main, "prep": prep, "aux": aux}[op]
            col = np.asarray(src[:, j] if op == "aux" else src[j], dtype=np.uint64)
            v = np.roll(col, -next_shift, axis=-1) if nxt else col
            cache[key] = v
            return v
        if op == "pv":
            return np.uint64(public_values[payload])
        if op == "chal":
            return _ef_scalar(challenges[payload])
        if op == "term":
            return _ef_scalar(terminal)
        raise ValueError(f"unknown leaf {op!r}")

    return leaf


def point_leaf(opened: Mapping, public_values, challenges: Mapping, terminal=None):
    """A leaf function at one EF point: ``opened[(kind, next)]`` is an EF array (c, 4)
    (column c's value at z or z*w, coefficients on the last axis, as in the proof)."""

    def leaf(op, payload):
        if op in ("main", "prep", "aux"):
            j, nxt = payload
            return np.asarray(opened[(op, bool(nxt))][j], dtype=np.uint64).reshape(4, 1)
        if op == "pv":
            return np.uint64(public_values[payload])
        if op == "chal":
            return _ef_scalar(challenges[payload])
        if op == "term":
            return _ef_scalar(terminal)
        raise ValueError(f"unknown leaf {op!r}")

    return leaf


def quotient_on_coset(air: Air, leaf, alpha, selectors: Mapping, inv_zh) -> np.ndarray:
    """Q(x) = N(x) / Z_H(x) on a coset chunk; returns EF (4, M)."""
    vals = constraint_values(air, leaf)
    num = fold_constraints(air, vals, alpha, selectors)
    return F.ef_mul_base(num, inv_zh)


def numerator_at_point(air: Air, leaf, alpha, z, log_n: int):
    """(N(z), Z_H(z)) as EF (4, 1) values -- the composition check compares
    N(z) with Z_H(z) * Q(z)."""
    sel, zh = selectors_at_point(z, log_n)
    vals = evaluate_point(air.constraint_program, leaf, POINT_EF_KINDS)
    # a constraint that is a constant (no leaves) comes back as a base scalar: lift it
    vals = [v if np.ndim(v) == 2 else F.ef_from_base(np.asarray(v, np.uint64).reshape(1))
            for v in vals]
    return fold_constraints(air, vals, alpha, sel, all_ef=True), zh
