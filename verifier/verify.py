"""The verifier: parse and shape-check, replay the transcript, then check per table the
composition at z, proof-of-work, every Merkle path, DEEP and FRI; finally the LogUp
terminals.  Mirrors the prover's rounds step for step (docs/protocol.md)."""
from __future__ import annotations

import operator
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from air import CHALLENGE_NAMES, check_buses, numerator_at_point, point_leaf
from air.builder import AirError

from . import merkle
from .errors import (CompositionError, FriError, LogUpError, MerkleError, ParameterError,
                     PowError, PublicValuesError, ShapeError)
from .field import (F, P, bitrev, ef_basis_combine, ef_col, barycentric_at, inv2,
                    pow_scalar_arr)
from .proof_format import Params, Proof, TableProof, decode
from .protocol import SHIFT, TableShape, absorb_statement, deep_groups, table_shape
from .transcript import Transcript


@dataclass
class VerifyResult:
    """What a successful verification returns."""
    public_values: list
    logs: list = field(default_factory=list)       # [main log, table 0 log, ...]
    seconds: float = 0.0


def _expect(cond: bool, what: str, table: str, got, expected) -> None:
    if not cond:
        raise ShapeError(f"{what}: got {got}, expected {expected}", table)


def _check_table_shape(tp: TableProof, sh: TableShape, q: int) -> None:
    name = sh.name
    a = lambda arr: tuple(arr.shape)  # noqa: E731
    _expect(a(tp.public_values) == (sh.num_public,), "public_values shape", name,
            a(tp.public_values), (sh.num_public,))
    _expect(a(tp.main_root) == (8,), "main_root shape", name, a(tp.main_root), (8,))
    has_aux = sh.aux_cols > 0
    _expect(a(tp.aux_root) == ((8,) if has_aux else (0,)), "aux_root shape", name,
            a(tp.aux_root), (8,) if has_aux else (0,))
    _expect(a(tp.terminal) == ((4,) if has_aux else (0,)), "terminal shape", name,
            a(tp.terminal), (4,) if has_aux else (0,))
    _expect(a(tp.parts_root) == (8,), "parts_root shape", name, a(tp.parts_root), (8,))
    w, aw, pw = sh.main_width, sh.aux_width, sh.parts_width
    wn = w if sh.uses_next_main else 0
    for nm, shape in (("ood_main", (w, 4)), ("ood_main_next", (wn, 4)),
                      ("ood_aux", (aw, 4)), ("ood_aux_next", (aw, 4)),
                      ("ood_parts", (pw, 4)), ("fri_roots", (sh.num_fri_layers, 8)),
                      ("final_poly", (sh.final_poly_len, 4)),
                      ("main_rows", (q, w)), ("main_paths", (q, sh.log_lde, 8)),
                      ("parts_rows", (q, pw)), ("parts_paths", (q, sh.log_lde, 8))):
        _expect(a(getattr(tp, nm)) == shape, f"{nm} shape", name, a(getattr(tp, nm)), shape)
    aux_rows = (q, aw) if has_aux else (0, 0)
    aux_paths = (q, sh.log_lde, 8) if has_aux else (0, 0, 8)
    _expect(a(tp.aux_rows) == aux_rows, "aux_rows shape", name, a(tp.aux_rows), aux_rows)
    _expect(a(tp.aux_paths) == aux_paths, "aux_paths shape", name, a(tp.aux_paths), aux_paths)
    _expect(len(tp.fri_leaves) == sh.num_fri_layers, "FRI layer count", name,
            len(tp.fri_leaves), sh.num_fri_layers)
    for i, (lv, pth) in enumerate(zip(tp.fri_leaves, tp.fri_paths)):
        depth = sh.log_lde - 1 - i
        _expect(a(lv) == (q, 8), f"fri_leaves[{i}] shape", name, a(lv), (q, 8))
        _expect(a(pth) == (q, depth, 8), f"fri_paths[{i}] shape", name, a(pth), (q, depth, 8))


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
        _check_table_shape(tp, sh, proof.params.num_queries)
        shapes.append(sh)
    return shapes


def _ef_eq(a, b) -> bool:
    return bool(np.array_equal(np.asarray(a, np.uint64).reshape(4, -1),
                               np.asarray(b, np.uint64).reshape(4, -1)))


def _combine_ef_columns(vals: np.ndarray) -> np.ndarray:
    """(4a, 4) opened coefficient columns -> (a, 4) EF column values (proof layout)."""
    a = vals.shape[0] // 4
    out = np.empty((a, 4), dtype=np.uint64)
    for k in range(a):
        out[k] = ef_basis_combine([ef_col(vals[4 * k + c]).reshape(4, 1)
                                   for c in range(4)]).reshape(4)
    return out


def _composition(air, sh: TableShape, tp: TableProof, pv, chal, alpha, z) -> None:
    zf = ef_col(z).reshape(4, 1)
    omega = F.root_of_unity(sh.log_n)
    z_next = F.ef_mul_base(zf, omega)
    opened = {("main", False): tp.ood_main, ("main", True): tp.ood_main_next}
    if sh.prep_width:
        opened[("prep", False)] = barycentric_at(air.preprocessed, zf, sh.log_n)
        if sh.uses_next_prep:
            opened[("prep", True)] = barycentric_at(air.preprocessed, z_next, sh.log_n)
    if sh.aux_cols:
        opened[("aux", False)] = _combine_ef_columns(tp.ood_aux)
        opened[("aux", True)] = _combine_ef_columns(tp.ood_aux_next)
    term = tp.terminal if sh.aux_cols else np.zeros(4, np.uint32)
    leaf = point_leaf(opened, [int(v) for v in pv], chal, term)
    num, zh = numerator_at_point(air, leaf, ef_col(alpha), zf, sh.log_n)
    if F.is_zero_ef(zh).all():
        raise CompositionError("out-of-domain point lies in the trace domain", sh.name)
    # Q(z) = sum_i z^(i n) q_i(z), q_i from its 4 coefficient columns
    zn = F.ef_pow(zf, sh.n)
    qz = np.zeros((4, 1), dtype=np.uint64)
    zpow = F.ef_from_base(np.ones(1, np.uint64))
    parts = _combine_ef_columns(tp.ood_parts)
    for i in range(sh.num_parts):
        qz = F.ef_add(qz, F.ef_mul(zpow, ef_col(parts[i]).reshape(4, 1)))
        zpow = F.ef_mul(zpow, zn)
    if not _ef_eq(num, F.ef_mul(zh, qz)):
        raise CompositionError("constraints at z do not match the quotient parts", sh.name)


def _deep_at_queries(sh: TableShape, tp: TableProof, rows: dict, x, z, lam) -> np.ndarray:
    """DEEP quotient at the queried points x (base, (q,)): (4, q) EF values."""
    zf = ef_col(z).reshape(4, 1)
    points = {False: zf, True: F.ef_mul_base(zf, F.root_of_unity(sh.log_n))}
    ood = {("main", False): tp.ood_main, ("main", True): tp.ood_main_next,
           ("aux", False): tp.ood_aux, ("aux", True): tp.ood_aux_next,
           ("parts", False): tp.ood_parts}
    lamf = ef_col(lam).reshape(4, 1)
    total = np.zeros((4, x.shape[0]), dtype=np.uint64)
    k = 0
    for mat, nxt in deep_groups(sh):
        vals = rows[mat]                                   # (q, c) base
        c = vals.shape[1]
        lp = F.ef_mul(F.ef_powers(lamf, c), F.ef_pow(lamf, k))      # (4, c)
        k += c
        # sum_j lam^j f_j(x): per coefficient a dot product of reduced products
        comb = (np.asarray(vals, np.uint64)[None, :, :] * lp[:, None, :]) % np.uint64(P)
        comb = comb.sum(axis=2) % np.uint64(P)                   # (4, q)
        # minus sum_j lam^j v_j
        v = ef_col(ood[(mat, nxt)])                              # (4, c)
        cst = F.ef_mul(lp, v).sum(axis=1, keepdims=True) % np.uint64(P)
        num = F.ef_sub(comb, cst)
        den = F.ef_sub(F.ef_from_base(x), points[nxt])           # x - zeta, (4, q)
        total = F.ef_add(total, F.ef_mul(num, F.ef_inv(den)))
    return total


def _fri(sh: TableShape, tp: TableProof, queries, x, values, betas) -> None:
    """Check every FRI layer: the opened pair holds the current value, authenticate it,
    fold; finally compare with the final polynomial."""
    name = sh.name
    s = queries.copy()
    inv_x = F.inv(x)
    for i in range(sh.num_fri_layers):
        leaves = tp.fri_leaves[i]                          # (q, 8): e0 | e1
        pair = s >> 1
        odd = (s & 1).astype(bool)
        mine = np.where(odd[None, :], leaves[:, 4:].T, leaves[:, :4].T).astype(np.uint64)
        if not np.array_equal(mine, values):
            bad = int(np.nonzero(np.any(mine != values, axis=0))[0][0])
            raise FriError(f"layer {i}: opened value differs from the folded value "
                           f"(query {bad})", name)
        ok = merkle.check_rows(tp.fri_roots[i], leaves, pair, tp.fri_paths[i])
        if not ok.all():
            raise MerkleError(f"FRI layer {i}: path of query {int(np.argmin(ok))} does not "
                              "authenticate", name)
        e0 = leaves[:, :4].T.astype(np.uint64)
        e1 = leaves[:, 4:].T.astype(np.uint64)
        # x_even = x if s is even else -x  (the pair is (x_even, -x_even))
        inv_xe = np.where(odd, F.neg(inv_x), inv_x)
        half_sum = F.ef_mul_base(F.ef_add(e0, e1), inv2)
        half_diff = F.ef_mul_base(F.ef_sub(e0, e1), F.mul(inv_xe, inv2))
        values = F.ef_add(half_sum, F.ef_mul(ef_col(betas[i]).reshape(4, 1), half_diff))
        x = F.mul(x, x)
        inv_x = F.mul(inv_x, inv_x)
        s = pair
    # final polynomial, Horner at x
    coeffs = ef_col(tp.final_poly)                          # (4, L)
    acc = np.zeros_like(values)
    for j in range(coeffs.shape[1] - 1, -1, -1):
        acc = F.ef_add(F.ef_mul_base(acc, x), coeffs[:, j:j + 1])
    if not np.array_equal(acc, values):
        raise FriError("final polynomial disagrees with the folded values", name)


def _verify_table(tr: Transcript, air, sh: TableShape, tp: TableProof, params, chal,
                  composition: bool = True) -> None:
    """One table's checks on its transcript fork.  ``composition=False`` leaves out the
    composition at z: only for the prover's XCHECK (prover/xcheck.py check_section), which
    ran that same check on the same opened values after R3; :func:`verify` always checks
    it."""
    name = sh.name
    pv = tp.public_values
    # ---- R1 (fork): aux commitment and claimed LogUp terminal
    if sh.aux_cols:
        tr.absorb("aux_root", tp.aux_root)
        tr.absorb("logup_terminal", tp.terminal)
    # ---- R2: alpha, quotient parts
    alpha = tr.sample_ef("alpha")
    tr.absorb("parts_root", tp.parts_root)
    # ---- R3: z and the opened values
    z = tr.sample_ef("zeta")
    tr.absorb("ood_main", tp.ood_main)
    if sh.uses_next_main:
        tr.absorb("ood_main_next", tp.ood_main_next)
    if sh.aux_cols:
        tr.absorb("ood_aux", tp.ood_aux)
        tr.absorb("ood_aux_next", tp.ood_aux_next)
    tr.absorb("ood_parts", tp.ood_parts)
    if composition:
        _composition(air, sh, tp, pv, chal, alpha, z)
    # ---- R4: DEEP, FRI commitments, final polynomial, proof of work, queries
    lam = tr.sample_ef("deep_lambda")
    betas = []
    for i in range(sh.num_fri_layers):
        tr.absorb("fri_root", tp.fri_roots[i])
        betas.append(tr.sample_ef("fri_beta"))
    tr.absorb("fri_final", tp.final_poly)
    if not tr.check_pow("pow", tp.pow_nonce, params.pow_bits):
        raise PowError(f"nonce {tp.pow_nonce} does not give {params.pow_bits} zero bits", name)
    queries = tr.sample_bits("queries", sh.log_lde, params.num_queries)
    # trace openings
    rows = {"main": tp.main_rows, "parts": tp.parts_rows}
    checks = [("main", tp.main_root, tp.main_rows, tp.main_paths),
              ("parts", tp.parts_root, tp.parts_rows, tp.parts_paths)]
    if sh.aux_cols:
        rows["aux"] = tp.aux_rows
        checks.insert(1, ("aux", tp.aux_root, tp.aux_rows, tp.aux_paths))
    for what, root, r, paths in checks:
        ok = merkle.check_rows(root, r, queries, paths)
        if not ok.all():
            raise MerkleError(f"{what} opening of query {int(np.argmin(ok))} does not "
                              "authenticate", name)
    # x_s = g * w_N^bitrev(s)
    x = F.mul(pow_scalar_arr(F.root_of_unity(sh.log_lde), bitrev(queries, sh.log_lde)), SHIFT)
    values = _deep_at_queries(sh, tp, rows, x, z, lam)
    _fri(sh, tp, queries, x, values, betas)


def validate_min_security_bits(value) -> int | None:
    """Validate a ``min_security_bits`` argument: None, or an integer >= 0."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError("min_security_bits must be an int or None, not bool")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"min_security_bits must be an int or None, not "
                        f"{type(value).__name__}") from None
    if value < 0:
        raise ValueError(f"min_security_bits must be >= 0, got {value}")
    return value


def check_security(params: Params, min_security_bits: int | None) -> int:
    """Refuse proofs whose parameters are too weak: raise :class:`ParameterError` when the
    conjectured security of ``params`` (log_blowup * num_queries + pow_bits,
    docs/protocol.md section 7) is below ``min_security_bits``; ``None`` sets no minimum.
    Returns the conjectured bits.  Costs nothing: run it before any hashing, so that a
    cheap weak proof is turned away before the verifier spends work on it."""
    min_security_bits = validate_min_security_bits(min_security_bits)
    bits = params.conjectured_bits()
    if min_security_bits is not None and bits < min_security_bits:
        raise ParameterError(
            f"proof parameters (log_blowup {params.log_blowup}, {params.num_queries} queries, "
            f"{params.pow_bits} proof-of-work bits) give {bits} conjectured security bits, "
            f"below the required {min_security_bits}", bits=bits, required=min_security_bits)
    return bits


def verify(proof_bytes: bytes, airs: Sequence, public_values: Sequence | None = None,
           *, min_security_bits: int | None = None) -> VerifyResult:
    """Verify a proof for the tables ``airs`` (in table order).

    ``min_security_bits``: refuse (:class:`ParameterError`) a proof whose parameters give
    fewer conjectured security bits (:func:`check_security`), checked right after parsing
    and before any hashing.  ``None`` (the default) sets no minimum: the proof's own
    parameters are accepted (tests use weak parameters on purpose).

    ``public_values``: the expected public values per table (None: accept those in the
    proof and return them).  Raises a :class:`verifier.errors.VerificationError`
    subclass on rejection; returns a :class:`VerifyResult` on success.
    """
    t0 = time.perf_counter()
    min_security_bits = validate_min_security_bits(min_security_bits)   # before the proof
    airs = list(airs)
    proof = decode(proof_bytes)
    check_security(proof.params, min_security_bits)
    shapes = check_shapes(proof, airs)
    try:
        check_buses(airs)
    except AirError as e:
        raise ShapeError(str(e)) from None
    pvs = [[int(v) for v in tp.public_values] for tp in proof.tables]
    if public_values is not None:
        if len(public_values) != len(airs):
            raise PublicValuesError(f"{len(public_values)} public-value lists for {len(airs)} tables")
        for air, got, exp in zip(airs, pvs, public_values):
            exp = [int(v) for v in (exp or ())]
            if got != exp:
                raise PublicValuesError(f"proof has {got}, statement {exp}", air.name)
    tr = Transcript()
    absorb_statement(tr, proof.params, airs, shapes, pvs)
    for tp in proof.tables:
        tr.absorb("main_root", tp.main_root)
    chal = {CHALLENGE_NAMES[0]: ef_col(tr.sample_ef("logup_beta")),
            CHALLENGE_NAMES[1]: ef_col(tr.sample_ef("logup_gamma"))}
    logs = [tr.log]
    for i, (air, sh, tp) in enumerate(zip(airs, shapes, proof.tables)):
        fork = tr.fork(i)
        _verify_table(fork, air, sh, tp, proof.params, chal)
        logs.append(fork.log)
    # LogUp: the terminals of all tables must cancel
    total = np.zeros((4, 1), dtype=np.uint64)
    for sh, tp in zip(shapes, proof.tables):
        if sh.aux_cols:
            total = F.ef_add(total, ef_col(tp.terminal).reshape(4, 1))
    if np.any(total):
        raise LogUpError("the LogUp terminal sums of the tables do not add up to zero")
    return VerifyResult(public_values=pvs, logs=logs, seconds=time.perf_counter() - t0)
