"""Fuzz the library verifier: N mutated copies of one honest block proof through
``steadfast.prover.api.verify`` (docs/benchmarks.md, "Verifier fuzzing").

    PYTHONPATH=. python bench/fuzz_verify.py N [--seed S] [--block PATH] [--json]
                                               [--case I] [--save-dir DIR]

One honest proof of the block (default examples/block.json, default parameters) is made in
a subprocess (so that this process's peak RSS is the verifier's own) and cached in the
temporary directory under a key of the code, the block and the parameters; the honest
proof must verify before any mutation is tried.  Each case ``i`` is drawn from its own
generator seeded with (seed, i) -- ``--case I`` replays one case with its full traceback --
and mutates either the whole serialized block proof (b"STBP" header, ROM, length, STARK
proof) or only the inner STARK proof (wrapped back into a BlockProof with its ROM):

* bit flips (one, or several: scattered or a burst in one field);
* u32 overwrites with 0, p-1, p, p+1, 2^31, 2^32-1 at an element's own offset, at a
  4-byte-aligned offset of the buffer, and at an arbitrary (unaligned) offset;
* header fields (magic, version, reserved, the parameters, table count, section lengths,
  log_n, array ranks and dimensions, the nonces, the FRI layer count; the block proof's own
  header) set to boundary values;
* truncations (random lengths, 0, len-1, at field boundaries), extensions (random bytes,
  zeros, a copy of a table section), insertions/deletions of a few bytes;
* two tables' sections swapped, or one table's section over another;
* an opened row duplicated (every opened matrix's row copied over another row, or one array's);
* structure-aware re-encodings (decode with the library, change a parameter, a table's
  height, one array's shape (a table's or the FRI section's), the FRI layer list, the table
  list or a nonce, encode again):
  lengths stay consistent, so these get past the decoder to the shape checks and beyond;
* ROM rows changed (dropped, duplicated, appended, reordered, a cell or opcode changed)
  with the block proof's row count and length rewritten to match.

Positions are biased towards the small areas that matter most: the header, the per-table
headers (section lengths, ranks, dimensions) and the caps / public values / OOD values /
FRI caps / final polynomial get most of the draws, the row and multiproof arrays the rest.
A draw that leaves the bytes unchanged is re-drawn.

Outcomes: **accepted** (verify returned: a forged proof; the bytes are saved to
``--save-dir`` for reproduction), **typed** rejection (a
``steadfast.verifier.errors.VerificationError`` subclass: everything ``verify`` documents),
**untyped** error (anything else, including a case past ``--hard-timeout``; the mutation
and the last traceback line are printed).  Cases slower than ``--slow`` seconds and cases
that raise the process's peak RSS by more than ``--max-rss-growth`` MiB are reported (the
latter also fail the run).  The last line is exactly
``fuzz: N mutated, A accepted, U untyped errors``; the exit code is non-zero when A > 0,
U > 0 or a case allocated too much.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

P = 2013265921
U32_VALUES = (0, P - 1, P, P + 1, 1 << 31, (1 << 32) - 1)
DEFAULT_BLOCK = os.path.join(ROOT, "examples", "block.json")
_CODE_DIRS = ("prover", "verifier", "air", "vm", "kernels")

# Categories of array data by name (anything else is "small": public values, caps, OOD
# values, FRI caps, final polynomial, nonces); "paths" are the Merkle multiproof nodes.
_ROWS = ("main_rows", "aux_rows", "parts_rows", "fri_values")
_PATHS = ("main_nodes", "aux_nodes", "parts_nodes", "fri_nodes")


def _array_cat(name: str) -> str:
    return "rows" if name in _ROWS else "paths" if name in _PATHS else "small"


# Where mutations land: category weights (the whole block proof adds its own header and ROM).
_PROOF_WEIGHTS = {"header": 0.14, "table_header": 0.28, "small": 0.30, "rows": 0.14,
                  "paths": 0.14}
_BP_WEIGHTS = {"bp_header": 0.10, "rom": 0.08, **{k: 0.82 * w for k, w in _PROOF_WEIGHTS.items()}}
_KIND_WEIGHTS = {"bitflip": 0.16, "multibit": 0.09, "u32": 0.18, "header": 0.16,
                 "truncate": 0.06, "extend": 0.05, "splice": 0.05, "swap_tables": 0.05,
                 "dup_query": 0.08, "reencode": 0.12, "rom": 0.04}


# --------------------------------------------------------------------------- layout

@dataclass
class Field:
    """A byte range of the honest bytes: ``unit`` the width of one element (1, 2, 4; 0 for
    opaque bytes such as the magic)."""
    start: int
    end: int
    cat: str
    name: str
    unit: int


@dataclass
class Layout:
    fields: list = field(default_factory=list)
    sections: list = field(default_factory=list)      # (start of section_len, end) per table
    queries: list = field(default_factory=list)       # per table: [(name, data start, shape)]

    def by_cat(self) -> dict:
        out: dict = {}
        for f in self.fields:
            out.setdefault(f.cat, []).append(f)
        return out

    def shifted(self, off: int) -> "Layout":
        return Layout([Field(f.start + off, f.end + off, f.cat, f.name, f.unit) for f in self.fields],
                      [(a + off, b + off) for a, b in self.sections],
                      [[(n, s + off, sh) for n, s, sh in q] for q in self.queries])


def proof_layout(data: bytes) -> Layout:
    """The layout of honest STARK proof bytes, recorded from the library's own decoder
    (``verifier.proof_format.decode`` run with a reader that notes the offset of every
    field it reads), so that it follows the format as it changes.  Fields read at the top
    level are "header", a table section's scalars, section lengths and array ranks and
    dimensions "table_header", array elements by name ("rows", "paths", "small").
    Checked to tile the bytes exactly."""
    from steadfast.verifier import proof_format as pf

    lay = Layout()
    state = {"last_take": 0, "quiet": 0, "table": -1, "seen": Counter()}
    base_reader = pf._Reader

    class Rec(base_reader):
        def __init__(self, buf, what="proof"):
            super().__init__(buf, what)
            self.base = 0
            self.top = what == "proof"
            if not self.top:                 # a table section, just taken from the parent
                self.base = state["last_take"]
                state["table"] += 1
                t = state["table"]
                lay.fields.pop()                 # the parent's take of the whole section
                slen = lay.fields[-1]
                slen.cat, slen.name = "table_header", f"t{t}.section_len"
                lay.sections.append((slen.start, self.base + len(buf)))
                lay.queries.append([])

        def _name(self, what):
            return what if self.top else f"t{state['table']}.{what}"

        def take(self, n):
            start = self.base + self.pos
            v = super().take(n)
            state["last_take"] = start
            if not state["quiet"] and n:
                lay.fields.append(Field(start, start + n, "header" if self.top else "table_header",
                                        "magic" if start == 0 else self._name(f"bytes@{start}"), 0))
            return v

        def uint(self, fmt):
            start = self.base + self.pos
            state["quiet"] += 1
            try:
                v = super().uint(fmt)
            finally:
                state["quiet"] -= 1
            if not state["quiet"]:
                size = struct.calcsize(fmt)
                lay.fields.append(Field(start, start + size, "header" if self.top else "table_header",
                                        self._name(f"u{8 * size}@{start}"), size))
            return v

        def array(self, ndim, name):
            start = self.base + self.pos
            state["quiet"] += 1
            try:
                a = super().array(ndim, name)
            finally:
                state["quiet"] -= 1
            nm = self._name(name)
            k = state["seen"][nm]
            state["seen"][nm] += 1
            if k:
                nm = f"{nm}{k}"
            lay.fields.append(Field(start, start + 1, "table_header", f"{nm}.ndim", 1))
            for d in range(ndim):
                s = start + 1 + 4 * d
                lay.fields.append(Field(s, s + 4, "table_header", f"{nm}.dim{d}", 4))
            s = start + 1 + 4 * ndim
            if a.size:
                lay.fields.append(Field(s, s + 4 * a.size, _array_cat(name), nm, 4))
            if not self.top and _array_cat(name) != "small":
                lay.queries[-1].append((nm, s, tuple(a.shape)))
            return a

    pf._Reader = Rec
    try:
        pf.decode(data)
    finally:
        pf._Reader = base_reader
    pos = 0
    for f in sorted(lay.fields, key=lambda f: f.start):
        if f.start != pos:
            raise ValueError(f"layout: field {f.name} starts at {f.start}, expected {pos}")
        pos = f.end
    if pos != len(data):
        raise ValueError(f"layout covers {pos} of {len(data)} bytes")
    return lay


def block_proof_layout(data: bytes) -> tuple[Layout, int]:
    """Layout of serialized BlockProof bytes; returns it and the inner proof's offset."""
    rows = struct.unpack_from("<I", data, 8)[0]
    lay = Layout([Field(0, 4, "bp_header", "bp.magic", 0), Field(4, 6, "bp_header", "bp.version", 2),
                  Field(6, 8, "bp_header", "bp.reserved", 2),
                  Field(8, 12, "bp_header", "bp.rom_rows", 4),
                  Field(12, 12 + 16 * rows, "rom", "bp.rom", 4)])
    off = 12 + 16 * rows
    lay.fields.append(Field(off, off + 4, "bp_header", "bp.proof_len", 4))
    inner = proof_layout(data[off + 4:]).shifted(off + 4)
    lay.fields += inner.fields
    lay.sections, lay.queries = inner.sections, inner.queries
    return lay, off + 4


# --------------------------------------------------------------------------- mutations

def _pick_field(rng: random.Random, lay: Layout, weights: dict) -> Field:
    cats = lay.by_cat()
    names = [c for c in weights if c in cats]
    cat = rng.choices(names, [weights[c] for c in names])[0]
    return rng.choice(cats[cat])


def _pick_pos(rng: random.Random, lay: Layout, weights: dict) -> tuple[int, Field]:
    f = _pick_field(rng, lay, weights)
    return rng.randrange(f.start, f.end), f


def _boundary_values(width: int, honest: int) -> list[int]:
    top = (1 << (8 * width)) - 1
    vals = {0, 1, 2, top, top - 1, 1 << (8 * width - 1), (1 << (8 * width - 1)) - 1,
            honest + 1, honest - 1, honest * 2, honest // 2}
    if width == 1:
        vals |= {3, 7, 8, 9, 10, 11, 16, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32}
    elif width == 2:
        vals |= {999, 1000, 1001, 4, 5, 6, 99, 101}
    else:
        vals |= {P - 1, P, P + 1, 1 << 20, (1 << 20) + 1, 1 << 24, (1 << 24) + 1, 1 << 26,
                 1 << 30, honest + 4, honest - 4, honest + 16, honest - 16}
    return sorted(v for v in vals if 0 <= v <= top)


def _mutate(rng: random.Random, buf: bytes, lay: Layout, weights: dict, kind: str,
            inner_off: int) -> tuple[bytes, str]:
    """One mutation of ``buf`` (layout ``lay``); returns (bytes, description)."""
    b = bytearray(buf)
    n = len(b)
    if kind == "bitflip":
        pos, f = _pick_pos(rng, lay, weights)
        bit = rng.randrange(8)
        b[pos] ^= 1 << bit
        return bytes(b), f"flip bit {bit} of byte {pos} ({f.name})"
    if kind == "multibit":
        k = rng.randint(2, 12)
        if rng.random() < 0.5:          # scattered over the biased fields
            spots = []
            for _ in range(k):
                pos, f = _pick_pos(rng, lay, weights)
                bit = rng.randrange(8)
                b[pos] ^= 1 << bit
                spots.append(f"{pos}.{bit}({f.name})")
            return bytes(b), f"flip {k} bits: " + " ".join(spots)
        f = _pick_field(rng, lay, weights)   # a burst inside one field
        bits = set()
        for _ in range(k):
            bits.add(rng.randrange(8 * (f.end - f.start)))
        for x in bits:
            b[f.start + x // 8] ^= 1 << (x % 8)
        return bytes(b), f"flip bits {sorted(bits)} of {f.name} at {f.start}"
    if kind == "u32":
        val = rng.choice(U32_VALUES)
        mode = rng.choice(("element", "aligned", "unaligned"))
        if mode == "element":           # at a u32 element of the layout
            cands = None
            for _ in range(20):
                f = _pick_field(rng, lay, weights)
                if f.unit == 4:
                    cands = f
                    break
            if cands is None:
                f = rng.choice([g for g in lay.fields if g.unit == 4])
            else:
                f = cands
            pos = f.start + 4 * rng.randrange((f.end - f.start) // 4)
        else:
            pos, f = _pick_pos(rng, lay, weights)
            pos = max(0, min(pos, n - 4))
            if mode == "aligned":
                pos -= pos % 4
            elif pos % 4 == 0 or rng.random() < 0.3:
                pos = max(0, min(pos + rng.choice((1, 2, 3)), n - 4))
        b[pos:pos + 4] = struct.pack("<I", val)
        return bytes(b), f"u32 {val} at byte {pos} ({mode}, {f.name})"
    if kind == "header":
        cats = lay.by_cat()
        hdr = [f for c in ("header", "table_header", "bp_header") for f in cats.get(c, ())]
        f = rng.choice(hdr)
        if f.unit == 0:                 # a magic: another magic, zeros or one byte changed
            choice = rng.choice((b"STFK", b"STBP", b"\0\0\0\0", b"stfk", None))
            if choice is None:
                pos = rng.randrange(f.start, f.end)
                b[pos] = rng.randrange(256)
            else:
                b[f.start:f.end] = choice
            return bytes(b), f"{f.name} := {bytes(b[f.start:f.end])!r}"
        w = f.end - f.start
        fmt = {1: "<B", 2: "<H", 4: "<I"}[w]
        honest = struct.unpack_from(fmt, b, f.start)[0]
        val = rng.choice(_boundary_values(w, honest))
        struct.pack_into(fmt, b, f.start, val)
        return bytes(b), f"{f.name} := {val} (was {honest})"
    if kind == "truncate":
        r = rng.random()
        if r < 0.15:
            m = 0
        elif r < 0.30:
            m = n - 1
        elif r < 0.65:
            f = rng.choice(lay.fields)      # at or next to a field boundary
            m = max(0, min(n - 1, rng.choice((f.start, f.end)) + rng.randint(-2, 2)))
        else:
            m = rng.randrange(n)
        return bytes(b[:m]), f"truncate to {m} of {n} bytes"
    if kind == "extend":
        r = rng.random()
        if r < 0.4:
            k = rng.randint(1, 64)
            tail = bytes(rng.randrange(256) for _ in range(k))
            what = f"{k} random bytes"
        elif r < 0.8:
            k = rng.choice((1, 2, 3, 4, 8, 16, 4096, rng.randint(1, 1 << 16)))
            tail = bytes(k)
            what = f"{k} zero bytes"
        else:
            a, e = rng.choice(lay.sections)
            tail = bytes(b[a:e])
            what = f"a copy of the table section at {a}"
        return bytes(b) + tail, f"append {what}"
    if kind == "splice":
        pos, f = _pick_pos(rng, lay, weights)
        k = rng.choice((1, 2, 3, 4, 8, 16, 32))
        if rng.random() < 0.5:
            ins = bytes(rng.randrange(256) for _ in range(k))
            return bytes(b[:pos]) + ins + bytes(b[pos:]), f"insert {k} bytes at {pos} ({f.name})"
        return bytes(b[:pos]) + bytes(b[pos + k:]), f"delete {k} bytes at {pos} ({f.name})"
    if kind == "swap_tables":
        secs = lay.sections
        i, j = sorted(rng.sample(range(len(secs)), 2))
        (a0, a1), (c0, c1) = secs[i], secs[j]
        if rng.random() < 0.7:
            out = b[:a0] + b[c0:c1] + b[a1:c0] + b[a0:a1] + b[c1:]
            return bytes(out), f"swap table sections {i} and {j}"
        src, dst = (i, j) if rng.random() < 0.5 else (j, i)
        (s0, s1), (d0, d1) = secs[src], secs[dst]
        out = b[:d0] + b[s0:s1] + b[d1:]
        return bytes(out), f"table {src}'s section copied over table {dst}'s"
    if kind == "dup_query":
        t = rng.randrange(len(lay.queries))
        arrays = [(nm, s, sh) for nm, s, sh in lay.queries[t] if sh and sh[0] > 1]
        if rng.random() < 0.3:
            arrays = [rng.choice(arrays)]
        else:                       # every opened matrix (their rows: one per distinct index)
            arrays = [a for a in arrays if a[0].endswith("_rows")] or arrays[:1]
        q = arrays[0][2][0]
        src, dst = rng.sample(range(q), 2)
        for nm, s, sh in arrays:
            per = 4
            for d in sh[1:]:
                per *= d
            b[s + dst * per:s + (dst + 1) * per] = b[s + src * per:s + (src + 1) * per]
        names = ",".join(nm for nm, _, _ in arrays) if len(arrays) == 1 else "all openings"
        return bytes(b), f"table {t}: query {src} duplicated over query {dst} ({names})"
    if kind == "reencode":
        return _reencode(rng, bytes(b))
    if kind == "rom":
        return _rewrap_rom(rng, bytes(b), inner_off)
    raise ValueError(f"unknown mutation kind {kind!r}")


def _rewrap_rom(rng: random.Random, data: bytes, inner_off: int) -> tuple[bytes, str]:
    """A block-proof mutation that keeps the block-proof framing consistent: change the
    ROM's rows (drop, duplicate, append, reverse, one cell or opcode to another valid
    value, down to one row, up to many rows) and write the header's row count and the
    proof length to match, so the ROM reaches the AIR construction and the digest check."""
    import numpy as np
    rows = struct.unpack_from("<I", data, 8)[0]
    rom = np.frombuffer(data, dtype="<u4", count=4 * rows, offset=12).reshape(rows, 4).copy()
    proof = data[inner_off:]
    op = rng.choice(("drop", "duplicate", "append", "reverse", "cell", "opcode", "one row",
                     "many rows"))
    r = rng.randrange(rows)
    if op == "drop" and rows > 1:
        rom = np.delete(rom, r, axis=0)
    elif op == "duplicate":
        rom = np.insert(rom, r, rom[r], axis=0)
    elif op == "append":
        rom = np.vstack([rom, np.array([[rng.randrange(20), rng.randrange(P), rng.randrange(P),
                                          rng.randrange(P)]], dtype=np.uint32)])
    elif op == "reverse":
        rom = rom[::-1]
    elif op == "cell":
        rom[r, rng.randrange(1, 4)] = rng.choice((0, 1, P - 1, rng.randrange(P)))
    elif op == "opcode":
        rom[r, 0] = rng.randrange(20)       # 19 opcodes: 19 is invalid
    elif op == "one row":
        rom = rom[:1]
    else:                               # up to the format's limit, 2^20 rows
        rom = np.tile(rom, (rng.choice((2, 3, 8, 64, (1 << 20) // rows)), 1))
    out = (data[:8] + struct.pack("<I", len(rom)) + np.ascontiguousarray(rom, dtype="<u4").tobytes()
           + struct.pack("<I", len(proof)) + proof)
    return out, f"ROM re-wrapped: {op} (row {r}; {rows} -> {len(rom)} rows)"


def _reencode(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """A structure-aware mutation: decode the STARK proof with the library, change one
    parameter, height, array shape, FRI layer list, table list or scalar, and encode it
    again -- lengths and ranks stay consistent, so the case gets past the decoder and
    exercises the shape checks and the transcript.  Generic over the dataclass fields, so
    it follows the format as it changes."""
    import dataclasses

    import numpy as np
    from steadfast.verifier import proof_format as pf

    pr = pf.decode(data)
    t = rng.randrange(len(pr.tables))
    tp = pr.tables[t]
    tf = {f.name: getattr(tp, f.name) for f in dataclasses.fields(tp)}
    what = rng.choice(("param", "log_n", "reshape", "reshape", "fri_layers", "tables", "scalar"))
    if what == "param":
        f = rng.choice([f for f in dataclasses.fields(pr.params) if isinstance(getattr(pr.params, f.name), int)])
        old = getattr(pr.params, f.name)
        top = 0xFFFF if f.name == "num_queries" else 0xFF
        val = rng.choice([v for v in {0, 1, 2, old - 1, old + 1, old * 2, old // 2, 8, 9, 10, 11,
                                      30, 31, 999, 1000, 1001, top} if 0 <= v <= top])
        pr.params = dataclasses.replace(pr.params, **{f.name: val})
        desc = f"params.{f.name} := {val} (was {old})"
    elif what == "log_n":
        val = rng.choice((0, 1, 2, tp.log_n - 1, tp.log_n + 1, 16, 24, 25, 26, 27, 255))
        desc = f"table {t} log_n := {val} (was {tp.log_n})"
        tp.log_n = max(0, min(255, val))
    elif what == "reshape":
        ff = {f.name: getattr(pr.fri, f.name) for f in dataclasses.fields(pr.fri)}
        names = ([k for k, v in tf.items() if isinstance(v, np.ndarray)]
                 + [f"fri.{k}" for k, v in ff.items() if isinstance(v, (np.ndarray, list))])
        name = rng.choice(names)
        owner = tp
        if name.startswith("fri."):
            owner, name = pr.fri, name[4:]
            tf = ff
        arr, idx = tf[name], None
        if isinstance(arr, list):
            if not arr:
                return _reencode(rng, data)
            idx = rng.randrange(len(arr))
            arr = arr[idx]
        shape = list(arr.shape)
        ax = rng.randrange(len(shape))
        op = rng.choice(("grow", "shrink", "empty"))
        if op == "grow":
            shape[ax] += rng.choice((1, 1, 2, 7))
        elif op == "shrink" and shape[ax]:
            shape[ax] -= rng.randint(1, shape[ax])
        else:
            shape[ax] = 0
        new = np.array([rng.randrange(P) for _ in range(int(np.prod(shape)))],
                       dtype=np.uint32).reshape(shape)
        keep = tuple(slice(0, min(a, b)) for a, b in zip(arr.shape, shape))
        new[keep] = arr[keep]
        if idx is None:
            setattr(owner, name, new)
        else:
            getattr(owner, name)[idx] = new
        desc = (f"{'FRI' if owner is pr.fri else f'table {t}'} {name}"
                f"{'' if idx is None else f'[{idx}]'} reshaped {tuple(arr.shape)} -> {tuple(shape)}")
    elif what == "fri_layers":
        op = rng.choice(("drop last", "drop first", "repeat last", "swap two"))
        fr = pr.fri
        r = fr.num_layers
        if not r or (op == "swap two" and r < 2):
            return _reencode(rng, data)
        sel = {"drop last": list(range(r - 1)), "drop first": list(range(1, r)),
               "repeat last": list(range(r)) + [r - 1],
               "swap two": [1, 0] + list(range(2, r))}[op]
        fr.caps = [fr.caps[i] for i in sel]
        fr.values = [fr.values[i] for i in sel]
        fr.nodes = [fr.nodes[i] for i in sel]
        fr.fold_nonces = np.asarray(fr.fold_nonces, np.uint32)[sel]
        desc = f"FRI layers: {op}"
    elif what == "tables":
        op = rng.choice(("drop", "duplicate", "reverse", "drop all"))
        if op == "drop":
            del pr.tables[t]
        elif op == "duplicate":
            pr.tables.insert(t, pr.tables[t])
        elif op == "reverse":
            pr.tables.reverse()
        else:
            pr.tables = []
        desc = f"tables: {op}" + (f" table {t}" if op in ("drop", "duplicate") else "")
    else:
        owners = [(tp, k) for k, v in tf.items() if isinstance(v, int) and k != "log_n"]
        owners += [(pr, f.name) for f in dataclasses.fields(pr)
                   if isinstance(getattr(pr, f.name), int) and f.name != "version"]
        owners += [(pr.fri, f.name) for f in dataclasses.fields(pr.fri)
                   if isinstance(getattr(pr.fri, f.name), int)]
        obj, k = rng.choice(owners)
        old = getattr(obj, k)
        val = rng.choice((0, 1, old + 1, old - 1 if old else 2, P - 1, rng.randrange(P)))
        setattr(obj, k, val)
        desc = f"{'table %d ' % t if obj is tp else ''}{k} := {val} (was {old})"
    return pf.encode(pr), "re-encoded: " + desc


def draw_case(seed: int, index: int, honest: dict) -> tuple[str, str, str, bytes]:
    """Case ``index``: (target, kind, description, mutated bytes of the target).  Re-draws
    until the bytes differ from the honest ones."""
    rng = random.Random(f"fuzz_verify:{seed}:{index}")
    kinds = list(_KIND_WEIGHTS)
    for _ in range(1000):
        kind = rng.choices(kinds, [_KIND_WEIGHTS[k] for k in kinds])[0]
        if kind == "rom":
            target = "blockproof"
        elif kind in ("swap_tables", "dup_query", "reencode") or rng.random() < 0.5:
            target = "proof"
        else:
            target = "blockproof"
        if target == "proof":
            buf, lay, w = honest["proof"], honest["proof_layout"], _PROOF_WEIGHTS
        else:
            buf, lay, w = honest["bytes"], honest["bp_layout"], _BP_WEIGHTS
        try:
            data, desc = _mutate(rng, buf, lay, w, kind, honest["inner_off"])
        except (struct.error, OverflowError, ValueError):    # a re-encoding out of range
            continue
        if data != buf:
            return target, kind, desc, data
    raise RuntimeError(f"case {index}: no mutation changed the bytes in 1000 draws")


# --------------------------------------------------------------------------- honest proof

def _code_key(block_bytes: bytes, config: dict) -> str:
    h = hashlib.sha256()
    for d in _CODE_DIRS:
        for dirpath, dirnames, files in os.walk(os.path.join(ROOT, d)):
            dirnames[:] = sorted(x for x in dirnames if x != "__pycache__")
            for fn in sorted(files):
                if fn.endswith(".py"):
                    path = os.path.join(dirpath, fn)
                    h.update(os.path.relpath(path, ROOT).encode())
                    with open(path, "rb") as fh:
                        h.update(fh.read())
    h.update(block_bytes)
    h.update(json.dumps(config, sort_keys=True).encode())
    return h.hexdigest()[:24]


def _prove_to(block_path: str, out: str, config: dict) -> None:
    from steadfast.prover.api import Prover, ProverConfig
    proof = Prover(ProverConfig(backend="host", **config)).prove_block(block_path)
    tmp = f"{out}.{os.getpid()}.tmp"
    proof.save(tmp)
    os.replace(tmp, out)


def honest_proof(block_path: str, config: dict, log=print,
                 in_process: bool = False) -> tuple[bytes, str, bool]:
    """Honest BlockProof bytes (cached; proved on a miss, in a subprocess unless
    ``in_process``) -> (bytes, cache path, whether it came from the cache)."""
    with open(block_path, "rb") as fh:
        block_bytes = fh.read()
    cache_dir = os.path.join(tempfile.gettempdir(), "steadfast_fuzz_verify")
    os.makedirs(cache_dir, exist_ok=True)
    path = os.path.join(cache_dir, _code_key(block_bytes, config) + ".stbp")
    cached = os.path.exists(path)
    if not cached and in_process:
        log(f"proving the honest proof of {block_path} -> {path}")
        _prove_to(block_path, path, config)
    elif not cached:
        log(f"proving the honest proof of {block_path} (subprocess) -> {path}")
        env = dict(os.environ)
        env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
        subprocess.run([sys.executable, os.path.abspath(__file__), "--prove-to", path,
                        "--block", block_path, "--config", json.dumps(config)],
                       check=True, env=env, cwd=ROOT)
    with open(path, "rb") as fh:
        return fh.read(), path, cached


# --------------------------------------------------------------------------- running

class _Hang(Exception):
    pass


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_case(verify, BlockProof, target: str, data: bytes, rom, block, hard_timeout: float,
             verify_kw: dict):
    """Run one case; returns (outcome, error class name or '', last traceback line, tb)."""
    from steadfast.verifier.errors import VerificationError
    use_alarm = (hard_timeout > 0 and threading.current_thread() is threading.main_thread()
                 and signal.getitimer(signal.ITIMER_REAL)[0] == 0)   # never clobber a timer

    def on_alarm(signum, frame):
        raise _Hang(f"no answer within {hard_timeout} s")
    old = signal.signal(signal.SIGALRM, on_alarm) if use_alarm else None
    try:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, hard_timeout)
        obj = BlockProof(rom, data) if target == "proof" else data
        verify(obj, block=block, **verify_kw)
        return "accepted", "", "", ""
    except VerificationError as exc:
        return "typed", type(exc).__name__, "", ""
    except BaseException as exc:            # noqa: BLE001 -- classifying is the point
        if isinstance(exc, KeyboardInterrupt):
            raise
        tb = traceback.format_exc()
        last = f"{type(exc).__name__}: {exc}"
        return "untyped", type(exc).__name__, last, tb
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)


def fuzz(n: int, seed: int = 0, block_path: str = DEFAULT_BLOCK, as_json: bool = False,
         save_dir: str | None = None, slow: float = 5.0, hard_timeout: float = 120.0,
         max_rss_growth_mib: float = 1024.0, config: dict | None = None,
         min_security_bits=None, cases=None, out=None,
         prove_in_process: bool = False) -> tuple[dict, int]:
    """Run the fuzzer; prints the report (last line: the result line) to ``out``; returns
    (summary, exit code)."""
    out = out or sys.stdout

    def log(*a):
        print(*a, file=out, flush=True)

    from steadfast.prover.api import BlockProof, verify
    from steadfast.vm.block import load_block

    config = dict(config or {})
    block = load_block(block_path)
    verify_kw = {} if min_security_bits is None else {"min_security_bits": min_security_bits}
    for attempt in (0, 1):              # the honest proof must pass (a stale cache: re-prove)
        raw, cache_path, cached = honest_proof(block_path, config, log, prove_in_process)
        honest = BlockProof.from_bytes(raw)
        t = time.perf_counter()
        try:
            verify(raw, block=block, **verify_kw)
            verify(honest, block=block, **verify_kw)
            break
        except Exception as exc:
            os.remove(cache_path)
            if attempt:
                raise RuntimeError(f"the honest proof of {block_path} does not verify: "
                                   f"{type(exc).__name__}: {exc}") from exc
            log(f"the {'cached' if cached else 'new'} honest proof does not verify "
                f"({type(exc).__name__}: {exc}); proving again")
    honest_s = time.perf_counter() - t
    bp_layout, inner_off = block_proof_layout(raw)
    h = {"bytes": raw, "proof": honest.proof, "bp_layout": bp_layout,
         "proof_layout": proof_layout(honest.proof), "inner_off": inner_off}
    log(f"honest proof: {len(raw):,} bytes ({'cached' if cached else 'new'}: {cache_path}); "
        f"verify {honest_s / 2:.3f} s; seed {seed}")
    save_dir = save_dir or os.path.join(tempfile.gettempdir(), "steadfast_fuzz_verify", "found")
    indices = list(cases) if cases is not None else list(range(n))
    outcomes, kinds, errors = Counter(), Counter(), Counter()
    accepted, untyped, slow_cases, hogs = [], [], [], []
    rss0 = peak = _peak_rss()
    times = []
    t_all = time.perf_counter()
    for i in indices:
        target, kind, desc, data = draw_case(seed, i, h)
        before = _peak_rss()
        t0 = time.perf_counter()
        outcome, err, last, tb = run_case(verify, BlockProof, target, data, honest.rom, block,
                                          hard_timeout, verify_kw)
        dt = time.perf_counter() - t0
        after = _peak_rss()
        times.append(dt)
        outcomes[outcome] += 1
        kinds[(kind, err or outcome)] += 1
        errors[err or outcome] += 1
        what = f"case {i} [{target}/{kind}] {desc}"
        if outcome == "accepted":
            os.makedirs(save_dir, exist_ok=True)
            blob = BlockProof(honest.rom, data).to_bytes() if target == "proof" else data
            path = os.path.join(save_dir, f"accepted_seed{seed}_case{i}.stbp")
            with open(path, "wb") as fh:
                fh.write(blob)
            accepted.append({"case": i, "target": target, "kind": kind, "mutation": desc,
                             "saved": path})
            log(f"ACCEPTED {what} -> saved {path}")
        elif outcome == "untyped":
            untyped.append({"case": i, "target": target, "kind": kind, "mutation": desc,
                            "error": last})
            log(f"UNTYPED {what}: {last}")
            if cases is not None:
                log(tb)
        if dt > slow:
            slow_cases.append({"case": i, "kind": kind, "mutation": desc, "seconds": round(dt, 2)})
            log(f"SLOW {what}: {dt:.1f} s")
        if after - before > max_rss_growth_mib * 2**20:
            hogs.append({"case": i, "kind": kind, "mutation": desc,
                         "peak_growth_mib": round((after - before) / 2**20, 1)})
            log(f"MEMORY {what}: peak RSS grew by {(after - before) / 2**20:.0f} MiB")
        peak = max(peak, after)
    wall = time.perf_counter() - t_all
    m = len(indices)
    summary = {
        "n": m, "seed": seed, "block": os.path.relpath(block_path, ROOT),
        "proof_bytes": len(raw), "honest_verify_s": round(honest_s / 2, 4),
        "accepted": len(accepted), "untyped": len(untyped), "typed": outcomes["typed"],
        "wall_s": round(wall, 1), "mean_case_s": round(wall / max(m, 1), 4),
        "max_case_s": round(max(times, default=0.0), 3),
        "peak_rss_mib": round(peak / 2**20, 1),
        "peak_rss_growth_mib": round((peak - rss0) / 2**20, 1),
        "errors": dict(sorted(errors.items())),
        "kinds": {f"{k}/{o}": c for (k, o), c in sorted(kinds.items())},
        "accepted_cases": accepted, "untyped_cases": untyped, "slow_cases": slow_cases,
        "memory_cases": hogs,
    }
    if as_json:
        log(json.dumps(summary, indent=1))
    else:
        log(f"{m} cases in {wall:.1f} s ({wall / max(m, 1) * 1e3:.1f} ms mean, "
            f"{summary['max_case_s']:.2f} s max); peak RSS {summary['peak_rss_mib']:.0f} MiB "
            f"(+{summary['peak_rss_growth_mib']:.0f} MiB while fuzzing); "
            f"{len(slow_cases)} over {slow:g} s")
        log("by mutation: " + ", ".join(
            f"{k} {sum(c for (kk, _), c in kinds.items() if kk == k)}" for k in _KIND_WEIGHTS))
        log("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(errors.items())))
    log(f"fuzz: {m} mutated, {len(accepted)} accepted, {len(untyped)} untyped errors")
    return summary, (1 if accepted or untyped or hogs else 0)


def main(argv=None, out=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int, nargs="?", default=1000, help="number of mutated cases")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--block", default=DEFAULT_BLOCK, help="block JSON (default examples/block.json)")
    ap.add_argument("--json", action="store_true", help="the summary as JSON")
    ap.add_argument("--case", type=int, action="append",
                    help="replay only this case (repeatable; prints full tracebacks)")
    ap.add_argument("--save-dir", default=None, help="where accepted proofs are written")
    ap.add_argument("--slow", type=float, default=5.0, help="report cases slower than this (s)")
    ap.add_argument("--hard-timeout", type=float, default=120.0,
                    help="a case still running after this many seconds is an untyped error")
    ap.add_argument("--max-rss-growth", type=float, default=1024.0,
                    help="MiB a case may raise the peak RSS by before it fails the run")
    ap.add_argument("--min-security-bits", type=int, default=None,
                    help="passed to verify (default: the library's default)")
    ap.add_argument("--queries", type=int, default=None, help="honest proof: num_queries")
    ap.add_argument("--pow-bits", type=int, default=None, help="honest proof: pow_bits")
    ap.add_argument("--prove-in-process", action="store_true",
                    help="prove the honest proof in this process (faster when the kernels are "
                         "loaded; the peak RSS then includes proving)")
    ap.add_argument("--prove-to", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--config", default="{}", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.prove_to:
        _prove_to(args.block, args.prove_to, json.loads(args.config))
        return 0
    if args.n < 0:
        ap.error("N must be >= 0")
    config = {}
    if args.queries is not None:
        config["num_queries"] = args.queries
    if args.pow_bits is not None:
        config["pow_bits"] = args.pow_bits
    _, rc = fuzz(args.n, args.seed, os.path.abspath(args.block), args.json, args.save_dir,
                 args.slow, args.hard_timeout, args.max_rss_growth, config,
                 args.min_security_bits, args.case, out, args.prove_in_process)
    return rc


if __name__ == "__main__":
    sys.exit(main())
