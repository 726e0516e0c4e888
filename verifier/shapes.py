"""Shape checks, before any hashing (the verifier parses and shape-checks the whole proof
up front): every array of every table section, of the commitments section and of the
FRI section has the shape that follows from the AIRs, the table heights and the
parameters, else :class:`ShapeError` (with expected/got).  The counts that depend on the
queries (opened rows, multiproof nodes, FRI values) are checked by
:func:`verifier.join.verify_join` once they are drawn.

* :func:`check_shapes` ``(proof, airs) -> [TableShape]``: the whole proof;
* :func:`check_table_shape` ``(section, shape, params)``: one table's section;
* :func:`check_commitments_shape` ``(commits, shapes, params)``: the commitments section
  (format 6: the caps of the main / aux / parts mixed-height trees, their node arrays).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..air.builder import AirError

from . import merkle
from .errors import ShapeError
from .proof_format import Commitments, FriProof, Params, Proof, TableProof, check_commitments
from .protocol import TableShape, fri_layer_heights, table_shape


def expect(cond: bool, what: str, table: str | None, got, expected) -> None:
    """ShapeError naming ``what`` (got / expected) unless ``cond``."""
    if not cond:
        raise ShapeError(f"{what}: got {got}, expected {expected}", table)


def check_table_shape(tp: TableProof, sh: TableShape, params: Params) -> None:
    """Every shape of a section that follows from the AIR, the table height and the
    parameters (the opened-row count needs the queries: :func:`verify_join`; the caps and
    nodes are the commitments section's: :func:`check_commitments_shape`)."""
    if not isinstance(params, Params):
        raise TypeError("check_table_shape(section, shape, params): params must be a "
                        f"verifier.proof_format.Params (v3), got {type(params).__name__}")
    name = sh.name
    a = lambda arr: tuple(np.shape(arr))  # noqa: E731
    expect(tp.log_n == sh.log_n, "log_n", name, tp.log_n, sh.log_n)
    has_aux = sh.aux_cols > 0
    w, aw, pw = sh.main_width, sh.aux_width, sh.parts_width
    wn = w if sh.uses_next_main else 0
    expected = [("public_values", (sh.num_public,)), ("terminal", (4,) if has_aux else (0,)),
                ("ood_main", (w, 4)), ("ood_main_next", (wn, 4)),
                ("ood_aux", (aw, 4)), ("ood_aux_next", (aw, 4)), ("ood_parts", (pw, 4))]
    for nm, shape in expected:
        expect(a(getattr(tp, nm)) == shape, f"{nm} shape", name, a(getattr(tp, nm)), shape)
    d = a(tp.main_rows)[0] if len(a(tp.main_rows)) == 2 else -1
    expect(1 <= d <= params.num_queries, "opened rows", name, d, f"1..{params.num_queries}")
    rows = [("main_rows", (d, w)), ("parts_rows", (d, pw)),
            ("aux_rows", (d, aw) if has_aux else (0, 0))]
    for nm, shape in rows:
        expect(a(getattr(tp, nm)) == shape, f"{nm} shape", name, a(getattr(tp, nm)), shape)


def check_commitments_shape(commits: Commitments, shapes: Sequence[TableShape],
                            params: Params) -> None:
    """The commitments section against the AIRs' shapes (table order): main_cap and
    parts_cap [2^c, 8] with c = min(log_cap, min_t log_lde_t); aux_cap [2^c', 8] with c'
    the same over the tables with aux columns, [0, 8] (and aux_nodes [0, 8]) when none
    has; every node array [*, 8] (its count needs the queries: :func:`verify_join`)."""
    if commits is None:
        raise ShapeError("the proof has no commitments section")
    check_commitments(commits, params, [sh.log_n for sh in shapes],
                      [sh.aux_cols > 0 for sh in shapes])


def _check_fri_shape(fri: FriProof, params: Params, heights: list) -> None:
    """The FRI section's shapes that follow from the parameters and the table heights:
    the layer count r, each layer's cap (its tree has 2^(h_i - log a_i) leaves), the fold
    nonces and the final polynomial's length L = 2^(h_final - log_blowup)."""
    if fri is None:
        raise ShapeError("the proof has no FRI section")
    r = len(heights) - 1
    a = lambda arr: tuple(np.shape(arr))  # noqa: E731
    expect(len(fri.caps) == r, "FRI layer count", None, len(fri.caps), r)
    expect(len(fri.values) == r and len(fri.nodes) == r, "FRI layer openings", None,
            (len(fri.values), len(fri.nodes)), (r, r))
    expect(a(fri.fold_nonces) == (r,), "fold_nonces shape", None, a(fri.fold_nonces), (r,))
    for i in range(r):
        leaves_log = heights[i + 1]           # 2^(h_i - k_i) leaves, k_i = h_i - h_(i+1)
        caps = 1 << merkle.cap_height(leaves_log, params.log_cap)
        expect(a(fri.caps[i]) == (caps, 8), f"fri_cap[{i}] shape", None, a(fri.caps[i]),
                (caps, 8))
        expect(len(a(fri.values[i])) == 2 and a(fri.values[i])[1] == 4,
                f"fri values[{i}] shape", None, a(fri.values[i]), "(v, 4)")
        expect(len(a(fri.nodes[i])) == 2 and a(fri.nodes[i])[1] == 8,
                f"fri nodes[{i}] shape", None, a(fri.nodes[i]), "(m, 8)")
    L = 1 << (heights[-1] - params.log_blowup)
    expect(a(fri.final_poly) == (L, 4), "final_poly shape", None, a(fri.final_poly), (L, 4))


def check_shapes(proof: Proof, airs: Sequence) -> list[TableShape]:
    """Shape-check the whole proof against the AIRs and parameters (no hashing)."""
    if len(proof.tables) != len(airs):
        raise ShapeError(f"proof has {len(proof.tables)} tables, the statement {len(airs)}")
    shapes = []
    for air, tp in zip(airs, proof.tables):
        try:
            sh = table_shape(air, tp.log_n, proof.params)
        except (ValueError, AirError) as e:
            raise ShapeError(str(e), air.name) from None
        check_table_shape(tp, sh, proof.params)
        shapes.append(sh)
    check_commitments_shape(proof.commits, shapes, proof.params)
    _check_fri_shape(proof.fri, proof.params, fri_layer_heights(proof.params,
                                                                [sh.log_n for sh in shapes]))
    return shapes


__all__ = ["check_shapes", "check_table_shape", "check_commitments_shape", "expect"]
