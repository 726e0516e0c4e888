"""Protocol definitions shared by the prover and the verifier (pure, numpy only):
table shapes derived from (AIR, height, parameters), the statement part of the
transcript, and the DEEP opening order.  See docs/protocol.md for the full protocol."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .proof_format import FORMAT_VERSION, Params
from .transcript import Transcript

SHIFT = 31                 # the coset shift g (LDE and quotient domains are g<w>)
MAX_LOG_N = 24             # tables up to 2^24 rows (LDE <= 2^(24+8) is refused below)
TWO_ADICITY = 27


def ceil_log2(x: int) -> int:
    return max(0, (int(x) - 1).bit_length())


@dataclass(frozen=True)
class TableShape:
    """Everything about one table's proof section that follows from the AIR, the
    table height and the parameters."""
    name: str
    log_n: int
    log_blowup: int
    main_width: int
    prep_width: int
    aux_cols: int          # EF columns of the LogUp trace (0: no interactions)
    num_parts: int
    num_public: int
    uses_next_main: bool
    uses_next_prep: bool

    @property
    def n(self) -> int:
        return 1 << self.log_n

    @property
    def log_lde(self) -> int:
        return self.log_n + self.log_blowup

    @property
    def log_quotient(self) -> int:
        """Quotient domain g<w_M>, M = n * 2^ceil(log2(num_parts))."""
        return self.log_n + ceil_log2(self.num_parts)

    @property
    def aux_width(self) -> int:
        """Committed base columns of the aux trace (4 per EF column)."""
        return 4 * self.aux_cols

    @property
    def parts_width(self) -> int:
        return 4 * self.num_parts

    def statement(self) -> list[int]:
        return [self.log_n, self.main_width, self.prep_width, self.aux_cols, self.num_parts,
                self.num_public, int(self.uses_next_main), int(self.uses_next_prep)]


def table_shape(air, log_n: int, params: Params) -> TableShape:
    """Shape of a table; raises ValueError for unsupported heights or degrees."""
    if not 1 <= log_n <= MAX_LOG_N or log_n + params.log_blowup > TWO_ADICITY:
        raise ValueError(f"{air.name}: height 2^{log_n} is not supported with log_blowup "
                         f"{params.log_blowup}")
    air.check_parts(params.log_blowup)
    if air.fixed_height is not None and air.fixed_height != 1 << log_n:
        raise ValueError(f"{air.name}: height 2^{log_n} differs from the preprocessed "
                         f"height {air.fixed_height}")
    return TableShape(air.name, log_n, params.log_blowup, air.main_width, air.prep_width,
                      air.aux_width, air.num_parts, air.num_public, air.uses_next_main,
                      air.uses_next_prep)


def absorb_statement(tr: Transcript, params: Params, airs: Sequence, shapes: Sequence[TableShape],
                     public_values: Sequence[Sequence[int]]) -> None:
    """Transcript step 1: parameters, then per table its shape, AIR fingerprint and
    public values (everything the verifier relies on, before any challenge)."""
    tr.absorb("params", [FORMAT_VERSION, params.log_blowup, params.num_queries,
                         params.pow_bits, params.log_final_poly_len, params.logup_pow_bits,
                         params.deep_pow_bits, params.commit_pow_bits, params.log_fri_arity,
                         params.log_cap])
    tr.absorb("num_tables", [len(shapes)])
    for i, (air, shape, pv) in enumerate(zip(airs, shapes, public_values)):
        tr.absorb("table", [i] + shape.statement() + list(air.fingerprint()))
        tr.absorb("public_values", [int(v) for v in pv])


def deep_groups(shape: TableShape) -> list[tuple[str, bool]]:
    """The DEEP opening order: (matrix, at_next_point) groups; within a group the
    columns in order.  lambda^k goes to the k-th opened column of this list."""
    groups = [("main", False)]
    if shape.uses_next_main:
        groups.append(("main", True))
    if shape.aux_cols:
        groups += [("aux", False), ("aux", True)]
    groups.append(("parts", False))
    return groups


def fri_layer_heights(params: Params, log_ns: Sequence[int]) -> list[int]:
    """The one FRI's layer heights [h_0, ..., h_r] (docs/protocol.md, the join): h_0 =
    the largest table LDE height, h_r = h_final = min(log_final_poly_len, min log_n) +
    log_blowup; h_(i+1) = max(h_i - log_fri_arity, the largest table height below h_i (if
    any), h_final).  Layer i (0 <= i < r) folds by a_i = 2^(h_i - h_(i+1)); r = 0 when
    every table has height h_final.  The verifier computes this from the proof's table
    heights and parameters alone."""
    hts = sorted({int(ln) + params.log_blowup for ln in log_ns}, reverse=True)
    if not hts:
        raise ValueError("no tables")
    h_final = min(params.log_final_poly_len, min(int(ln) for ln in log_ns)) + params.log_blowup
    out = [hts[0]]
    while out[-1] > h_final:
        h = out[-1]
        below = [t for t in hts if t < h]
        out.append(max(h - params.log_fri_arity, below[0] if below else h_final, h_final))
    return out


def johnson_queries(log_blowup: int, target_bits: float, pow_bits: int = 0,
                    eta: float = 2.0 ** -5) -> int:
    """Queries a provable (Johnson-bound) estimate needs for ``target_bits`` of query-phase
    security: each query errs with probability ~ sqrt(rho) + eta, rho = 2^-log_blowup.
    (Field-size terms are separate; see docs/protocol.md §7.)"""
    import math
    per_query = -math.log2(math.sqrt(2.0 ** -log_blowup) + eta)
    return max(0, math.ceil((target_bits - pow_bits) / per_query))
