"""The security figure of a proof: conjectured bits, the minimum over every term.

A forger wins if any one of the protocol's random challenges falls on a "bad" value, so
the soundness error of a block proof is (at most) the *sum* of the per-challenge errors
over every table (union bound).  Each term below is a probability per attempt of a
Fiat-Shamir prover; a grinding step (proof of work) right before a challenge divides its
term by 2^bits.  The reported figure is ``floor(-log2(sum of all terms))``, which is at
most the weakest term and drops by log2(k) when k tables each contribute a like term.

With |EF| = p^4 (about 2^123.98), per table t with n_t trace rows, LDE size N_t,
K_t constraints, maximal constraint degree D_t, k_t DEEP-opened columns and r_t FRI folds:

* ``fri_queries``  rho^q * 2^-pow_bits with rho = 2^-log_blowup (ethSTARK conjecture:
  each query catches a far word with probability 1 - rho, grinding before the queries);
* ``alpha``        (K_t - 1) / |EF|      (constraints folded with powers of alpha);
* ``ood``          D_t * n_t / |EF| * 2^-commit_pow_bits  (the composition identity at
  a random z: a false claim survives only at a root of a nonzero polynomial of degree
  < D_t * n_t; grinding before z);
* ``deep``         (k_t - 1) * N_t / |EF| * 2^-deep_pow_bits  (the DEEP quotients of the
  opened columns batched with powers of lambda: proximity-gap error of a power batch);
* ``fri_fold``     sum_i N_t / 2^i / |EF| * 2^-commit_pow_bits  (< 2 N_t / |EF|: each
  folding challenge, each after its own grinding step);
* ``logup``        (sum_t n_t * I_t) * (A + 1) / |EF| * 2^-logup_pow_bits, once per
  block: I_t interactions per row, A the largest tuple arity; the LogUp identity
  sum m / (gamma - fingerprint_beta(v)) = 0, cleared of denominators, is a nonzero
  polynomial of that total degree in (beta, gamma) when the multisets differ
  (Schwartz-Zippel), and grinding before beta, gamma covers it.

Everything here is a function of the parameters and the table shapes, which the
verifier knows before any hashing.  Pure Python; docs/protocol.md section 7 has the
figures for the example block and the 2^24-row limit.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from .proof_format import P, Params

EF_BITS = 4 * math.log2(P)            # log2 |EF|, about 123.98


@dataclass(frozen=True)
class SecurityReport:
    """The figure and its terms (each term in bits, summed over the tables)."""
    bits: int                                    # floor(-log2(sum of every term))
    terms: dict = field(default_factory=dict)    # term name -> bits of that term alone
    tables: int = 0

    @property
    def limiting(self) -> str:
        """The weakest term's name."""
        return min(self.terms, key=self.terms.get) if self.terms else ""

    def describe(self) -> str:
        parts = ", ".join(f"{k} {v:.1f}" for k, v in sorted(self.terms.items(), key=lambda kv: kv[1]))
        return f"{self.bits} bits over {self.tables} tables (terms in bits: {parts})"


def _bits(eps: float) -> float:
    return float("inf") if eps <= 0 else -math.log2(eps)


def table_terms(params: Params, log_n: int, num_constraints: int, max_degree: int,
                deep_columns: int, num_folds: int, interactions: int) -> dict:
    """One table's error terms as probabilities (``logup_fractions`` is its share of the
    LogUp term's fraction count, n_t * I_t)."""
    n = 1 << log_n
    big_n = n << params.log_blowup
    ef = 2.0 ** EF_BITS
    fold = sum((big_n >> i) for i in range(num_folds)) / ef * 2.0 ** -params.commit_pow_bits
    return {
        "fri_queries": 2.0 ** -(params.log_blowup * params.num_queries + params.pow_bits),
        "alpha": max(0, num_constraints - 1) / ef,
        "ood": max(1, max_degree) * n / ef * 2.0 ** -params.commit_pow_bits,
        "deep": max(0, deep_columns - 1) * big_n / ef * 2.0 ** -params.deep_pow_bits,
        "fri_fold": fold,
        "logup_fractions": n * interactions,
    }


def security_report(params: Params, tables: Sequence[dict]) -> SecurityReport:
    """The security figure from per-table shape facts: each item of ``tables`` has
    ``log_n``, ``constraints``, ``max_degree``, ``deep_columns``, ``folds``,
    ``interactions`` and ``max_arity``."""
    sums: dict = {}
    fractions, arity = 0, 0
    for t in tables:
        terms = table_terms(params, t["log_n"], t["constraints"], t["max_degree"],
                            t["deep_columns"], t["folds"], t["interactions"])
        fractions += terms.pop("logup_fractions")
        arity = max(arity, t["max_arity"])
        for k, v in terms.items():
            sums[k] = sums.get(k, 0.0) + v
    if fractions:
        sums["logup"] = fractions * (arity + 1) / 2.0 ** EF_BITS * 2.0 ** -params.logup_pow_bits
    total = sum(sums.values())
    # rounded down, and an exact power of two counts as just below it (the field terms,
    # far smaller than a double's precision next to the query term, are never zero)
    bits = max(0, int(math.floor(_bits(total) - 1e-9))) if total > 0 else 0
    return SecurityReport(bits, {k: _bits(v) for k, v in sums.items()}, len(tables))


def air_facts(air, log_n: int, params: Params) -> dict:
    """The shape facts of one table that :func:`security_report` needs (AIR + height)."""
    uses_next = bool(air.uses_next_main)
    aux_base = 4 * air.aux_width
    deep_cols = air.main_width * (2 if uses_next else 1) + 2 * aux_base + 4 * air.num_parts
    return {"log_n": int(log_n), "constraints": len(air.constraints),
            "max_degree": int(air.max_degree), "deep_columns": deep_cols,
            "folds": max(0, int(log_n) - params.log_final_poly_len),
            "interactions": len(air.interactions),
            "max_arity": max([len(it.values) for it in air.interactions], default=0)}


def proof_security(params: Params, airs: Sequence, log_ns: Sequence[int]) -> SecurityReport:
    """The figure of a proof with these parameters for tables ``airs`` of heights 2^log_n."""
    return security_report(params, [air_facts(a, ln, params) for a, ln in zip(airs, log_ns)])
