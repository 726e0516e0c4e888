"""``prove()``: the multi-table STARK as a linear script of numbered rounds.

    R1  commit every main trace; absorb roots in table order; LogUp challenges; fork
        per table; (per table) LogUp aux trace -> LDE -> commit
    R2  (per table) alpha; constraints on the quotient domain; fold; / Z_H; decompose
        into num_parts parts; LDE + commit the parts
    R3  (per table) z; open every column at z (z*w for next-row reads); absorb
    R4  (per table) DEEP quotient, table digest; then the join (once): mu, one FRI for
        all tables (layers of arity up to 2^log_fri_arity, tables rolled in at their
        height, final polynomial in clear); proof of work; queries; openings as Merkle
        multiproofs against caps

Soundness notes: every value the verifier uses is absorbed before the challenges that
depend on it (statement first, no "frozen heart"); the LogUp challenges come after all
main commitments; each table's alpha comes after its aux commitment and claimed terminal;
z after the parts commitment; lambda after all openings; mu after every table's digest
(every fork's whole transcript); each FRI beta after its layer cap; the queries after the
proof of work.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ...air import check_buses, check_shapes, check_traces
from ...verifier.proof_format import Params, encode
from ...verifier.protocol import table_shape

from .pages import small_pages
from .rounds import prove_statement, statement
from ..common.spans import NullSpans, Spans
from .stages import HostStages


def prepare(tables: Sequence[np.ndarray], airs: Sequence, public_values=None,
            params: Params | None = None, *, check: bool = True):
    """Validate the inputs and build the :class:`prover.core.rounds.Statement` (shapes, public
    values, parameters); ``check`` runs check mode (ConstraintViolation / LookupImbalance
    naming table, constraint and row)."""
    params = params or Params()
    params.validate()
    airs = list(airs)
    tables = list(tables)
    if len(tables) != len(airs) or not airs:
        raise ValueError(f"{len(tables)} tables for {len(airs)} AIRs (need at least one)")
    if public_values is None:
        public_values = [()] * len(airs)
    if len(public_values) != len(airs):
        raise ValueError(f"{len(public_values)} public-value lists for {len(airs)} tables")
    public_values = [list(pv or ()) for pv in public_values]
    check_buses(airs)
    shapes = []
    for air, t, pv in zip(airs, tables, public_values):
        check_shapes(air, t, pv)
        shapes.append(table_shape(air, t.shape[0].bit_length() - 1, params))
    if check:
        check_traces(airs, tables, public_values)
    return statement(airs, tables, public_values, params, shapes)


def prove(tables: Sequence[np.ndarray], airs: Sequence, public_values=None,
          params: Params | None = None, *, stages=None, spans: Spans | None = None,
          check: bool = True, logs: list | None = None, device=None,
          device_stats: list | None = None) -> bytes:
    """Prove that ``tables[i]`` (uint32[n_i, w_i]) satisfies ``airs[i]`` for every i, with
    the LogUp buses balanced across all tables; returns the proof bytes.

    ``public_values``: one list per table (None: no table has public values).
    ``params``: :class:`verifier.proof_format.Params` (default ``Params()``: log_blowup 2,
    50 queries, 16 bits of proof of work).  ``stages``: the per-table backend (default
    HostStages).
    ``spans``: records per-round / per-table durations.  ``check``: run check mode first
    (raises ConstraintViolation / LookupImbalance naming table, constraint and row);
    ``check=False`` forces a proof of whatever the tables hold (for soundness tests).
    ``logs``: if a list is given, the transcript label logs are appended (main, then one
    per table).  ``device``: a :class:`prover.device.pipeline.PipelineConfig` to run on a device
    backend (emu, sim, cuda) -- same bytes; its stats are appended to ``device_stats``.
    The protocol core does not import the device pipeline: a device is anything with
    ``run(statement, spans=, logs=) -> (proof bytes, stats)`` (PipelineConfig.run).
    Its buffers are allocated on ordinary pages (:func:`prover.core.pages.small_pages`).
    """
    with small_pages():
        return _prove(tables, airs, public_values, params, stages, spans, check, logs,
                      device, device_stats)


def _prove(tables, airs, public_values, params, stages, spans, check, logs, device,
           device_stats) -> bytes:
    st = prepare(tables, airs, public_values, params, check=check)
    spans = spans or NullSpans()
    if device is not None:
        proof, pstats = device.run(st, spans=spans, logs=logs)
        if device_stats is not None:
            device_stats.append(pstats)
        return proof
    proof = encode(prove_statement(st, stages or HostStages(table_roots=False), spans, logs))
    spans.count("proof_bytes", len(proof))
    return proof
