"""The proof format (version 6): versioned, deterministic binary, and a JSON rendering
for debugging.

Layout (all integers little-endian; "array" = ndim:u8, dims:u32 x ndim, then the
elements as u32, every element a canonical field element < p)::

    magic      4 bytes  b"STFK"
    version    u16      FORMAT_VERSION (6)
    reserved   u16      0
    params     log_blowup:u8  pow_bits:u8  log_final_poly_len:u8  logup_pow_bits:u8
               num_queries:u16  deep_pow_bits:u8  commit_pow_bits:u8
               log_fri_arity:u8  log_cap:u8
    num_tables u16
    logup_nonce u32     proof of work before the LogUp challenges
    per table, in table order:
      section_len  u32   bytes of the section that follows
      log_n        u8
      public_values array[k]
      terminal      array[4 | 0]              the LogUp terminal (EF); [0]: no aux
      ood_main      array[w, 4]     ood_main_next array[w | 0, 4]
      ood_aux       array[4a, 4]    ood_aux_next  array[4a, 4]  ood_parts  array[4P, 4]
      zeta_nonce    u32   (before z)      deep_nonce u32   (before lambda)
      main_rows  array[d, w]
      aux_rows   array[d, 4a] | [0, 0]
      parts_rows array[d, 4P]
    the commitments section (one mixed-height Merkle tree per round kind):
      main_cap    array[2^c, 8]       c  = min(log_cap, min_t (log_n_t + log_blowup))
      aux_cap     array[2^c', 8] | [0, 8]   c' the same over the tables with aux;
                                            [0, 8] when no table has aux
      parts_cap   array[2^c, 8]
      main_nodes  array[m, 8]   aux_nodes array[m', 8] | [0, 8]   parts_nodes array[m'', 8]
    the FRI section (one FRI for all tables):
      mu_nonce    u32             (before mu)
      num_layers  u8 (= r)
      per layer i: fri_cap array[2^c_i, 8]
      fold_nonces array[r]        (one before each folding challenge beta_i)
      final_poly  array[L, 4]     (coefficients, constant first)
      pow_nonce   u32             (before the queries)
      per layer i: values array[v_i, 4]   nodes array[m_i, 8]

A table "has aux" iff its terminal has 4 entries (then its aux_rows are [d, 4a]); the
aux tree's participants are those tables, in table order.  Rows are opened once per
distinct index (ascending), one row count d per section; ``*_nodes`` are the mixed-height
multiproofs of the main / aux / parts trees (docs/protocol.md section 3,
:mod:`verifier.mmcs`) down to the cap.  EF values are 4 coefficients (c0..c3) on the
last axis.  The reader checks every length against the remaining bytes before
allocating, every element against p, that no byte is left over, and every shape that
follows from the parameters and the tables' heights (the three caps, widths consistent
across a section's matrices, EF and digest axes); any failure is a :class:`ShapeError`.
Shapes that need the AIRs or the FRI layer heights (r, the layer caps, L), and counts
that need the queries (d, every node count), are checked by :mod:`verifier.verify`,
still before any hashing.
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field, fields

import numpy as np

from .errors import ShapeError

MAGIC = b"STFK"
FORMAT_VERSION = 6       # 6: one mixed-height Merkle commitment per round kind (main / aux / parts); 5: LogUp batch degree chosen per AIR and log_blowup (#12); 4: LogUp accumulator merged with the last batch, MEMORY 7 columns (#12); 3: one FRI (#13)
P = 2013265921
_MAX_DIM = 1 << 24
_MAX_LOG_N = 24          # = protocol.MAX_LOG_N (protocol imports this module)
_TWO_ADICITY = 27


@dataclass(frozen=True)
class Params:
    """Protocol parameters; recorded in the proof and absorbed first."""
    log_blowup: int = 2
    num_queries: int = 50
    pow_bits: int = 16
    log_final_poly_len: int = 2
    logup_pow_bits: int = 16     # grinding before the LogUp challenges (beta, gamma)
    deep_pow_bits: int = 14      # grinding before each table's DEEP batching challenge lambda
    commit_pow_bits: int = 8     # grinding before z and before each FRI folding challenge
    log_fri_arity: int = 3       # FRI folds by up to 2^log_fri_arity per layer (1..4)
    log_cap: int = 0             # Merkle commitments are caps of 2^log_cap nodes (0..8)
    # (defaults measured: docs/protocol.md section 7, docs/benchmarks.md "Compact proofs")

    def validate(self) -> None:
        """Raise ValueError for parameters the protocol does not support."""
        if not 1 <= self.log_blowup <= 8:
            raise ValueError(f"log_blowup must be in [1, 8], got {self.log_blowup}")
        if not 1 <= self.num_queries <= 1000:
            raise ValueError(f"num_queries must be in [1, 1000], got {self.num_queries}")
        if not 0 <= self.pow_bits <= 30:
            raise ValueError(f"pow_bits must be in [0, 30], got {self.pow_bits}")
        if not 0 <= self.log_final_poly_len <= 10:
            raise ValueError(f"log_final_poly_len must be in [0, 10], got {self.log_final_poly_len}")
        for name in ("logup_pow_bits", "deep_pow_bits", "commit_pow_bits"):
            if not 0 <= getattr(self, name) <= 30:
                raise ValueError(f"{name} must be in [0, 30], got {getattr(self, name)}")
        if not 1 <= self.log_fri_arity <= 4:
            raise ValueError(f"log_fri_arity must be in [1, 4], got {self.log_fri_arity}")
        if not 0 <= self.log_cap <= 8:
            raise ValueError(f"log_cap must be in [0, 8], got {self.log_cap}")

    def query_bits(self) -> int:
        """The FRI query term alone: log_blowup * num_queries + pow_bits.  The proof's
        security figure is lower: :func:`verifier.security.proof_security`."""
        return self.log_blowup * self.num_queries + self.pow_bits


_TABLE_ARRAYS = (
    ("public_values", 1), ("terminal", 1), ("ood_main", 2), ("ood_main_next", 2),
    ("ood_aux", 2), ("ood_aux_next", 2), ("ood_parts", 2),
)
_QUERY_ARRAYS = (("main_rows", 2), ("aux_rows", 2), ("parts_rows", 2))
_COMMIT_ARRAYS = (("main_cap", 2), ("aux_cap", 2), ("parts_cap", 2), ("main_nodes", 2),
                  ("aux_nodes", 2), ("parts_nodes", 2))


@dataclass
class TableProof:
    """One table's section.  All arrays are uint32 (see the module docstring).  The table
    has aux iff ``terminal`` has 4 entries (else terminal [0] and aux_rows [0, 0]); its
    commitments are in the proof's :class:`Commitments` (one tree per round kind)."""
    log_n: int
    public_values: np.ndarray
    terminal: np.ndarray
    ood_main: np.ndarray
    ood_main_next: np.ndarray
    ood_aux: np.ndarray
    ood_aux_next: np.ndarray
    ood_parts: np.ndarray
    zeta_nonce: int
    deep_nonce: int
    main_rows: np.ndarray
    aux_rows: np.ndarray
    parts_rows: np.ndarray
    raw: bytes = field(default=b"", repr=False, compare=False)   # decode: the section's bytes

    @property
    def has_aux(self) -> bool:
        """The table takes part in the aux tree (it has interactions)."""
        return np.shape(self.terminal) == (4,)


@dataclass
class Commitments:
    """The commitments section: the caps and multiproofs of the three mixed-height trees
    (main: every table's main matrix; aux: the aux matrices of the tables with aux, table
    order; parts: every table's parts matrix).  uint32 arrays; ``aux_cap`` and
    ``aux_nodes`` are [0, 8] when no table has aux."""
    main_cap: np.ndarray
    aux_cap: np.ndarray
    parts_cap: np.ndarray
    main_nodes: np.ndarray
    aux_nodes: np.ndarray
    parts_nodes: np.ndarray


@dataclass
class FriProof:
    """The FRI section (one FRI for all tables).  ``caps[i]``, ``values[i]`` and
    ``nodes[i]`` belong to layer i; ``fold_nonces`` uint32[r]; ``final_poly`` uint32[L, 4]."""
    caps: list
    fold_nonces: np.ndarray
    final_poly: np.ndarray
    pow_nonce: int
    values: list
    nodes: list
    mu_nonce: int = 0            # the proof of work before mu

    @property
    def num_layers(self) -> int:
        return len(self.caps)


@dataclass
class Proof:
    params: Params
    tables: list
    fri: FriProof | None = None
    version: int = FORMAT_VERSION
    logup_nonce: int = 0
    commits: Commitments | None = None       # the commitments section (format 6)


# ------------------------------------------------------------------ writer

def _put_array(out: bytearray, a: np.ndarray, ndim: int, name: str) -> None:
    a = np.asarray(a)
    if a.ndim != ndim:
        raise ValueError(f"{name}: expected {ndim} dimensions, got shape {a.shape}")
    if a.dtype != np.uint32:
        raise TypeError(f"{name}: expected uint32, got {a.dtype}")
    out += struct.pack("<B", ndim)
    out += struct.pack(f"<{ndim}I", *a.shape)
    out += np.ascontiguousarray(a, dtype="<u4").tobytes()


def encode(proof: Proof) -> bytes:
    """Serialise a proof (deterministic: equal proofs give equal bytes)."""
    p = proof.params
    if proof.fri is None:
        raise ValueError("a version-3 proof needs its FRI section (Proof.fri)")
    if proof.commits is None:
        raise ValueError("a version-6 proof needs its commitments section (Proof.commits)")
    out = bytearray(MAGIC)
    out += struct.pack("<HH", proof.version, 0)
    out += struct.pack("<BBBBHBBBB", p.log_blowup, p.pow_bits, p.log_final_poly_len,
                       p.logup_pow_bits, p.num_queries, p.deep_pow_bits, p.commit_pow_bits,
                       p.log_fri_arity, p.log_cap)
    out += struct.pack("<H", len(proof.tables))
    out += struct.pack("<I", proof.logup_nonce)
    for t in proof.tables:
        sec = encode_section(t)
        out += struct.pack("<I", len(sec))
        out += sec
    out += encode_commitments(proof.commits)
    out += encode_fri(proof.fri)
    return bytes(out)


def encode_section(t: TableProof) -> bytes:
    """One table's section (the bytes after its section_len)."""
    sec = bytearray(struct.pack("<B", t.log_n))
    for name, nd in _TABLE_ARRAYS:
        _put_array(sec, getattr(t, name), nd, name)
    sec += struct.pack("<II", t.zeta_nonce, t.deep_nonce)
    for name, nd in _QUERY_ARRAYS:
        _put_array(sec, getattr(t, name), nd, name)
    return bytes(sec)


def encode_commitments(c: Commitments) -> bytes:
    """The commitments section (after the last table section, before the FRI section)."""
    out = bytearray()
    for name, nd in _COMMIT_ARRAYS:
        _put_array(out, getattr(c, name), nd, name)
    return bytes(out)


def encode_fri(f: FriProof) -> bytes:
    """The FRI section (the proof's last bytes)."""
    r = len(f.caps)
    if not (len(f.values) == len(f.nodes) == len(np.asarray(f.fold_nonces)) == r) or r > 255:
        raise ValueError(f"FRI section: {r} caps, {len(f.values)} value arrays, "
                         f"{len(f.nodes)} node arrays, {len(np.asarray(f.fold_nonces))} "
                         "fold nonces (must agree, at most 255)")
    out = bytearray(struct.pack("<IB", f.mu_nonce, r))
    for c in f.caps:
        _put_array(out, c, 2, "fri_cap")
    _put_array(out, np.asarray(f.fold_nonces, np.uint32), 1, "fold_nonces")
    _put_array(out, f.final_poly, 2, "final_poly")
    out += struct.pack("<I", f.pow_nonce)
    for v, n in zip(f.values, f.nodes):
        _put_array(out, v, 2, "fri_values")
        _put_array(out, n, 2, "fri_nodes")
    return bytes(out)


# ------------------------------------------------------------------ reader

class _Reader:
    def __init__(self, data: bytes, what: str = "proof"):
        self.data = memoryview(data)
        self.pos = 0
        self.what = what

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def take(self, n: int) -> memoryview:
        if n < 0 or n > self.remaining():
            raise ShapeError(f"truncated {self.what}: need {n} bytes at offset {self.pos}, "
                             f"{self.remaining()} left")
        v = self.data[self.pos:self.pos + n]
        self.pos += n
        return v

    def uint(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.take(size))[0]

    def array(self, ndim: int, name: str) -> np.ndarray:
        got = self.uint("<B")
        if got != ndim:
            raise ShapeError(f"{self.what}: {name} has {got} dimensions, expected {ndim}")
        dims = [self.uint("<I") for _ in range(ndim)]
        count = 1
        for d in dims:
            if d > _MAX_DIM:
                raise ShapeError(f"{self.what}: {name} dimension {d} is out of bounds")
            count *= d
        if count * 4 > self.remaining():
            raise ShapeError(f"truncated {self.what}: {name} needs {count * 4} bytes, "
                             f"{self.remaining()} left")
        a = np.frombuffer(self.take(count * 4), dtype="<u4").astype(np.uint32).reshape(dims)
        if a.size and int(a.max()) >= P:
            raise ShapeError(f"{self.what}: {name} holds a value >= p")
        return a


def decode(data: bytes) -> Proof:
    """Parse and bounds-check proof bytes; raises ShapeError on anything malformed."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ShapeError(f"proof must be bytes, got {type(data).__name__}")
    r = _Reader(bytes(data))
    if bytes(r.take(4)) != MAGIC:
        raise ShapeError("not a Steadfast proof (bad magic)")
    version, reserved = r.uint("<H"), r.uint("<H")
    if version != FORMAT_VERSION:
        raise ShapeError(f"unsupported proof version {version} (this verifier reads {FORMAT_VERSION})")
    if reserved:
        raise ShapeError("reserved header field is not zero")
    lb, pw, lf, lpw, nq, dpw, cpw, lar, lcap = (
        r.uint("<B"), r.uint("<B"), r.uint("<B"), r.uint("<B"), r.uint("<H"), r.uint("<B"),
        r.uint("<B"), r.uint("<B"), r.uint("<B"))
    params = Params(log_blowup=lb, num_queries=nq, pow_bits=pw, log_final_poly_len=lf,
                    logup_pow_bits=lpw, deep_pow_bits=dpw, commit_pow_bits=cpw,
                    log_fri_arity=lar, log_cap=lcap)
    try:
        params.validate()
    except ValueError as e:
        raise ShapeError(f"bad parameters: {e}") from None
    ntables = r.uint("<H")
    if ntables == 0:
        raise ShapeError("a proof needs at least one table")
    logup_nonce = r.uint("<I")
    tables = []
    for ti in range(ntables):
        size = r.uint("<I")
        tables.append(decode_section(bytes(r.take(size)), ti, params))
    commits = decode_commitments(r, tables, params)
    fri = decode_fri(r)
    if r.remaining():
        raise ShapeError(f"{r.remaining()} trailing bytes after the FRI section")
    return Proof(params=params, tables=tables, fri=fri, version=version, logup_nonce=logup_nonce,
                 commits=commits)


def _expect(a: np.ndarray, shape: tuple, what: str, name: str) -> None:
    """Shape check; ``None`` in ``shape`` matches any length."""
    if len(a.shape) != len(shape) or any(s is not None and s != d for s, d in zip(shape, a.shape)):
        want = "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"
        raise ShapeError(f"{what}: {name} has shape {list(a.shape)}, expected {want}")


def decode_section(raw: bytes, index: int = 0, params: Params | None = None) -> TableProof:
    """Parse one table's section (ShapeError on anything malformed); the result keeps
    ``raw``, the exact bytes it was read from.  With ``params``, the height's range
    against the field's two-adicity and the row count against num_queries are checked
    too.  (The commitments are not in the section: :func:`decode_commitments`.)"""
    what = f"table {index} section"
    sec = _Reader(raw, what)
    kw = {"log_n": sec.uint("<B")}
    for name, nd in _TABLE_ARRAYS:
        kw[name] = sec.array(nd, name)
    kw["zeta_nonce"] = sec.uint("<I")
    kw["deep_nonce"] = sec.uint("<I")
    for name, nd in _QUERY_ARRAYS:
        kw[name] = sec.array(nd, name)
    if sec.remaining():
        raise ShapeError(f"{what} has {sec.remaining()} trailing bytes")
    tp = TableProof(**kw)
    tp.raw = raw
    _check_section(tp, what, params)
    return tp


def _check_section(t: TableProof, what: str, params: Params | None) -> None:
    if not 1 <= t.log_n <= _MAX_LOG_N:
        raise ShapeError(f"{what}: log_n {t.log_n} is out of range [1, {_MAX_LOG_N}]")
    if params is not None and t.log_n + params.log_blowup > _TWO_ADICITY:
        raise ShapeError(f"{what}: log_n {t.log_n} with log_blowup {params.log_blowup} "
                         f"exceeds the field's two-adicity {_TWO_ADICITY}")
    if t.terminal.shape not in ((4,), (0,)):
        raise ShapeError(f"{what}: terminal has shape {list(t.terminal.shape)}, expected [4] "
                         "(with aux) or [0]")
    has_aux = t.has_aux
    for name in ("ood_main", "ood_main_next", "ood_aux", "ood_aux_next", "ood_parts"):
        _expect(getattr(t, name), (None, 4), what, name)
    d = t.main_rows.shape[0]
    if d == 0 or (params is not None and d > params.num_queries):
        raise ShapeError(f"{what}: {d} opened rows (expected 1.."
                         f"{'num_queries' if params is None else params.num_queries})")
    _expect(t.main_rows, (d, None), what, "main_rows")
    _expect(t.parts_rows, (d, None), what, "parts_rows")
    _expect(t.aux_rows, ((d, None) if has_aux else (0, 0)), what, "aux_rows")


def commitment_cap_heights(params: Params, log_ns, has_aux) -> tuple:
    """(c, c_aux): the cap heights of the main / parts trees and of the aux tree, c =
    min(log_cap, min over the participants of log_n + log_blowup); c_aux is None when no
    table has aux (no aux tree)."""
    hs = [int(ln) + params.log_blowup for ln in log_ns]
    ha = [h for h, a in zip(hs, has_aux) if a]
    c = min(params.log_cap, min(hs))
    return c, (min(params.log_cap, min(ha)) if ha else None)


def check_commitments(c: Commitments, params: Params, log_ns, has_aux,
                      what: str = "commitments section") -> None:
    """The commitments section's shapes that follow from the parameters and the tables'
    heights and aux flags (in table order): the three caps [2^c, 8] (aux: [0, 8] iff no
    table has aux), the node arrays [*, 8] (aux_nodes [0, 8] without an aux tree).
    ShapeError otherwise; the node counts need the queries (:func:`verifier.join.verify_join`)."""
    if not isinstance(c, Commitments):
        raise ShapeError(f"{what}: missing (got {type(c).__name__})")
    cm, ca = commitment_cap_heights(params, log_ns, has_aux)
    for name, _ in _COMMIT_ARRAYS:
        a = np.asarray(getattr(c, name))
        if a.ndim != 2:
            raise ShapeError(f"{what}: {name} has shape {list(a.shape)}, expected 2 dimensions")
    _expect(c.main_cap, (1 << cm, 8), what, "main_cap")
    _expect(c.parts_cap, (1 << cm, 8), what, "parts_cap")
    if ca is None:
        if np.shape(c.aux_cap)[0]:
            raise ShapeError(f"{what}: aux_cap has shape {list(np.shape(c.aux_cap))} but no "
                             "table has aux (expected [0, 8])")
        _expect(c.aux_cap, (0, 8), what, "aux_cap")
        _expect(c.aux_nodes, (0, 8), what, "aux_nodes")
    else:
        _expect(c.aux_cap, (1 << ca, 8), what, "aux_cap")
    for name in ("main_nodes", "aux_nodes", "parts_nodes"):
        _expect(getattr(c, name), (None, 8), what, name)


def decode_commitments(r: "_Reader", tables, params: Params) -> Commitments:
    """Parse the commitments section from ``r`` (at its start) and check its shapes
    against the decoded table sections (:func:`check_commitments`)."""
    what = "commitments section"
    kw = {name: r.array(nd, name) for name, nd in _COMMIT_ARRAYS}
    c = Commitments(**kw)
    check_commitments(c, params, [t.log_n for t in tables], [t.has_aux for t in tables], what)
    return c


def decode_fri(r: "_Reader") -> FriProof:
    """Parse the FRI section from ``r`` (at its start).  Checks the EF / digest axes and
    that every per-layer list has r entries; the layer caps, L and the counts are checked
    by the verifier, which knows the layer heights and the queries."""
    what = "FRI section"
    mu_nonce = r.uint("<I")
    layers = r.uint("<B")
    caps = [r.array(2, "fri_cap") for _ in range(layers)]
    for c in caps:
        _expect(c, (None, 8), what, "fri_cap")
    fold_nonces = r.array(1, "fold_nonces")
    _expect(fold_nonces, (layers,), what, "fold_nonces")
    final_poly = r.array(2, "final_poly")
    _expect(final_poly, (None, 4), what, "final_poly")
    L = final_poly.shape[0]
    if L == 0 or L & (L - 1):
        raise ShapeError(f"{what}: final_poly has {L} coefficients (expected a power of two)")
    pow_nonce = r.uint("<I")
    values, nodes = [], []
    for _ in range(layers):
        v = r.array(2, "fri_values")
        _expect(v, (None, 4), what, "fri_values")
        n = r.array(2, "fri_nodes")
        _expect(n, (None, 8), what, "fri_nodes")
        values.append(v)
        nodes.append(n)
    return FriProof(caps, fold_nonces, final_poly, pow_nonce, values, nodes, mu_nonce)


# ------------------------------------------------------------------ JSON rendering

def _jsonable(v):
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    return v


def to_json(proof: Proof | bytes, indent: int | None = 1) -> str:
    """A JSON rendering for debugging (not a wire format)."""
    if not isinstance(proof, Proof):
        proof = decode(proof)
    tables = [{f.name: _jsonable(getattr(t, f.name)) for f in fields(t) if f.name != "raw"}
              for t in proof.tables]
    commits = None
    if proof.commits is not None:
        commits = {f.name: _jsonable(getattr(proof.commits, f.name))
                   for f in fields(proof.commits)}
    fri = None
    if proof.fri is not None:
        fri = {f.name: _jsonable(getattr(proof.fri, f.name)) for f in fields(proof.fri)}
        fri["num_layers"] = proof.fri.num_layers
    doc = {"magic": MAGIC.decode(), "version": proof.version,
           "params": {f.name: getattr(proof.params, f.name) for f in fields(proof.params)},
           "logup_nonce": proof.logup_nonce, "tables": tables, "commits": commits, "fri": fri}
    return json.dumps(doc, indent=indent)
