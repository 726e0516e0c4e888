"""The proof format: versioned, deterministic binary, and a JSON rendering for debugging.

Layout (all integers little-endian; "array" = ndim:u8, dims:u32 x ndim, then the
elements as u32, every element a canonical field element < p)::

    magic      4 bytes  b"STFK"
    version    u16      FORMAT_VERSION
    reserved   u16      0
    params     log_blowup:u8  pow_bits:u8  log_final_poly_len:u8  logup_pow_bits:u8
               num_queries:u16  deep_pow_bits:u8  commit_pow_bits:u8
    num_tables u16
    logup_nonce u32     proof of work before the LogUp challenges
    per table, in table order:
      section_len  u32   bytes of the section that follows
      log_n        u8
      public_values array[k]        main_root  array[8]
      aux_root      array[0 | 8]    terminal   array[0 | 4]     parts_root array[8]
      ood_main      array[w, 4]     ood_main_next array[0 | w, 4]
      ood_aux       array[4a, 4]    ood_aux_next  array[4a, 4]  ood_parts  array[4P, 4]
      fri_roots     array[r, 8]     final_poly    array[L, 4]
      pow_nonce     u32   (before the queries)
      zeta_nonce    u32   (before z)      deep_nonce u32   (before lambda)
      fold_nonces   array[r]              (one before each FRI folding challenge)
      main_rows  array[q, w]   main_paths  array[q, d, 8]
      aux_rows   array[q, 4a]  aux_paths   array[q, d | 0, 8]
      parts_rows array[q, 4P]  parts_paths array[q, d, 8]
      num_layers u8 (= r), then per FRI layer i: leaves array[q, 8]  paths array[q, d-1-i, 8]

EF values are 4 coefficients (c0..c3) on the last axis.  The reader checks every length
against the remaining bytes before allocating, every element against p, and that no
byte is left over; any failure is a :class:`ShapeError`.  Shapes are checked against
the AIRs afterwards (:mod:`verifier.verify`), still before any hashing.
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field, fields

import numpy as np

from .errors import ShapeError

MAGIC = b"STFK"
FORMAT_VERSION = 2       # 2: grinding before the LogUp, z, lambda and FRI-fold challenges
P = 2013265921
_MAX_DIM = 1 << 24


@dataclass(frozen=True)
class Params:
    """Protocol parameters; recorded in the proof and absorbed first."""
    log_blowup: int = 1
    num_queries: int = 100
    pow_bits: int = 16
    log_final_poly_len: int = 2
    logup_pow_bits: int = 16     # grinding before the LogUp challenges (beta, gamma)
    deep_pow_bits: int = 12      # grinding before each table's DEEP batching challenge lambda
    commit_pow_bits: int = 8     # grinding before z and before each FRI folding challenge

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

    def query_bits(self) -> int:
        """The FRI query term alone: log_blowup * num_queries + pow_bits.  The proof's
        security figure is lower: :func:`verifier.security.proof_security`."""
        return self.log_blowup * self.num_queries + self.pow_bits


_TABLE_ARRAYS = (
    ("public_values", 1), ("main_root", 1), ("aux_root", 1), ("terminal", 1),
    ("parts_root", 1), ("ood_main", 2), ("ood_main_next", 2), ("ood_aux", 2),
    ("ood_aux_next", 2), ("ood_parts", 2), ("fri_roots", 2), ("final_poly", 2),
)
_QUERY_ARRAYS = (
    ("main_rows", 2), ("main_paths", 3), ("aux_rows", 2), ("aux_paths", 3),
    ("parts_rows", 2), ("parts_paths", 3),
)


@dataclass
class TableProof:
    """One table's section.  All arrays are uint32 (see the module docstring)."""
    log_n: int
    public_values: np.ndarray
    main_root: np.ndarray
    aux_root: np.ndarray
    terminal: np.ndarray
    parts_root: np.ndarray
    ood_main: np.ndarray
    ood_main_next: np.ndarray
    ood_aux: np.ndarray
    ood_aux_next: np.ndarray
    ood_parts: np.ndarray
    fri_roots: np.ndarray
    final_poly: np.ndarray
    pow_nonce: int
    main_rows: np.ndarray
    main_paths: np.ndarray
    aux_rows: np.ndarray
    aux_paths: np.ndarray
    parts_rows: np.ndarray
    parts_paths: np.ndarray
    fri_leaves: list = field(default_factory=list)
    fri_paths: list = field(default_factory=list)
    zeta_nonce: int = 0
    deep_nonce: int = 0
    fold_nonces: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint32))
    raw: bytes = field(default=b"", repr=False, compare=False)   # decode: the section's bytes


@dataclass
class Proof:
    params: Params
    tables: list
    version: int = FORMAT_VERSION
    logup_nonce: int = 0


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
    out = bytearray(MAGIC)
    out += struct.pack("<HH", proof.version, 0)
    out += struct.pack("<BBBBHBB", p.log_blowup, p.pow_bits, p.log_final_poly_len,
                       p.logup_pow_bits, p.num_queries, p.deep_pow_bits, p.commit_pow_bits)
    out += struct.pack("<H", len(proof.tables))
    out += struct.pack("<I", proof.logup_nonce)
    for t in proof.tables:
        sec = encode_section(t)
        out += struct.pack("<I", len(sec))
        out += sec
    return bytes(out)


def encode_section(t: TableProof) -> bytes:
    """One table's section (the bytes after its section_len)."""
    sec = bytearray(struct.pack("<B", t.log_n))
    for name, nd in _TABLE_ARRAYS:
        _put_array(sec, getattr(t, name), nd, name)
    sec += struct.pack("<III", t.pow_nonce, t.zeta_nonce, t.deep_nonce)
    _put_array(sec, np.asarray(t.fold_nonces, np.uint32), 1, "fold_nonces")
    for name, nd in _QUERY_ARRAYS:
        _put_array(sec, getattr(t, name), nd, name)
    if len(t.fri_leaves) != len(t.fri_paths):
        raise ValueError("fri_leaves and fri_paths differ in length")
    sec += struct.pack("<B", len(t.fri_leaves))
    for leaves, paths in zip(t.fri_leaves, t.fri_paths):
        _put_array(sec, leaves, 2, "fri_leaves")
        _put_array(sec, paths, 3, "fri_paths")
    return bytes(sec)


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
    lb, pw, lf, lpw, nq, dpw, cpw = (r.uint("<B"), r.uint("<B"), r.uint("<B"), r.uint("<B"),
                                     r.uint("<H"), r.uint("<B"), r.uint("<B"))
    params = Params(log_blowup=lb, num_queries=nq, pow_bits=pw, log_final_poly_len=lf,
                    logup_pow_bits=lpw, deep_pow_bits=dpw, commit_pow_bits=cpw)
    try:
        params.validate()
    except ValueError as e:
        raise ShapeError(f"bad parameters: {e}") from None
    ntables = r.uint("<H")
    logup_nonce = r.uint("<I")
    tables = []
    for ti in range(ntables):
        size = r.uint("<I")
        tables.append(decode_section(bytes(r.take(size)), ti))
    if r.remaining():
        raise ShapeError(f"{r.remaining()} trailing bytes after the last table")
    return Proof(params=params, tables=tables, version=version, logup_nonce=logup_nonce)


def decode_section(raw: bytes, index: int = 0) -> TableProof:
    """Parse one table's section (ShapeError on anything malformed); the result keeps
    ``raw``, the exact bytes it was read from."""
    sec = _Reader(raw, f"table {index} section")
    kw = {"log_n": sec.uint("<B")}
    for name, nd in _TABLE_ARRAYS:
        kw[name] = sec.array(nd, name)
    kw["pow_nonce"] = sec.uint("<I")
    kw["zeta_nonce"] = sec.uint("<I")
    kw["deep_nonce"] = sec.uint("<I")
    kw["fold_nonces"] = sec.array(1, "fold_nonces")
    for name, nd in _QUERY_ARRAYS:
        kw[name] = sec.array(nd, name)
    layers = sec.uint("<B")
    kw["fri_leaves"], kw["fri_paths"] = [], []
    for _ in range(layers):
        kw["fri_leaves"].append(sec.array(2, "fri_leaves"))
        kw["fri_paths"].append(sec.array(3, "fri_paths"))
    if sec.remaining():
        raise ShapeError(f"table {index} section has {sec.remaining()} trailing bytes")
    tp = TableProof(**kw)
    tp.raw = raw
    return tp


# ------------------------------------------------------------------ JSON rendering

def to_json(proof: Proof | bytes, indent: int | None = 1) -> str:
    """A JSON rendering for debugging (not a wire format)."""
    if not isinstance(proof, Proof):
        proof = decode(proof)
    tables = []
    for t in proof.tables:
        d = {}
        for f in fields(t):
            if f.name == "raw":
                continue
            v = getattr(t, f.name)
            if isinstance(v, np.ndarray):
                d[f.name] = v.tolist()
            elif isinstance(v, list):
                d[f.name] = [x.tolist() for x in v]
            else:
                d[f.name] = v
        tables.append(d)
    doc = {"magic": MAGIC.decode(), "version": proof.version,
           "params": {f.name: getattr(proof.params, f.name) for f in fields(proof.params)},
           "logup_nonce": proof.logup_nonce, "tables": tables}
    return json.dumps(doc, indent=indent)
