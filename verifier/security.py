"""The security figure of a proof (format v3): conjectured bits, from every term.

A forger wins if any one of the protocol's random challenges falls on a "bad" value, so
the soundness error of a block proof is (at most) the *sum* of the per-challenge errors
(union bound).  Each term below is a probability per attempt of a Fiat-Shamir prover; a
grinding step (proof of work) right before a challenge divides its term by 2^bits.  The
reported figure is ``floor(-log2(sum of all terms))``, computed exactly (rationals over
|EF| = p^4, about 2^123.98); it is at most the weakest term.

Per table t with n_t trace rows, LDE size N_t = n_t * 2^log_blowup, K_t constraints,
maximal constraint degree D_t and k_t DEEP-opened columns:

* ``alpha``        (K_t - 1) / |EF|      (constraints folded with powers of alpha);
* ``ood``          D_t * n_t / |EF| * 2^-commit_pow_bits  (the composition identity at
  a random z: a false claim survives only at a root of a nonzero polynomial of degree
  < D_t * n_t; grinding before z);
* ``deep``         (k_t - 1) * N_t / |EF| * 2^-deep_pow_bits  (the opened columns batched
  with powers of lambda: proximity-gap error of a power batch);

and once per proof, for the one FRI over all tables (layer heights h_0 > ... > h_r from
:func:`verifier.protocol.fri_layer_heights`, a_i = 2^(h_i - h_(i+1)) the arity of layer i):

* ``fri_queries``  rho^q * 2^-pow_bits with rho = 2^-log_blowup (ethSTARK conjecture:
  each query catches a far word with probability 1 - rho; grinding before the queries);
* ``fri_mu``       sum over heights h of (c_h - 1) * 2^h / |EF| * 2^-commit_pow_bits, c_h the
  number of tables of LDE height h (their DEEP quotients batched with powers of mu, after
  the ``mu_pow`` proof of work);
* ``fri_fold``     sum_i a_i * 2^(h_i) / |EF| * 2^-commit_pow_bits  (layer i batches its
  a_i cosets' values and the rolled-in tables with powers of beta_i, each challenge
  after its own grinding step);
* ``logup``        (sum_t n_t * I_t) * (A + 1) / |EF| * 2^-logup_pow_bits: I_t
  interactions per row, A the largest tuple arity; the LogUp identity
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
from fractions import Fraction
from typing import Sequence

from .proof_format import P, Params
from .protocol import fri_layer_heights

EF_BITS = 4 * math.log2(P)            # log2 |EF|, about 123.98
EF_SIZE = P ** 4                       # |EF| exactly


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


def _bits(eps: Fraction) -> float:
    """-log2(eps) as a float (inf for 0); exact rationals of any size."""
    if eps <= 0:
        return float("inf")
    num, den = eps.numerator, eps.denominator
    # shift both to ~60 significant bits before the float division (no overflow)
    sn, sd = max(0, num.bit_length() - 60), max(0, den.bit_length() - 60)
    return -(math.log2((num >> sn) / (den >> sd)) + sn - sd)


def _floor_bits(total: Fraction) -> int:
    """floor(-log2(total)) exactly: the largest b >= 0 with total <= 2^-b (0 for total >= 1)."""
    if total >= 1:
        return 0
    num, den = total.numerator, total.denominator
    b = max(0, den.bit_length() - num.bit_length() - 1)
    while (num << (b + 1)) <= den:                    # total <= 2^-(b+1)
        b += 1
    while b > 0 and (num << b) > den:                 # total > 2^-b
        b -= 1
    return b


def table_terms(params: Params, log_n: int, num_constraints: int, max_degree: int,
                deep_columns: int, interactions: int, **_ignored) -> dict:
    """One table's own error terms as exact probabilities (``logup_fractions`` is its
    share of the LogUp term's fraction count, n_t * I_t)."""
    n = 1 << log_n
    big_n = n << params.log_blowup
    return {
        "alpha": Fraction(max(0, num_constraints - 1), EF_SIZE),
        "ood": Fraction(max(1, max_degree) * n, EF_SIZE << params.commit_pow_bits),
        "deep": Fraction(max(0, deep_columns - 1) * big_n, EF_SIZE << params.deep_pow_bits),
        "logup_fractions": n * interactions,
    }


def fri_terms(params: Params, log_ns: Sequence[int]) -> dict:
    """The one FRI's terms (exact probabilities) for tables of heights 2^log_ns."""
    terms = {"fri_queries": Fraction(1, 1 << (params.log_blowup * params.num_queries
                                               + params.pow_bits))}
    if not log_ns:
        return terms
    counts: dict = {}
    for ln in log_ns:
        h = int(ln) + params.log_blowup
        counts[h] = counts.get(h, 0) + 1
    terms["fri_mu"] = Fraction(sum((c - 1) << h for h, c in counts.items()),
                               EF_SIZE << params.commit_pow_bits)
    hs = fri_layer_heights(params, log_ns)
    fold = sum((1 << (hs[i] - hs[i + 1])) << hs[i] for i in range(len(hs) - 1))
    terms["fri_fold"] = Fraction(fold, EF_SIZE << params.commit_pow_bits)
    return terms


def security_report(params: Params, tables: Sequence[dict]) -> SecurityReport:
    """The security figure from per-table shape facts: each item of ``tables`` has
    ``log_n``, ``constraints``, ``max_degree``, ``deep_columns``, ``interactions`` and
    ``max_arity``."""
    sums: dict = {}
    fractions, arity = 0, 0
    for t in tables:
        terms = table_terms(params, t["log_n"], t["constraints"], t["max_degree"],
                            t["deep_columns"], t["interactions"])
        fractions += terms.pop("logup_fractions")
        arity = max(arity, t["max_arity"])
        for k, v in terms.items():
            sums[k] = sums.get(k, Fraction(0)) + v
    sums.update(fri_terms(params, [t["log_n"] for t in tables]))
    if fractions:
        sums["logup"] = Fraction(fractions * (arity + 1), EF_SIZE << params.logup_pow_bits)
    total = sum(sums.values(), Fraction(0))
    bits = _floor_bits(total) if total > 0 else 0
    return SecurityReport(bits, {k: _bits(v) for k, v in sums.items()}, len(tables))


def air_facts(air, log_n: int, params: Params) -> dict:
    """The shape facts of one table that :func:`security_report` needs (AIR + height)."""
    uses_next = bool(air.uses_next_main)
    aux_base = 4 * air.aux_width
    deep_cols = air.main_width * (2 if uses_next else 1) + 2 * aux_base + 4 * air.num_parts
    return {"log_n": int(log_n), "constraints": len(air.constraints),
            "max_degree": int(air.max_degree), "deep_columns": deep_cols,
            "interactions": len(air.interactions),
            "max_arity": max([len(it.values) for it in air.interactions], default=0)}


def proof_security(params: Params, airs: Sequence, log_ns: Sequence[int]) -> SecurityReport:
    """The figure of a proof with these parameters for tables ``airs`` of heights 2^log_n."""
    return security_report(params, [air_facts(a, ln, params) for a, ln in zip(airs, log_ns)])
