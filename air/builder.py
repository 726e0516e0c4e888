"""AIR definitions: the builder, the frozen :class:`Air`, and the LogUp derivation.

See the package docstring (:mod:`air`) for the DSL and a worked example.  This module
turns one symbolic definition into everything the protocol needs:

* the user constraints (with their row conditions) and the LogUp constraints derived
  from the interactions (:func:`_derive_logup`), in one canonical order, batched to a
  degree budget that ``build(log_blowup=...)`` chooses per AIR to commit the fewest
  columns (:func:`choose_logup_degree`);
* the constraint degree ``D`` (Plonky3's count: the degree in the trace columns, plus one
  for a first-row / last-row condition) and ``num_parts = max(1, D - 1)``;
* compiled programs (:mod:`air.program`) for the constraint evaluators and for the
  interaction tuples;
* a fingerprint (SHA-256 of the canonical program text, the shapes and the preprocessed
  values) that both prover and verifier absorb into the transcript.
"""
from __future__ import annotations

import contextvars
import gc
import hashlib
import threading
from contextlib import contextmanager
from dataclasses import dataclass
import functools
from functools import cached_property
from typing import Sequence

import numpy as np

from .expr import Expr, column, lift, const
from .field import P
from .program import Program, compile_program
from steadfast.errors import SteadfastError

WHEN = ("all", "first", "last", "transition")

_GC_LOCK = threading.Lock()
_GC_STATE = {"depth": 0, "reenable": False}


_BUS_NAMESPACE: contextvars.ContextVar = contextvars.ContextVar("bus_namespace", default=None)


@contextmanager
def bus_namespace(prefix: str, shared=()):
    """Every interaction declared inside (this thread or task) goes to ``prefix + bus``
    instead of ``bus``, except on the buses named in ``shared``.  Tables built under two
    prefixes cannot balance each other's tuples (their bus tags differ), which is how one
    proof holds several independent executions of the same tables (a block's
    transactions, rv32/block.py) while they share stateless lookup tables (``shared``).
    AIRs begun inside are named ``prefix + name``."""
    if not isinstance(prefix, str) or not prefix:
        raise AirError("a bus namespace is a non-empty string")
    token = _BUS_NAMESPACE.set((prefix, frozenset(shared)))
    try:
        yield
    finally:
        _BUS_NAMESPACE.reset(token)


@contextmanager
def outside_bus_namespace():
    """Leave the enclosing :func:`bus_namespace` for the block inside (this thread or task)."""
    token = _BUS_NAMESPACE.set(None)
    try:
        yield
    finally:
        _BUS_NAMESPACE.reset(token)


def current_bus_namespace():
    """(prefix, shared buses) of the enclosing :func:`bus_namespace`, or None."""
    return _BUS_NAMESPACE.get()


class InNamespace:
    """``fn`` called inside the bus namespace ``ns`` ((prefix, shared) or None: outside
    any), whatever namespace its caller is in.  An AIR's memoised builder of more AIRs
    (POSEIDON2's ``device_split``, called at prove time from anywhere) is
    ``functools.cache(InNamespace(current_bus_namespace(), build))``: what it builds lives
    in the namespace its AIR was built in, and :meth:`Air.in_namespace` re-binds it."""

    def __init__(self, ns, fn):
        self.ns, self.fn = ns, fn

    def __call__(self, *args, **kwargs):
        if self.ns is None:
            with outside_bus_namespace():
                return self.fn(*args, **kwargs)
        with bus_namespace(self.ns[0], self.ns[1]):
            return self.fn(*args, **kwargs)


@contextmanager
def gc_paused():
    """Pause Python's cyclic garbage collector while AIRs are built (nestable, any thread).

    Building an AIR allocates tens of thousands of long-lived objects (expression nodes,
    program instructions); in a process that has imported the prover or the verifier,
    every collection the allocations trigger walks that whole heap, and a full one
    triggers once the survivors reach a quarter of it: about half of the CPU time of
    building a proof's AIRs in a fresh verifier.  Expressions hold no reference cycles
    (reference counting frees them; cyclic garbage made meanwhile waits for the next
    collection).  The collector is re-enabled on the outermost exit, and only if it was
    enabled on the outermost entry."""
    with _GC_LOCK:
        if _GC_STATE["depth"] == 0:
            _GC_STATE["reenable"] = gc.isenabled()
            gc.disable()
        _GC_STATE["depth"] += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _GC_STATE["depth"] -= 1
            if _GC_STATE["depth"] == 0 and _GC_STATE["reenable"]:
                gc.enable()


@dataclass(frozen=True)
class Constraint:
    """``expr = 0`` on the rows selected by ``when``."""
    expr: Expr
    when: str
    name: str

    @property
    def degree(self) -> int:
        # Plonky3's count: a first/last-row selector has degree 1 as a polynomial and
        # raises the quotient's degree; the transition selector (x - w^-1) does not.
        return self.expr.degree + (1 if self.when in ("first", "last") else 0)


class _DerivedConstraint(Constraint):
    """A re-tagged AIR's LogUp constraint (:meth:`Air.in_namespace`): its ``when`` and
    ``name`` at once, its ``expr`` derived on first read over the renamed interactions
    (``derive()`` returns every LogUp constraint of that AIR, computed once).  A verifier
    reads only ``when`` -- the compiled program is re-tagged without the expressions --
    so a block's verify derives none of them.  Equal to, and pickled as, the plain
    :class:`Constraint` it stands for."""

    def __init__(self, derive, k: int, when: str, name: str):
        object.__setattr__(self, "_derive", derive)
        object.__setattr__(self, "_k", k)
        object.__setattr__(self, "when", when)
        object.__setattr__(self, "name", name)

    def __getattr__(self, attr):            # only reached while ``expr`` is not yet set
        if attr != "expr":
            raise AttributeError(attr)
        expr = self._derive()[self._k].expr
        object.__setattr__(self, "expr", expr)
        return expr

    def plain(self) -> Constraint:
        return Constraint(self.expr, self.when, self.name)

    def __eq__(self, other):
        if not isinstance(other, Constraint):
            return NotImplemented
        return (self.expr, self.when, self.name) == (other.expr, other.when, other.name)

    def __hash__(self):
        return hash((self.expr, self.when, self.name))

    def __repr__(self):
        return repr(self.plain())

    def __reduce__(self):
        return (Constraint, (self.expr, self.when, self.name))


@dataclass(frozen=True)
class Interaction:
    """Send (``sign = +1``) or receive (``sign = -1``) ``values`` with ``multiplicity``
    on ``bus``.  Over all tables, every tuple's sends and receives must balance."""
    bus: str
    values: tuple
    multiplicity: Expr
    sign: int

    @property
    def bus_id(self) -> int:
        return bus_id(self.bus)


def bus_id(name: str) -> int:
    """A bus name's field tag: the first 8 bytes of SHA-256, little-endian, mod p."""
    h = hashlib.sha256(b"steadfast/bus/" + name.encode()).digest()
    return int.from_bytes(h[:8], "little") % P


class AirError(SteadfastError, ValueError):
    """An AIR definition that cannot be used (bad shape, unsupported degree, ...)."""


class AirBuilder:
    """Collects columns, constraints and interactions; :meth:`build` freezes them."""

    def __init__(self, name: str, public: Sequence[str] = ()):
        if not name or not isinstance(name, str):
            raise AirError("an AIR needs a non-empty name")
        ns = _BUS_NAMESPACE.get()
        self.name = name if ns is None else ns[0] + name     # "tx3/rv32_alu"
        self._main: list[str] = []
        self._prep: list[str] = []
        self._column_names: set[str] = set()         # main and preprocessed
        self._public: list[str] = []
        self._constraints: list[Constraint] = []
        self._constraint_names: set[str] = set()    # the duplicate-name check, O(1) each
        self._interactions: list[Interaction] = []
        for p in public:
            self.pv(p)

    # ---------------------------------------------------------------- columns
    def _declare(self, names: list, kind: str, name: str) -> Expr:
        if name in self._column_names:
            raise AirError(f"{self.name}: column {name!r} declared twice")
        self._column_names.add(name)
        names.append(name)
        return column(kind, len(names) - 1, name)

    def main(self, name: str) -> Expr:
        """Declare one main (witness) column; returns its local-row expression."""
        return self._declare(self._main, "main", name)

    def main_cols(self, name: str, count: int) -> list[Expr]:
        """Declare ``count`` main columns ``name[0] .. name[count-1]``."""
        return [self.main(f"{name}[{i}]") for i in range(count)]

    def prep(self, name: str) -> Expr:
        """Declare one preprocessed (fixed, part of the statement) column."""
        return self._declare(self._prep, "prep", name)

    def prep_cols(self, name: str, count: int) -> list[Expr]:
        return [self.prep(f"{name}[{i}]") for i in range(count)]

    def pv(self, name: str) -> Expr:
        """The public value ``name`` (declared on first use, in order of first use)."""
        if name not in self._public:
            self._public.append(name)
        return Expr("pv", (), self._public.index(name), name)

    # ---------------------------------------------------------------- constraints
    def _add(self, expr, when: str, name: str | None) -> None:
        expr = lift(expr)
        if expr.is_ef:
            raise AirError(f"{self.name}: user constraints are over the base field "
                           "(aux columns and challenges belong to LogUp)")
        if when != "transition" and expr.uses_next:
            # a next-row reference wraps around on the last row; only a transition
            # constraint (which excludes the last row) may use it
            raise AirError(f"{self.name}: constraint {name or len(self._constraints)} reads the "
                           "next row but is not a transition constraint")
        name = name or f"{when}#{len(self._constraints)}"
        if name in self._constraint_names:
            raise AirError(f"{self.name}: constraint name {name!r} used twice")
        self._constraint_names.add(name)
        self._constraints.append(Constraint(expr, when, name))

    def assert_zero(self, expr, name: str | None = None) -> None:
        """``expr = 0`` on every row."""
        self._add(expr, "all", name)

    def assert_eq(self, a, b, name: str | None = None) -> None:
        self._add(lift(a) - lift(b), "all", name)

    def assert_bool(self, x, name: str | None = None) -> None:
        x = lift(x)
        self._add(x * (x - 1), "all", name)

    def when_first_row(self, expr, name: str | None = None) -> None:
        self._add(expr, "first", name)

    def when_last_row(self, expr, name: str | None = None) -> None:
        self._add(expr, "last", name)

    def when_transition(self, expr, name: str | None = None) -> None:
        """``expr = 0`` on every row but the last (``x.next`` is the following row)."""
        self._add(expr, "transition", name)

    # ---------------------------------------------------------------- interactions
    def _interact(self, bus, values, multiplicity, sign):
        if not isinstance(bus, str) or not bus:
            raise AirError(f"{self.name}: bus names are non-empty strings")
        values = tuple(lift(v) for v in values)
        m = lift(multiplicity)
        for v in values + (m,):
            if v.is_ef:
                raise AirError(f"{self.name}: interaction values must be base-field expressions")
            if v.uses_next:
                raise AirError(f"{self.name}: interaction values cannot read the next row")
        if not values:
            raise AirError(f"{self.name}: an interaction needs at least one value")
        ns = _BUS_NAMESPACE.get()
        if ns is not None and bus not in ns[1]:
            bus = ns[0] + bus
        self._interactions.append(Interaction(bus, values, m, sign))

    def send(self, bus: str, values: Sequence, multiplicity=1) -> None:
        """Add ``multiplicity`` copies of the tuple ``values`` to ``bus`` (every row)."""
        self._interact(bus, values, multiplicity, +1)

    def receive(self, bus: str, values: Sequence, multiplicity=1) -> None:
        """Remove ``multiplicity`` copies of ``values`` from ``bus`` (every row)."""
        self._interact(bus, values, multiplicity, -1)

    # ---------------------------------------------------------------- freeze
    def build(self, preprocessed: np.ndarray | None = None,
              logup_degree: int | None = None, log_blowup: int | None = None) -> "Air":
        """Freeze the AIR.  The LogUp batching's degree budget is, by default, the base
        max(user degree, 2, largest single interaction); with ``log_blowup`` it is the
        degree d in [base, max(base, logup_degree_cap(log_blowup))] that commits the
        fewest columns, aux_width + num_parts (ties to the smallest d;
        :func:`choose_logup_degree`).  ``logup_degree`` overrides both; it exists so that
        an AIR holding only another AIR's interactions reproduces that AIR's LogUp
        constraints exactly (the device kernels of slotted tables, rv32/chips/slots.py)."""
        with gc_paused():
            return Air(self.name, tuple(self._main), tuple(self._prep), tuple(self._public),
                       tuple(self._constraints), tuple(self._interactions), preprocessed,
                       logup_degree, log_blowup)


def _chal(name: str) -> Expr:
    return Expr("chal", (), name, name)


def _denominator(inter: Interaction) -> Expr:
    """d = gamma - (bus_id + sum_j beta^(j+1) * v_j)  (EF, degree max deg v_j)."""
    beta = _chal("logup_beta")
    fp = const(inter.bus_id)
    power = beta
    for v in inter.values:
        fp = fp + power * v
        power = power * beta
    return _chal("logup_gamma") - fp


def _batch_degree(batch: list[Interaction]) -> int:
    dd = [max(v.degree for v in it.values) for it in batch]
    total = sum(dd)
    terms = [it.multiplicity.degree + total - d for it, d in zip(batch, dd)]
    return max([1 + total] + terms)


def _batches(interactions, target: int) -> list[list[Interaction]]:
    """Greedy batching (declaration order): an interaction joins the current batch while
    the batch constraint's degree stays <= target."""
    batches: list[list[Interaction]] = []
    for it in interactions:
        if batches and _batch_degree(batches[-1] + [it]) <= target:
            batches[-1].append(it)
        else:
            batches.append([it])
    return batches


def logup_degree_cap(log_blowup: int) -> int:
    """The largest LogUp degree budget :func:`choose_logup_degree` tries: 3 at log_blowup
    1 (a degree-3 constraint has 2 quotient parts, the most 2^1 holds), 5 otherwise (4
    parts, the most 2^2 holds; higher degrees would fit larger blowups but make the
    generated constraint kernels larger for ever fewer columns saved)."""
    return 3 if int(log_blowup) <= 1 else 5


def choose_logup_degree(user_degree: int, interactions, log_blowup: int) -> int:
    """The LogUp degree budget d of an AIR with these interactions (non-empty) and user
    constraint degree ``user_degree`` (Plonky3's count) for a proof at ``log_blowup``:
    of d in [base, max(base, logup_degree_cap(log_blowup))], base = max(user_degree,
    2, the largest single interaction's degree), the one that minimises aux_width +
    num_parts -- aux_width = the number of batches of the greedy batching at d,
    num_parts = max(1, max(user_degree, the largest batch degree) - 1) -- ties to the
    smallest d.  The committed cells per row are main + 4 aux_width + 4 num_parts."""
    single = max(_batch_degree([it]) for it in interactions)
    base = max(int(user_degree), single, 2)
    best = None
    for d in range(base, max(base, logup_degree_cap(log_blowup)) + 1):
        batches = _batches(interactions, d)
        deg = max([int(user_degree)] + [_batch_degree(b) for b in batches])
        cost = len(batches) + max(1, deg - 1)
        if best is None or cost < best[0]:
            best = (cost, d)
    return best[1]


def _derive_logup(interactions, target: int):
    """Greedy batching (declaration order): an interaction joins the current batch while
    the batch constraint's degree stays <= target.  Returns (batches, constraints).

    Aux columns: h_0 .. h_(B-2) (one per batch but the last) and the accumulator acc
    (column B-1).  The last batch has no column of its own: its fractions are the row's
    increment of acc beyond the other h_k, in one cyclic constraint on every row (the
    next row of the last row is row 0) with the claimed value U = terminal / n::

        (acc' - acc - sum_(k<B-1) h_k + U) * prod_(i in last) d_i - sum_i sign_i m_i prod_(j != i) d_j = 0

    Summed over the n rows of H the acc terms cancel, so sum_rows sum_i sign_i m_i / d_i
    = n * U: the table's LogUp sum is n * U (the verifier checks sum_tables n_t U_t = 0).
    The constraint has the degree of the last batch's h constraint, and no boundary
    constraint is needed (acc is defined up to a constant; the prover takes acc[0] = 0)."""
    batches = _batches(interactions, target)
    cons = [Constraint(e, "all", f"logup_h[{k}]" if k < len(batches) - 1 else "logup_acc")
            for k, e in enumerate(_logup_exprs(batches, _fractions_expanded))]
    return batches, cons


def _fractions_expanded(batch):
    """(prod_i d_i, sum_i sign_i m_i prod_(j != i) d_j): a batch's fractions over one
    common denominator, multiplied out (the AIR's canonical form)."""
    ds = [_denominator(it) for it in batch]
    prod = ds[0]
    for d in ds[1:]:
        prod = prod * d
    rhs = None
    for i, it in enumerate(batch):
        term = it.multiplicity if it.sign > 0 else -it.multiplicity
        for j, d in enumerate(ds):
            if j != i:
                term = term * d
        rhs = term if rhs is None else rhs + term
    return prod, rhs


def _logup_exprs(batches, fractions) -> list:
    """The LogUp constraint expressions over ``batches`` (see :func:`_derive_logup`), each
    batch's (common denominator, numerator) built by ``fractions(batch)``: the AIR's own
    multiplied-out form (:func:`_fractions_expanded`) or the quotient kernels' incremental
    one (air/kernel_program.py).  h_k * prod - rhs = 0 for every batch but the last, i.e.
    h_k = sum_i sign_i m_i / d_i on every row; then the accumulator's step."""
    B = len(batches)
    h = [column("aux", k, f"logup_h[{k}]") for k in range(B - 1)]
    acc = column("aux", B - 1, "logup_acc")
    out = []
    for k, batch in enumerate(batches[:-1]):
        prod, rhs = fractions(batch)
        out.append(h[k] * prod - rhs)
    step = acc.next - acc + Expr("term", (), None, "terminal")
    for k in range(B - 1):
        step = step - h[k]
    prod, rhs = fractions(batches[-1])
    out.append(step * prod - rhs)
    return out


class Air:
    """A frozen AIR (one table kind).  Build it with :class:`AirBuilder`.

    Attributes: ``name``, ``main_names``, ``prep_names``, ``public_names``,
    ``constraints`` (user constraints then LogUp constraints, the canonical order used by
    α-folding), ``interactions``, ``lookup_batches``, ``preprocessed`` (uint32[n, k] or
    None), ``main_width``, ``prep_width``, ``aux_width`` (EF columns; 0 without
    interactions), ``max_degree``, ``num_parts``, ``uses_next_main/prep``,
    ``constraint_program``, ``interaction_program``.
    """

    def __init__(self, name, main_names, prep_names, public_names, constraints,
                 interactions, preprocessed, logup_degree: int | None = None,
                 log_blowup: int | None = None):
        self.name = name
        self.main_names = main_names
        self.prep_names = prep_names
        self.public_names = public_names
        self.user_constraints = constraints
        self.interactions = interactions
        self.main_width = len(main_names)
        self.prep_width = len(prep_names)
        self.num_public = len(public_names)
        if self.main_width == 0:
            raise AirError(f"{name}: an AIR needs at least one main column")
        self.preprocessed = self._check_prep(preprocessed)
        user_deg = max([c.degree for c in constraints], default=0)
        if interactions:
            single = max(_batch_degree([it]) for it in interactions)
            if logup_degree is not None:
                target = int(logup_degree)
            elif log_blowup is not None:
                target = choose_logup_degree(user_deg, interactions, log_blowup)
            else:
                target = max(user_deg, single, 2)
            if target < single:
                raise AirError(f"{name}: logup_degree {target} is below an interaction's "
                               f"own degree {single}")
            self.logup_target = target
            batches, logup = _derive_logup(interactions, target)
            self.lookup_batches = tuple(tuple(b) for b in batches)
            self.aux_width = len(batches)           # h_0 .. h_(B-2), acc
        else:
            logup = []
            self.logup_target = None
            self.lookup_batches = ()
            self.aux_width = 0
        self.constraints = tuple(constraints) + tuple(logup)
        self.max_degree = max([c.degree for c in self.constraints], default=0)
        self.num_parts = max(1, self.max_degree - 1)
        self.constraint_program: Program = compile_program([c.expr for c in self.constraints])
        roots = []
        for it in interactions:
            roots.extend(it.values)
            roots.append(it.multiplicity)
        self.interaction_program: Program = compile_program(roots)
        self.uses_next_main = any(p[1] for p in self.constraint_program.leaves("main"))
        self.uses_next_prep = any(p[1] for p in self.constraint_program.leaves("prep"))
        self._fingerprint = None

    @cached_property
    def user_program(self) -> Program:
        """The user constraints alone (no LogUp: they need challenges), compiled on first
        use: only the trace checks (:mod:`air.check`) read it, not the prover's kernels nor
        the verifier, which build every AIR afresh."""
        return compile_program([c.expr for c in self.user_constraints])

    def _check_prep(self, prep):
        if self.prep_width == 0:
            if prep is not None:
                raise AirError(f"{self.name}: preprocessed values given but no preprocessed columns")
            return None
        if prep is None:
            raise AirError(f"{self.name}: declares {self.prep_width} preprocessed columns; "
                           "pass their values to build(preprocessed=...)")
        if not isinstance(prep, np.ndarray) or prep.dtype != np.uint32:
            raise TypeError(f"{self.name}: preprocessed values must be a uint32 array")
        if prep.ndim != 2 or prep.shape[1] != self.prep_width:
            raise AirError(f"{self.name}: preprocessed shape {prep.shape}, expected (n, {self.prep_width})")
        n = prep.shape[0]
        if n < 2 or n & (n - 1):
            raise AirError(f"{self.name}: preprocessed height {n} is not a power of two >= 2")
        if np.any(prep >= P):
            raise AirError(f"{self.name}: preprocessed values are not canonical (>= p)")
        out = np.ascontiguousarray(prep).copy()
        out.setflags(write=False)
        return out

    @property
    def fixed_height(self) -> int | None:
        """The height forced by the preprocessed columns, or None."""
        return None if self.preprocessed is None else self.preprocessed.shape[0]

    def check_parts(self, log_blowup: int) -> None:
        """Refuse an AIR whose quotient needs more parts than the blowup can hold."""
        if self.num_parts > (1 << log_blowup):
            raise AirError(
                f"{self.name}: constraint degree {self.max_degree} needs num_parts = "
                f"{self.num_parts} > 2^log_blowup = {1 << log_blowup}; raise log_blowup to "
                f"at least {(self.num_parts - 1).bit_length()} or lower the degree")

    def fingerprint(self) -> tuple:
        """16 field elements (16-bit limbs of a SHA-256) identifying this AIR instance:
        name, shapes, the compiled constraint and interaction programs (bus names included)
        and the preprocessed values."""
        if self._fingerprint is None:
            h = hashlib.sha256()
            h.update(f"steadfast/air/v1\n{self.name}\n{self.main_width} {self.prep_width} "
                     f"{self.num_public} {self.aux_width} {self.num_parts}\n".encode())
            h.update(self.constraint_program.text().encode())
            h.update("\n".join(f"{c.when} {c.name}" for c in self.constraints).encode())
            h.update(self.interaction_program.text().encode())
            h.update("\n".join(f"{it.bus} {it.sign} {len(it.values)}"
                               for it in self.interactions).encode())
            if self.preprocessed is not None:
                h.update(np.asarray(self.preprocessed.shape, dtype="<u8").tobytes())
                h.update(self.preprocessed.astype("<u4").tobytes())
            d = h.digest()
            self._fingerprint = tuple(int.from_bytes(d[i:i + 2], "little") for i in range(0, 32, 2))
        return self._fingerprint

    def in_namespace(self, prefix: str, shared=()) -> "Air | None":
        """This AIR (built outside any bus namespace) as if built again inside
        ``bus_namespace(prefix, shared)``, without building it: the name and the
        non-shared buses take the prefix, the LogUp constraints are derived again over the
        renamed interactions, and the compiled constraint program is this one with each
        renamed bus's tag constant replaced -- the namespace changes nothing else (the
        same columns, degrees, batches and instruction order).  None where a tag
        constant is not distinguishable from the program's other constants (an old or new
        tag equal to another constant, or two buses with one tag): then the caller builds
        the AIR afresh.  Equal to a fresh build in every field (tests/test_air_namespace.py);
        a block's transactions build their statement-independent tables this way
        (rv32/tables.static_air: ~10x cheaper than a build, which was most of a block
        verifier's AIR construction)."""
        if not isinstance(prefix, str) or not prefix:
            raise AirError("a bus namespace is a non-empty string")
        extras = {}
        for key in set(self.__dict__) - _AIR_FIELDS:
            # set after the build: a memoised builder of more AIRs bound to this AIR's
            # namespace (POSEIDON2's device_split) gets a cache of its own bound to the
            # new one, as a fresh build there has; anything else: rebuild
            got = self.__dict__[key]
            inner = getattr(got, "__wrapped__", None)
            if not (hasattr(got, "cache_clear") and isinstance(inner, InNamespace)
                    and inner.ns is None):
                return None
            extras[key] = functools.cache(InNamespace((prefix, frozenset(shared)), inner.fn))
        shared = frozenset(shared)
        old_tags: dict[str, int] = {}
        new_tags: dict[int, int] = {}
        inters = []
        for it in self.interactions:
            bus = it.bus if it.bus in shared else prefix + it.bus
            inters.append(Interaction(bus, it.values, it.multiplicity, it.sign))
            if bus != it.bus:
                old = old_tags.setdefault(it.bus, bus_id(it.bus))
                new_tags[old] = bus_id(bus)
        if len(set(old_tags.values())) != len(old_tags):
            return None                                 # two renamed buses, one tag
        kept = {bus_id(it.bus) for it in self.interactions if it.bus in shared}
        consts, user_consts = self._retag_constants()
        new = set(new_tags.values())
        if (len(new) != len(new_tags) or new & consts or set(new_tags) & (user_consts | kept)):
            return None
        out = object.__new__(Air)
        out.__dict__.update(self.__dict__)
        out.__dict__.update(extras)
        out.__dict__.pop("_retag_consts", None)         # this AIR's, not the new one's
        out.name = prefix + self.name
        out.interactions = tuple(inters)
        if inters:
            # the same batches (batching reads degrees only) of the renamed interactions;
            # the LogUp constraints' expressions derived only if read (_DerivedConstraint)
            index = {id(it): k for k, it in enumerate(self.interactions)}
            out.lookup_batches = tuple(tuple(out.interactions[index[id(it)]] for it in b)
                                       for b in self.lookup_batches)
            renamed, target = out.interactions, self.logup_target      # (no cycle via out)
            derive = functools.cache(lambda: _derive_logup(renamed, target)[1])
            n_user = len(self.user_constraints)
            out.constraints = tuple(self.user_constraints) + tuple(
                _DerivedConstraint(derive, k, c.when, c.name)
                for k, c in enumerate(self.constraints[n_user:]))
        out.constraint_program = self.constraint_program.with_payloads("const", new_tags)
        out._fingerprint = None
        return out

    def _retag_constants(self) -> tuple[set, set]:
        """(every constant of the compiled constraint program, every constant but the
        tags: the user constraints', and the interactions' values and multiplicities --
        they sit inside the LogUp constraints beside the tags), computed once per AIR:
        a block re-tags one base AIR for each of its transactions."""
        got = self.__dict__.get("_retag_consts")
        if got is None:
            consts = {payload for op, _, _, payload in self.constraint_program.ops
                      if op == "const"}
            user = _constants([c.expr for c in self.user_constraints] +
                              [e for it in self.interactions
                               for e in it.values + (it.multiplicity,)])
            got = self.__dict__["_retag_consts"] = (frozenset(consts), frozenset(user))
        return got

    def __repr__(self):
        return (f"Air({self.name!r}, main={self.main_width}, prep={self.prep_width}, "
                f"aux={self.aux_width}, constraints={len(self.constraints)}, "
                f"degree={self.max_degree}, parts={self.num_parts})")


_AIR_FIELDS = frozenset((
    "name", "main_names", "prep_names", "public_names", "user_constraints", "interactions",
    "main_width", "prep_width", "num_public", "preprocessed", "logup_target",
    "lookup_batches", "aux_width", "constraints", "max_degree", "num_parts",
    "constraint_program", "interaction_program", "uses_next_main", "uses_next_prep",
    "_fingerprint", "user_program", "_retag_consts"))


def _constants(roots) -> set:
    """The values of every constant leaf reachable from ``roots``."""
    seen: set = set()
    out: set = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.args:
            stack.extend(node.args)
        elif node.op == "const":
            out.add(node.payload)
    return out


def check_buses(airs: Sequence[Air]) -> None:
    """Every bus must carry tuples of one arity across all tables (else two tuples of
    different lengths could share a fingerprint)."""
    arity: dict[str, int] = {}
    for air in airs:
        for it in air.interactions:
            k = arity.setdefault(it.bus, len(it.values))
            if k != len(it.values):
                raise AirError(f"bus {it.bus!r} carries tuples of arity {k} and "
                               f"{len(it.values)} (table {air.name})")
