"""The per-table heavy work of the prover, one method per stage: :class:`HostStages`.

The round driver (:mod:`prover.core.rounds`) is backend-agnostic: it calls these methods per
table and owns the transcript.  A device backend replaces this class (same methods, its
own resident handles inside :class:`Committed`); every method takes and returns plain
numpy arrays or small records for ONE table and touches nothing else, so tables can run
concurrently after their transcript fork.

Domain conventions (docs/protocol.md):
* trace domain H = <w_n>, row i <-> w_n^i;
* LDE domain g<w_N>, N = n 2^log_blowup, g = 31; ``Committed.lde`` holds it in natural
  order (column-major, (c, N)), the Merkle tree commits its rows in **bit-reversed**
  order: tree row s is the point g w_N^bitrev(s), so x and -x are siblings (2j, 2j+1);
* quotient domain g<w_M>, M = n 2^ceil(log2 num_parts), a sub-coset of the LDE domain
  (every (N/M)-th point in natural order).
"""
from __future__ import annotations

import dataclasses
import threading

import numpy as np

from ... import air as airlib
from ...air import field as F
from ...kernels import multiproof as mp
from ...kernels import fri_host, open_rows
from ...kernels.lde_rows import gather_rows
from ...kernels.hostlib import ef_inverse, ef_powers
from ...kernels.poseidon2 import grind_search, poseidon2_permute
from ...kernels.ntt_host import (bit_reverse_permutation, coset_intt, intt, transpose,
                                 lde_columns, lde_from_coeffs)
from ...verifier.protocol import SHIFT, TableShape

from . import commit as merkle
from .scratch import HoldBudget, Scratch
from .hostops import combine_rows, deep_sum, divide_linear, eval_columns
from .ldetree import (PRUNE_LEVELS, _COMMIT_CHUNK, _bitrev_index, _bitrev_rows,  # noqa: F401
                      _LdeTree)


class _LdeSource:
    """An LDE held only while rounds read it: ``get()`` returns it, recomputing it from
    the coefficients after :meth:`release` (the same values: one polynomial, one
    evaluation domain); ``get(keep=False)`` does not hold the recomputed copy."""

    def __init__(self, lde: np.ndarray | None, coeffs: np.ndarray | None):
        self.lde = lde
        self.coeffs = coeffs
        self.log_blowup = (None if lde is None or coeffs is None or not coeffs.shape[-1]
                           else (lde.shape[-1] // coeffs.shape[-1]).bit_length() - 1)

    def get(self, keep: bool = True) -> np.ndarray:
        lde = self.lde
        if lde is None:
            lde = lde_of_coeffs(self._coeffs(), self.log_blowup)
            if keep:
                self.lde = lde
        return lde

    def on(self, log_blowup: int, out: np.ndarray | None = None,
           scratch: Scratch | None = None) -> np.ndarray:
        """The evaluations on the sub-coset g<w_(n 2^log_blowup)> of the LDE domain (every
        2^(K - log_blowup)-th point of the natural-order LDE, K = this LDE's blowup): a
        strided copy of the held LDE, else computed from the coefficients at that blowup
        alone (not kept; into ``out`` when given, uint32[c, n 2^log_blowup]; its work
        buffer from ``scratch`` when given)."""
        k = int(log_blowup)
        if self.lde is not None:
            if self.log_blowup is None or not 0 <= k <= self.log_blowup:
                raise ValueError(f"no sub-coset of blowup 2^{k} in this LDE")
            stride = 1 << (self.log_blowup - k)
            return self.lde if stride == 1 else np.ascontiguousarray(self.lde[:, ::stride])
        return lde_of_coeffs(self._coeffs(), k, out, scratch)

    def group_rows(self, groups, log_group: int) -> np.ndarray:
        """The committed rows (tree order) of tree groups ``groups`` (group j: tree
        positions 2^log_group j ..) of the released LDE: uint32[len(groups),
        2^log_group, c], evaluated from the coefficients on those cosets alone
        (kernels/open_rows.py: ~(log2 groups + 2) N products a column instead of an LDE)."""
        return open_rows.group_rows(self._coeffs(), self.log_blowup, SHIFT, groups, log_group)

    def _coeffs(self) -> np.ndarray:
        if self.log_blowup is None:
            raise ValueError("this committed matrix's LDE was released and cannot be "
                             "recomputed (no coefficients)")
        return self.coeffs


def lde_of_coeffs(coeffs: np.ndarray, log_blowup: int, out: np.ndarray | None = None,
                  scratch: Scratch | None = None) -> np.ndarray:
    """uint32[c, n] coefficients (degree < n) -> their values on g<w_(n 2^log_blowup)>,
    natural order, uint32[c, n 2^log_blowup] (into ``out`` when given; the transform's
    uint32[c, n] work buffer lent by ``scratch`` when given)."""
    work = None if scratch is None else scratch.take(coeffs.shape)
    try:
        return lde_from_coeffs(coeffs, log_blowup, SHIFT, out=out, work=work)
    finally:
        if scratch is not None:
            scratch.give(work)


class Committed:
    """A committed matrix of polynomials (one table, one tree).

    ``lde`` (uint32[c, N], evaluations on g<w_N>, natural order) is held only between
    the rounds that read it: :meth:`release` drops it and the next read of ``lde``
    recomputes it from ``coeffs`` -- on the host the LDEs are a proof's largest buffers
    (issue #12), so each is released after its last reader of a round, unless
    :class:`HostStages`' hold budget :attr:`pinned` it for the whole proof."""

    def __init__(self, lde: np.ndarray | None, coeffs: np.ndarray | None, tree, root):
        self._src = _LdeSource(lde, coeffs)
        self.coeffs = coeffs   # uint32[c, n]: coefficients (degree < n), for OOD openings
        self.tree = tree       # .root, opened by HostStages.open_batch (bit-reversed rows)
        self.root = root       # uint32[8]
        # uint32[N, 8]: the leaf digests (tree order) until the round's mixed-height
        # commitment takes them (HostStages.leaf_digests)
        self.leaves = None
        # held from its commit to the proof's end (HostStages' hold budget): release()
        # keeps it, the openings read its rows
        self.pinned = False

    @property
    def lde(self) -> np.ndarray:
        return self._src.get(keep=True)

    @property
    def holds_lde(self) -> bool:
        return self._src.lde is not None

    def lde_on(self, log_blowup: int, out: np.ndarray | None = None,
               scratch: Scratch | None = None) -> np.ndarray:
        """The LDE's values on its sub-coset of blowup 2^log_blowup (R2 reads the quotient
        domain only): see :meth:`_LdeSource.on`; nothing is kept."""
        return self._src.on(log_blowup, out, scratch)

    @classmethod
    def commit(cls, lde: np.ndarray, coeffs: np.ndarray, levels: bool = True) -> "Committed":
        """Commit the LDE ``lde`` of the polynomials ``coeffs`` (its tree opens rows from
        this object's LDE source, so it follows :meth:`release`).  ``levels=False``: its
        leaf digests only (no tree of its own, ``root`` None) -- all a format-6 proof
        needs; the table's own root is what XCHECK's and the cluster's recomputations
        compare, so only their stages build it."""
        com = cls(lde, coeffs, None, None)
        com.leaves = np.empty((lde.shape[1], 8), np.uint32)
        com.tree = _LdeTree.commit(lde, com._src, leaves_out=com.leaves, levels=levels)
        com.root = np.asarray(com.tree.root, dtype=np.uint32) if levels else None
        return com

    def release(self, scratch: Scratch | None = None) -> None:
        """Drop the LDE (recomputed from the coefficients if read again); ``scratch``: give
        its buffer back there, when that :class:`Scratch` lent it -- only where nothing
        else holds the LDE (the stage that computed it, right after its commit).  A
        :attr:`pinned` LDE is kept: the budget that held it counted it until the end."""
        if self.pinned:
            return
        lde, self._src.lde = self._src.lde, None
        if scratch is not None:
            scratch.give(lde)


def logup_accumulator(rowsum: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The LogUp accumulator for the row sums r_i (EF, uint64[4, n], canonical):
    U = (sum_i r_i) / n and acc[i] = sum_(j<i) r_j - i U, so acc[0] = 0 and
    acc[i+1] - acc[i] = r_i - U on every row, cyclically (acc[n] = acc[0]).  Returns
    (acc uint64[4, n], U uint32[4])."""
    n = rowsum.shape[1]
    p = np.uint64(F.P)
    incl = np.cumsum(rowsum, axis=1) % p                # < n 2^31: no wrap for n < 2^33
    total = incl[:, n - 1:n]
    u = F.ef_mul_base(total, np.uint64(pow(n, F.P - 2, F.P)))        # (4, 1)
    excl = np.zeros_like(incl)
    excl[:, 1:] = incl[:, :-1]
    acc = F.ef_sub(excl, F.ef_mul_base(u, np.arange(n, dtype=np.uint64)))
    return acc, u.reshape(4).astype(np.uint32)


def _add_into(acc: dict, key, part: np.ndarray) -> None:
    """acc[key] += part (canonical uint32 EF rows; both < p < 2^31: no uint32 overflow)."""
    if acc[key] is None:
        acc[key] = part
        return
    a = acc[key]
    a += part
    np.subtract(a, np.uint32(F.P), out=a, where=a >= np.uint32(F.P))


def _ef_T(a) -> np.ndarray:
    """(N, 4) uint32 rows -> (4, N) uint64 for air.field arithmetic."""
    return np.ascontiguousarray(np.asarray(a, dtype=np.uint64).T)


class HostStages:
    """Reference (numpy + numba) implementation of every per-table stage."""

    name = "host"

    def __init__(self, table_roots: bool = True, hold_bytes: int = 0,
                 hold_pool: "HoldBudget | None" = None) -> None:
        self._selector_cache: dict = {}
        # build each committed matrix's own Merkle tree (its root, its cap) as well as its
        # leaf digests: a format-6 proof needs only the leaves (the mixed trees); XCHECK's
        # recomputation, the device pipeline and the cluster compare tables' own roots
        self.table_roots = bool(table_roots)
        # the buffers of this object's short-lived LDEs, and of their transforms' work
        # (a pool of its own: a quarter of the size), prover/core/scratch.py
        self.scratch = Scratch()
        self.work = Scratch()
        # Host LDEs held within a budget (docs/design.md): a committed matrix whose LDE
        # fits in what is left of ``hold_bytes`` keeps it (its own buffer, not lent) from
        # its commit to the end of the proof -- R2 reads it on the quotient domain and the
        # openings gather its rows, instead of both recomputing them from the coefficients;
        # the rest are released after their round, as with 0 (the smallest footprint).
        # First come, first held: the main LDEs in table order, then the aux, then the
        # parts.  The same values either way (one polynomial, one domain).  ``hold_pool``:
        # a budget shared with other stages objects (a cluster worker's tables), which
        # :meth:`give_back` returns this object's holdings to; else one of its own.
        self.hold_pool = hold_pool if hold_pool is not None else HoldBudget(hold_bytes)
        self.held = {"budget_bytes": self.hold_pool.budget, "held_bytes": 0,
                     "held_matrices": 0}
        self._hold_lock = threading.Lock()

    def give_back(self) -> None:
        """Return what this object holds to its budget, once nothing will read its pinned
        LDEs again (a cluster worker dropping a table's state: the buffers go with it)."""
        with self._hold_lock:
            h = self.held
            nbytes, h["held_bytes"], h["held_matrices"] = h["held_bytes"], 0, 0
        self.hold_pool.give(nbytes)

    def plan_buffers(self, shapes) -> None:
        """Tell the pools the largest requests of a proof of these table shapes (the rounds
        call it first): an LDE (main, aux or parts, at most c x 2^log_lde) as the first
        concurrent loan, R2's aux on the quotient domain as the second (lent beside its
        main), a transform's work buffer (c x n).  A miss then allocates that size, once,
        instead of one new buffer for every larger table (prover/core/scratch.py)."""
        cols = [(max(s.main_width, s.aux_width, 4 * s.num_parts), s) for s in shapes]
        if not cols:
            return
        self.scratch.reserve([max(c << s.log_lde for c, s in cols),
                              max(s.aux_width << s.log_lde for _, s in cols)])
        self.work.reserve([max(c << s.log_n for c, s in cols)])

    def clear_scratch(self) -> None:
        """Drop both pools' free buffers (the rounds call it once R2 is over)."""
        self.scratch.clear()
        self.work.clear()

    # ------------------------------------------------------------------ R1
    def main_commit(self, main: np.ndarray, shape: TableShape) -> Committed:
        """LDE the main trace (uint32[n, w]) onto g<w_N> and commit it.  The LDE is
        released at once unless the hold budget pins it: R1 commits every table before
        any table's chain reads its LDE (R2), so holding them all would keep every table's
        main LDE alive together -- the budget bounds how many are (see __init__)."""
        com = self._commit_columns(transpose(main), shape, lend=True)
        com.release(self.scratch)
        return com

    def _hold(self, nbytes: int) -> bool:
        """Take ``nbytes`` from the hold budget if they fit (see __init__)."""
        with self._hold_lock:
            if not self.hold_pool.take(nbytes):
                return False
            self.held["held_bytes"] += nbytes
            self.held["held_matrices"] += 1
            return True

    def prep_lde(self, air, shape: TableShape) -> np.ndarray | None:
        """The preprocessed columns on the LDE domain (not committed: the verifier
        evaluates them from the statement)."""
        if air.preprocessed is None:
            return None
        return lde_columns(np.ascontiguousarray(air.preprocessed.T), shape.log_blowup, SHIFT)

    def aux_build(self, air, shape: TableShape, main: np.ndarray, public_values,
                  challenges: dict) -> tuple[np.ndarray, np.ndarray]:
        """LogUp aux trace on H: uint32[n, 4a] (EF columns h_0.., acc as 4 coefficient
        columns each: h_0 .. h_(B-2), acc) and the terminal U = (LogUp sum) / n
        (uint32[4]); see :func:`logup_accumulator`."""
        n = shape.n
        beta = np.asarray(challenges["logup_beta"], np.uint64).reshape(4, 1)
        gamma = np.asarray(challenges["logup_gamma"], np.uint64).reshape(4, 1)
        # h columns: compiled (kernels/constraint_host.py, bit-identical) unless
        # PROVER_HOST_QUOTIENT=numpy, else the numpy reference loop below
        from ...kernels import constraint_host
        if constraint_host.compiled_quotient_enabled():
            # the h columns (uint32[B, 4, n]), then the row sums, U, acc and the aux rows in
            # one compiled pass (kernels/logup_acc.py: logup_accumulator's values)
            from ...kernels.logup_acc import aux_rows
            return aux_rows(constraint_host.logup_h_host(air, main, public_values, challenges,
                                                         stacked=True))
        rows = airlib.interaction_rows(air, main, public_values)
        it_index = {id(it): k for k, it in enumerate(air.interactions)}
        hs = []
        for batch in air.lookup_batches:
            h = np.zeros((4, n), dtype=np.uint64)
            for it in batch:
                vals, mult = rows[it_index[id(it)]]
                # d = gamma - (bus_id + sum_j beta^(j+1) v_j)
                fp = F.ef_from_base(np.full(n, it.bus_id, dtype=np.uint64))
                bp = beta
                for v in vals:
                    fp = F.ef_add(fp, F.ef_mul_base(bp, v))
                    bp = F.ef_mul(bp, beta)
                d = F.ef_sub(gamma, fp)
                try:
                    dinv = ef_inverse(np.ascontiguousarray(d.T.astype(np.uint32)))
                except ZeroDivisionError:
                    raise ValueError(f"{air.name}: a LogUp denominator vanished (resample: "
                                     "the challenges hit a tuple's fingerprint)") from None
                m = mult if it.sign > 0 else F.neg(mult)
                h = F.ef_add(h, F.ef_mul_base(_ef_T(dinv), m))
            hs.append(h)
        total = hs[0]
        for h in hs[1:]:
            total = F.ef_add(total, h)
        acc, u = logup_accumulator(total)
        cols = hs[:-1] + [acc]                  # the last batch lives in acc's constraint
        aux = np.empty((n, 4 * len(cols)), dtype=np.uint32)
        for k, c in enumerate(cols):
            aux[:, 4 * k:4 * k + 4] = c.T
        return aux, u

    def aux_commit(self, aux: np.ndarray, shape: TableShape) -> Committed:
        """LDE and commit the LogUp columns; the LDE is released at once unless the hold
        budget pins it, as the main trace's: every table commits its aux before any
        table's R2 reads it (proof format 6's barrier), so holding them all would keep
        every table's aux LDE alive together."""
        com = self._commit_columns(transpose(aux), shape, lend=True)
        com.release(self.scratch)
        return com

    def _commit_columns(self, evals_T: np.ndarray, shape: TableShape,
                        lend: bool = False) -> Committed:
        """``lend``: the LDE in a buffer of :attr:`scratch`, which the caller gives back
        with ``release(self.scratch)`` once nothing reads it."""
        coeffs = intt(evals_T)
        del evals_T
        return self._commit_coeffs(coeffs, shape, lend)

    def _commit_coeffs(self, coeffs: np.ndarray, shape: TableShape,
                       lend: bool) -> Committed:
        """LDE ``coeffs`` (uint32[c, n]) and commit them: into a buffer of :attr:`scratch`
        when ``lend`` (the caller releases it to there), unless the hold budget takes it --
        then into a buffer of its own, pinned (kept by ``release``)."""
        ldeshape = (coeffs.shape[0], coeffs.shape[1] << shape.log_blowup)
        pin = lend and self._hold(4 * ldeshape[0] * ldeshape[1])
        out = self.scratch.take(ldeshape) if lend and not pin else None
        lde = lde_of_coeffs(coeffs, shape.log_blowup, out, self.work if lend else None)
        com = Committed.commit(lde, coeffs, self.table_roots)
        com.pinned = pin
        return com

    # ------------------------------------------------------------------ R2
    def _selectors(self, shape: TableShape):
        key = (shape.log_n, shape.log_quotient)
        if key not in self._selector_cache:
            self._selector_cache[key] = airlib.selectors_on_coset(shape.log_n, SHIFT,
                                                                  shape.log_quotient)
        return self._selector_cache[key]

    def quotient(self, air, shape: TableShape, main: Committed, prep_lde, aux: Committed | None,
                 public_values, challenges: dict, alpha, terminal, chunk: int = 1 << 14,
                 compiled: bool | None = None) -> np.ndarray:
        """Q(x) = sum_k alpha^(K-1-k) sel_k(x) C_k(x) / Z_H(x) on the quotient domain
        g<w_M> (natural order); returns EF values as uint32[4, M].  ``compiled`` (default:
        ``PROVER_HOST_QUOTIENT``, compiled unless ``numpy``): the AIR's program run by the
        compiled kernel of kernels/constraint_host.py (bit-identical) instead of the numpy
        interpreter below, which stays the reference."""
        from ...kernels import constraint_host
        if constraint_host.compiled_quotient_enabled() if compiled is None else compiled:
            # the kernel reads the quotient domain g<w_M> only: hand it the LDEs on that
            # sub-coset (a released LDE is evaluated there alone, at blowup M/n instead of
            # N/n), described by a shape whose LDE domain is the quotient domain
            j = shape.log_quotient - shape.log_n
            qshape = dataclasses.replace(shape, log_blowup=j)
            stride = 1 << (shape.log_lde - shape.log_quotient)
            lent = []

            def on(com):
                if com is None:
                    return None
                if isinstance(com, Committed) and not com.holds_lde:
                    # evaluated into a buffer of this object's scratch, given back below
                    # (no coefficients: lde_on says why it cannot)
                    out = None
                    if com.coeffs is not None:
                        c, n = com.coeffs.shape
                        out = self.scratch.take((c, n << j))
                        lent.append(out)
                    return com.lde_on(j, out, self.work)
                full = com.lde if hasattr(com, "lde") else np.asarray(com)
                return full if stride == 1 else np.ascontiguousarray(full[:, ::stride])

            try:
                return constraint_host.quotient_host(
                    air, qshape, on(main), on(prep_lde), on(aux),
                    public_values, challenges, alpha, terminal, SHIFT)
            finally:
                for buf in lent:
                    self.scratch.give(buf)
        M = 1 << shape.log_quotient
        stride = 1 << (shape.log_lde - shape.log_quotient)
        nxt = M >> shape.log_n                              # next trace row = +M/n positions
        sel, inv_zh = self._selectors(shape)
        main_q = main.lde[:, ::stride]
        prep_q = None if prep_lde is None else prep_lde[:, ::stride]
        aux_q = None if aux is None else aux.lde[:, ::stride].reshape(-1, 4, M).transpose(1, 0, 2)
        pv = [int(v) for v in public_values]
        chal = {k: np.asarray(v, np.uint64).reshape(4, 1) for k, v in challenges.items()}
        alpha = np.asarray(alpha, np.uint64).reshape(4, 1)
        term = None if terminal is None else np.asarray(terminal, np.uint64).reshape(4, 1)
        out = np.empty((4, M), dtype=np.uint32)
        for lo in range(0, M, chunk):
            hi = min(M, lo + chunk)
            idx = np.arange(lo, hi)
            nidx = (idx + nxt) % M
            leaf = _chunk_leaf(main_q, prep_q, aux_q, idx, nidx, pv, chal, term)
            ssel = {k: v[lo:hi] for k, v in sel.items()}
            out[:, lo:hi] = airlib.quotient_on_coset(air, leaf, alpha, ssel, inv_zh[lo:hi])
        return out

    def parts_commit(self, q_values: np.ndarray, shape: TableShape) -> Committed:
        """Decompose Q into num_parts polynomials q_i of degree < n with
        Q(X) = sum_i X^(i n) q_i(X), LDE and commit them (4 base columns per part, part
        i's coefficient c at column 4i + c)."""
        n, P_ = shape.n, shape.num_parts
        coeffs = coset_intt(np.ascontiguousarray(q_values), SHIFT)       # (4, M)
        blocks = np.concatenate([coeffs[:, i * n:(i + 1) * n] for i in range(P_)], axis=0)
        del coeffs
        # the parts on g<w_N>: their values on H, extended (the same values as coset_ntt
        # of the zero-padded blocks, without that (4 P, N) copy)
        com = self._commit_coeffs(np.ascontiguousarray(blocks), shape, lend=True)
        # released at once (unless held): R3 and DEEP read the coefficients, and format 6's parts
        # barrier would otherwise hold every table's parts LDE until the deep pass
        com.release(self.scratch)
        return com

    # ------------------------------------------------------------------ R3
    def ood(self, committed: Committed, point) -> np.ndarray:
        """Every committed column's polynomial at the EF point: uint32[c, 4]."""
        return eval_columns(committed.coeffs, np.asarray(point, np.uint32))

    # ------------------------------------------------------------------ R4
    def deep_quotient(self, shape: TableShape, groups: list, z, lam) -> np.ndarray:
        """The per-table end of the chain: DQ(x) = sum_k lam^k (f_k(x) - v_k) / (x - zeta_k)
        on g<w_N>, returned as uint32[N, 4] in bit-reversed order (this table's FRI input).  ``groups``: list of
        (Committed, opened values (c, 4), at_next) in the order of deep_groups().

        DEEP reads the committed matrices' coefficients, not their LDEs (see below): each
        :class:`Committed` is released after its last group (the openings recompute the
        rows they need from the coefficients).  DQ is divided in coefficient form and
        extended once; the pointwise sum is the fallback (see below)."""
        zf = np.asarray(z, np.uint64).reshape(4, 1)
        points = {False: zf, True: F.ef_mul_base(zf, F.root_of_unity(shape.log_n))}
        lamf = np.asarray(lam, np.uint64).reshape(4, 1)
        # sum_k lam^k f_k and sum_k lam^k v_k, gathered per opening point
        comb = {False: None, True: None}
        cst = {False: np.zeros(4, np.uint64), True: np.zeros(4, np.uint64)}
        widths = [(com.lde.shape[0] if not isinstance(com, Committed) or com.holds_lde
                   else com.coeffs.shape[0]) for com, _, _ in groups]
        lam_pows = ef_powers(lamf, sum(widths))        # lam^0 .. lam^(K-1), every group's
        lps, k = [], 0
        for (com, vals, at_next), c in zip(groups, widths):
            lp = lam_pows[:, k:k + c]                                         # (4, c)
            k += c
            lps.append(np.ascontiguousarray(lp.T.astype(np.uint32)))      # (c, 4)
            v = F.ef_mul(lp, np.asarray(vals, np.uint64).T).sum(axis=1) % np.uint64(F.P)
            cst[at_next] = (cst[at_next] + v) % np.uint64(F.P)
        # The combination is linear in the columns and the LDE is linear in the
        # coefficients: sum_k lam^k f_k(x) on g<w_N> is the LDE of the EF polynomial
        # sum_k lam^k f_k, so each committed matrix contributes its coefficients
        # (c x n products instead of c x N, and no LDE of its columns), and one LDE of
        # the 4 EF coordinates per opening point follows.  Same values, bit for bit.
        # A group given as a bare LDE array (no coefficients) is combined on g<w_N>.
        coef = {False: None, True: None}
        for gi, (com, _, _) in enumerate(groups):
            if any(g[0] is com for g in groups[:gi]):
                continue
            mine = [(j, g[2]) for j, g in enumerate(groups) if g[0] is com]
            has_coeffs = isinstance(com, Committed) and com.coeffs is not None
            cols = com.coeffs if has_coeffs else com.lde
            for j, at_next in mine:
                dst = coef if has_coeffs else comb
                dst[at_next] = combine_rows(cols, lps[j], into=dst[at_next])
            del cols
            if isinstance(com, Committed):
                com.release()
        # Every group in coefficients (the host's committed matrices) and z off the base
        # field: DQ is the polynomial sum over the points of (G(X) - G(zeta)) / (X - zeta),
        # of degree < n, with G = that point's combination -- divided in coefficient form
        # (n EF steps a point), summed, and one LDE of its 4 coordinates, instead of an LDE
        # of each point's combination and 1/(x - zeta) on all N points.  The same values:
        # the division is exact when the opened values are the polynomials' values (its
        # remainder G(zeta) - v says so); otherwise, and for bare LDE groups, the sum
        # below, point by point.
        if (comb[False] is None and comb[True] is None and coef[False] is not None
                and zf[1:].any()):
            dq = None
            for at_next in (False, True):
                if coef[at_next] is None:
                    continue
                q, at = divide_linear(coef[at_next], points[at_next])
                if not np.array_equal(at, cst[at_next].astype(np.uint32)):
                    dq = None
                    break
                dq = q if dq is None else ((dq.astype(np.uint64) + q) % np.uint64(F.P)
                                           ).astype(np.uint32)
            if dq is not None:
                lde = lde_of_coeffs(np.ascontiguousarray(dq.T), shape.log_blowup)
                # its rows in bit-reversed order: bit_reverse_permutation(transpose(lde)),
                # by the tiled gather (the whole matrix as one chunk: tree order)
                hb = min(4, shape.log_lde)
                return gather_rows(lde, hb, shape.log_lde - hb, 0)
        xs = airlib.coset_points(SHIFT, shape.log_lde).astype(np.uint32)
        for at_next in (False, True):
            if coef[at_next] is not None:
                lde = lde_of_coeffs(np.ascontiguousarray(coef[at_next].T), shape.log_blowup)
                _add_into(comb, at_next, transpose(lde))
                del lde
        total = deep_sum([(comb[a], cst[a].astype(np.uint32),
                           points[a].reshape(4).astype(np.uint32))
                          for a in (False, True) if comb[a] is not None], xs)
        return bit_reverse_permutation(total, axis=0)

    # ------------------------------------------------------------------ the join (v3)
    # One FRI for all tables (docs/protocol.md §5).  Layer values are uint32[2^h, 4]
    # (EF c0..c3 per row) in bit-reversed order on the coset g<w_{2^h}> -- the same shift
    # g = SHIFT at every height ("rescaled domain"): position p is the point
    # x_p = g w_{2^h}^bitrev_h(p), so positions 2u, 2u+1 hold x and -x.

    def fri_input(self, dqs: list, mu) -> np.ndarray:
        """F = sum_j mu^j dqs[j] (j = 0, 1, ...): the combined FRI input of one height.
        ``dqs``: the DEEP quotients (uint32[2^h, 4], bit-reversed, all the same height)
        of the tables of that height in table order; ``mu``: uint32[4].  Returns a new
        uint32[2^h, 4] (a single table: a copy of its DQ)."""
        if not dqs:
            raise ValueError("fri_input needs at least one DEEP quotient")
        for dq in dqs[1:]:
            if dq.shape != dqs[0].shape:
                raise ValueError(f"fri_input: heights differ ({dq.shape} vs {dqs[0].shape})")
        return fri_host.combine(dqs, mu)

    def fri_commit_layer(self, values: np.ndarray, log_arity: int):
        """Commit a FRI layer of height h (uint32[2^h, 4], bit-reversed) with leaf
        j = positions j*a .. j*a + a - 1 (a = 2^log_arity), i.e. the row
        values.reshape(2^(h - log_arity), 4a).  Returns the tree (a
        :class:`kernels.merkle.MerkleTree` over 2^(h - log_arity) leaves; its cap is
        :meth:`cap`).  The tree keeps a view of ``values``: do not modify them after."""
        a = 1 << log_arity
        if values.shape[0] % a or values.shape[0] < a:
            raise ValueError(f"fri_commit_layer: {values.shape[0]} values for arity {a}")
        return merkle.commit(np.ascontiguousarray(values).reshape(-1, 4 * a))

    def _inv_half_x(self, log_h: int) -> np.ndarray:
        """1 / (2 x_{2u}) for u < 2^(h-1) on a layer of height h (uint32[2^(h-1)])."""
        key = ("inv_half_x", log_h)
        if key not in self._selector_cache:
            half = 1 << (log_h - 1)
            w_inv = pow(F.root_of_unity(log_h), F.P - 2, F.P)
            c = pow(2 * SHIFT, F.P - 2, F.P)                 # 1 / (2 g)
            rev = bit_reverse_permutation(np.arange(half, dtype=np.int64))
            # bitrev_h(2u) = bitrev_{h-1}(u): x_{2u} = g w_{2^h}^bitrev_{h-1}(u)
            self._selector_cache[key] = F.mul(F.powers(w_inv, half)[rev], c).astype(np.uint32)
        return self._selector_cache[key]

    def fri_fold(self, values: np.ndarray, beta, log_arity: int, log_height: int,
                 rollin: np.ndarray | None = None) -> np.ndarray:
        """Fold a layer of height h = ``log_height`` (uint32[2^h, 4], bit-reversed) by
        a = 2^k (k = ``log_arity``): k binary folds with b = beta, beta^2, ...,
        beta^(2^(k-1)), each
            f'(u) = (f(2u) + f(2u+1)) / 2 + b (f(2u) - f(2u+1)) / (2 x_{2u})
        (x_{2u} = g w_{2^h}^bitrev_{h-1}(u) at the current height h), then, if ``rollin``
        (uint32[2^(h-k), 4], bit-reversed: the combined input F of height h - k) is
        given, f' += beta^a rollin.  Returns a new uint32[2^(h-k), 4]; ``values`` is
        not modified."""
        if values.shape != (1 << log_height, 4) or not 1 <= log_arity <= log_height:
            raise ValueError(f"fri_fold: {values.shape} values, height {log_height}, "
                             f"log_arity {log_arity}")
        k = log_arity
        if rollin is not None and rollin.shape != (1 << (log_height - k), 4):
            raise ValueError(f"fri_fold: roll-in of shape {rollin.shape}, expected "
                             f"{(1 << (log_height - k), 4)}")
        return fri_host.fold(values, beta, k,
                             [self._inv_half_x(log_height - j) for j in range(k)], rollin)

    def fri_final(self, values: np.ndarray, log_height: int, length: int) -> np.ndarray:
        """The final polynomial: interpolate the last layer (uint32[2^h, 4], bit-reversed,
        on g<w_{2^h}>) and return its first ``length`` coefficients uint32[length, 4]
        (constant first).  Raises RuntimeError if a higher coefficient is non-zero (the
        prover's own check: an honest proof's final polynomial has degree < length)."""
        if values.shape != (1 << log_height, 4) or not 1 <= length <= values.shape[0]:
            raise ValueError(f"fri_final: {values.shape} values, height {log_height}, "
                             f"length {length}")
        nat = bit_reverse_permutation(np.ascontiguousarray(values), axis=0)   # natural order
        coeffs = coset_intt(np.ascontiguousarray(nat.T), SHIFT)              # (4, 2^h)
        if coeffs[:, length:].any():
            raise RuntimeError(f"FRI: the final polynomial has degree >= {length} (a table's "
                               "DEEP quotient is not of low degree)")
        return np.ascontiguousarray(coeffs[:, :length].T)

    def cap(self, tree, log_cap: int) -> np.ndarray:
        """The commitment of a tree (any of this class's trees): the 2^c nodes of level
        h - c, c = min(log_cap, h), uint32[2^c, 8]."""
        if isinstance(tree, _LdeTree):
            return tree.cap(log_cap)
        return mp.cap(tree, log_cap)

    def open_batch(self, tree, indices: np.ndarray, log_cap: int) -> tuple[np.ndarray, np.ndarray]:
        """Open the rows at ``indices`` (int64[d], sorted ascending and distinct: ValueError
        otherwise) of a committed tree: (rows uint32[d, w] in that order, multiproof nodes
        uint32[m, 8] against ``cap(tree, log_cap)``, in proof order)."""
        idx = np.asarray(indices, dtype=np.int64)
        if idx.ndim != 1 or idx.size == 0 or (idx.size > 1 and not (np.diff(idx) > 0).all()):
            raise ValueError("open_batch: indices must be a non-empty sorted distinct 1-d array")
        if idx[0] < 0 or idx[-1] >= (1 << tree.log_n):
            raise ValueError(f"open_batch: index out of range [0, 2^{tree.log_n})")
        if isinstance(tree, _LdeTree):
            rows, nodes = tree.open_batch(idx, log_cap)
            return np.ascontiguousarray(rows, np.uint32), nodes
        rows = tree.rows(idx) if hasattr(tree, "rows") else tree.matrix[idx]
        return (np.ascontiguousarray(rows, np.uint32),
                mp.multiproof_nodes(tree, idx, log_cap))

    def leaf_digests(self, com) -> np.ndarray:
        """The leaf digests of a committed matrix (uint32[N, 8], tree order), handed over
        once to its round's mixed-height commitment (prover.core.rounds.mixed_commit): the
        committed object keeps no reference."""
        leaves, com.leaves = com.leaves, None
        if leaves is None:          # taken already (a recomputed table): rehash the rows
            from ...kernels.merkle import hash_rows
            leaves = hash_rows(np.ascontiguousarray(
                com.tree.rows(np.arange(1 << com.tree.log_n)), np.uint32))
        return leaves

    def open_rows(self, tree, indices, log_cap: int, cached=None) -> np.ndarray:
        """A table's committed rows at sorted distinct tree positions (the proof carries
        no node of the table's own tree since format 6): ``cached`` when given -- the
        same rows, fetched by the round's mixed tree for its own nodes -- else read."""
        if cached is not None:
            return cached
        if isinstance(tree, _LdeTree):
            return tree.open_rows(indices)
        return self.open_batch(tree, indices, log_cap)[0]

    def group_rows(self, com, groups, b: int) -> np.ndarray:
        """Committed rows of ``com`` in tree-position groups of 2^b (group g: positions
        g 2^b .. g 2^b + 2^b - 1): uint32[len(groups), 2^b, w] -- what a pruned mixed
        tree rehashes at an opening (kernels/mmcs.py).  From the held LDE, else evaluated
        from the coefficients on those cosets alone."""
        groups = np.asarray(groups, np.int64)
        src = com._src
        if src.lde is None and hasattr(src, "group_rows"):
            return np.ascontiguousarray(src.group_rows(groups, b), np.uint32)
        pos = ((groups[:, None] << b) + np.arange(1 << b)[None, :]).reshape(-1)
        rows = com.tree.rows(pos, src.lde)
        return np.ascontiguousarray(rows, np.uint32).reshape(groups.size, 1 << b, -1)

    def permute(self, states: np.ndarray) -> np.ndarray:
        """Poseidon2 over a batch of states (proof-of-work grinding)."""
        return poseidon2_permute(states)

    def grind_search(self, base: np.ndarray, lane: int, bits: int):
        """The proof-of-work search compiled (kernels/poseidon2.grind_search): the smallest
        nonce, as the transcript's batches find it; None where that kernel is off."""
        return grind_search(base, lane, bits)



def _chunk_leaf(main_q, prep_q, aux_q, idx, nidx, pv, chal, term):
    """Leaf values for quotient-domain positions idx (next row: nidx)."""
    cache: dict = {}

    def leaf(op, payload):
        if op in ("main", "prep", "aux"):
            key = (op,) + tuple(payload)
            if key not in cache:
                j, nx = payload
                sel = nidx if nx else idx
                if op == "aux":
                    cache[key] = aux_q[:, j, sel].astype(np.uint64)
                else:
                    src = main_q if op == "main" else prep_q
                    cache[key] = src[j, sel].astype(np.uint64)
            return cache[key]
        if op == "pv":
            return np.uint64(pv[payload])
        if op == "chal":
            return chal[payload]
        if op == "term":
            return term
        raise ValueError(f"unknown leaf {op!r}")

    return leaf
