"""The mutation catalogue of the verifier fuzzer (bench/fuzz_verify.py): the field layout
of an honest block proof (block format 2: ``TxBlockProof``, b"STB2"), recorded from the
library's own decoder, and every mutation a case draws -- of the block-proof bytes, of the
inner STARK proof, or of the statement (the block the proof is checked against).
:func:`draw_case` is the entry point; the catalogue is described in fuzz_verify's
docstring and docs/benchmarks.md ("Verifier fuzzing")."""
from __future__ import annotations

import dataclasses
import random
import struct
from collections import Counter
from dataclasses import dataclass, field

P = 2013265921
U32_VALUES = (0, P - 1, P, P + 1, 1 << 31, (1 << 32) - 1)

# Categories of array data by name (anything else is "small": public values, caps, OOD
# values, FRI caps, final polynomial, nonces); "paths" are the Merkle multiproof nodes.
_ROWS = ("main_rows", "aux_rows", "parts_rows", "fri_values")
_PATHS = ("main_nodes", "aux_nodes", "parts_nodes", "fri_nodes")


def _array_cat(name: str) -> str:
    return "rows" if name in _ROWS else "paths" if name in _PATHS else "small"


# Where mutations land: category weights (the whole block proof adds its own header and ROM).
_PROOF_WEIGHTS = {"header": 0.14, "table_header": 0.28, "small": 0.30, "rows": 0.14,
                  "paths": 0.14}
_BP_WEIGHTS = {"bp_header": 0.18, **{k: 0.82 * w for k, w in _PROOF_WEIGHTS.items()}}
_KIND_WEIGHTS = {"bitflip": 0.16, "multibit": 0.09, "u32": 0.18, "header": 0.16,
                 "truncate": 0.06, "extend": 0.05, "splice": 0.05, "swap_tables": 0.05,
                 "dup_query": 0.08, "reencode": 0.12, "statement": 0.06}
# magics a header mutation may write (block proofs, program proofs, the STARK proof, zeros)
_MAGICS = (b"STFK", b"STB2", b"STD2", b"STRV", b"STBP", b"\0\0\0\0", b"stb2")


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
    """Layout of serialized TxBlockProof bytes (magic, u16 version, u16 reserved, u32
    n_tx, u32 body length, the STARK proof); returns it and the inner proof's offset."""
    lay = Layout([Field(0, 4, "bp_header", "bp.magic", 0), Field(4, 6, "bp_header", "bp.version", 2),
                  Field(6, 8, "bp_header", "bp.reserved", 2),
                  Field(8, 12, "bp_header", "bp.n_tx", 4),
                  Field(12, 16, "bp_header", "bp.proof_len", 4)])
    inner = proof_layout(data[16:]).shifted(16)
    lay.fields += inner.fields
    lay.sections, lay.queries = inner.sections, inner.queries
    return lay, 16


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
            choice = rng.choice(_MAGICS + (None,))
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
    raise ValueError(f"unknown mutation kind {kind!r}")


def _reencode(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """A structure-aware mutation: decode the STARK proof with the library, change one
    parameter, height, array shape, FRI layer list, table list or scalar, and encode it
    again -- lengths and ranks stay consistent, so the case gets past the decoder and
    exercises the shape checks and the transcript.  Generic over the dataclass fields, so
    it follows the format as it changes."""
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




# --------------------------------------------------------------------------- statements

_STATEMENT_OPS = ("input", "output", "exit_code", "max_cycles", "program", "transactions")


def _changed_bytes(rng: random.Random, honest: bytes, others: list) -> tuple[bytes, str]:
    """Bytes that differ from ``honest``: a bit flipped, a byte appended or dropped,
    emptied, random bytes of the same length, or another transaction's bytes."""
    ops = ["append"] + (["flip", "drop last", "empty", "random"] if honest else [])
    ops += ["another's"] if [o for o in others if o != honest] else []
    op = rng.choice(ops)
    if op == "flip":
        b = bytearray(honest)
        pos, bit = rng.randrange(len(b)), rng.randrange(8)
        b[pos] ^= 1 << bit
        return bytes(b), f"bit {bit} of byte {pos} flipped"
    if op == "append":
        v = rng.randrange(256)
        return honest + bytes([v]), f"byte {v} appended"
    if op == "drop last":
        return honest[:-1], "last byte dropped"
    if op == "empty":
        return b"", "emptied"
    if op == "random":
        return bytes(rng.randrange(256) for _ in honest), f"{len(honest)} random bytes"
    return rng.choice([o for o in others if o != honest]), "another transaction's"


def _changed_program(rng: random.Random, prog, others: list):
    from steadfast.rv32.elf import Program
    ops = ["byte", "entry"] + (["another's"] if [o for o in others if o != prog] else [])
    op = rng.choice(ops)
    if op == "another's":
        return rng.choice([o for o in others if o != prog]), "another transaction's program"
    segs = list(prog.segments)
    if op == "entry":
        step = rng.choice((4, -4, 8, 2))
        return Program(prog.entry + step, prog.segments), f"entry {prog.entry:#x} + {step}"
    k = rng.randrange(len(segs))
    s = segs[k]
    if not s.data:
        return Program(prog.entry + 4, prog.segments), f"entry {prog.entry:#x} + 4"
    b = bytearray(s.data)
    pos = rng.randrange(len(b))
    b[pos] ^= 1 << rng.randrange(8)
    segs[k] = dataclasses.replace(s, data=bytes(b))
    return Program(prog.entry, tuple(segs)), f"segment {k} byte {pos} changed"


def _mutate_statement(rng: random.Random, block, claims: list) -> tuple[object, str]:
    """A statement the honest proof does not prove: a transaction's input, claimed output
    (always made to differ from what the proof says it wrote), claimed exit code, program,
    the block's max_cycles, or the transaction list changed.  The chain's state_in is not
    mutated: a proof does not bind it (the verifier derives state_out from it), so a block
    with another state_in is a true statement with another state_out."""
    txs = list(block.transactions)
    n = len(txs)
    ops = [o for o in _STATEMENT_OPS if n or o in ("max_cycles", "transactions")]
    op = rng.choice(ops)
    i = rng.randrange(n) if n else 0
    if op == "max_cycles":
        mc = block.max_cycles
        top = 1 << 24
        val = rng.choice([v for v in {mc + 1, mc - 1, 2 * mc, mc // 2, 1, top} if 1 <= v <= top
                          and v != mc])
        return dataclasses.replace(block, max_cycles=val), f"max_cycles := {val} (was {mc})"
    if op == "transactions":
        sub = ["append a copy"] + (["drop", "duplicate", "drop all"] if n else [])
        sub += ["swap two", "reverse"] if any(t != txs[0] for t in txs) else []
        sub_op = rng.choice(sub)
        if sub_op == "drop":
            del txs[i]
        elif sub_op == "duplicate":
            txs.insert(i, txs[i])
        elif sub_op == "drop all":
            txs = []
        elif sub_op == "append a copy":
            if not n:
                from steadfast.rv32.blockfile import Transaction
                from steadfast.rv32.elf import Program
                txs = [Transaction(Program.from_words([0x00000073]), b"", None, None, "ecall")]
            else:
                txs.append(txs[i])
        elif sub_op == "swap two":
            a, c = rng.sample([j for j in range(n)], 2)
            while txs[a] == txs[c]:
                a, c = rng.sample([j for j in range(n)], 2)
            txs[a], txs[c] = txs[c], txs[a]
            sub_op = f"swap {a} and {c}"
        else:
            txs.reverse()
        desc = f"transactions: {sub_op}" + (f" (transaction {i})" if sub_op in
                                            ("drop", "duplicate", "append a copy") else "")
        return dataclasses.replace(block, transactions=tuple(txs)), desc
    tx = txs[i]
    real_code, real_out = claims[i].exit_code, claims[i].output
    if op == "input":
        new, how = _changed_bytes(rng, tx.input, [t.input for t in txs])
        txs[i] = dataclasses.replace(tx, input=new)
    elif op == "output":
        new, how = _changed_bytes(rng, real_out, [c.output for c in claims])
        txs[i] = dataclasses.replace(tx, output=new)
    elif op == "exit_code":
        new = rng.choice([v for v in {real_code + 1, real_code - 1, 0, 1, 7, 255}
                          if 0 <= v <= 255 and v != real_code])
        how = f"{new} (the proof's {real_code})"
        txs[i] = dataclasses.replace(tx, exit_code=new)
    else:
        new, how = _changed_program(rng, tx.program, [t.program for t in txs])
        txs[i] = dataclasses.replace(tx, program=new)
    return (dataclasses.replace(block, transactions=tuple(txs)),
            f"transaction {i} {op}: {how}")


def draw_case(seed: int, index: int, honest: dict) -> tuple[str, str, str, object]:
    """Case ``index``: (target, kind, description, mutated target) -- the target
    ``blockproof`` (bytes), ``proof`` (the inner STARK proof's bytes) or ``statement``
    (a :class:`rv32.blockfile.Block` checked against the honest proof).  Re-draws until
    the target differs from the honest one."""
    rng = random.Random(f"fuzz_verify:{seed}:{index}")
    kinds = list(_KIND_WEIGHTS)
    for _ in range(1000):
        kind = rng.choices(kinds, [_KIND_WEIGHTS[k] for k in kinds])[0]
        try:
            if kind == "statement":
                target, base = "statement", honest["block"]
                data, desc = _mutate_statement(rng, base, honest["claims"])
            else:
                if kind in ("swap_tables", "dup_query", "reencode") or rng.random() < 0.5:
                    target = "proof"
                    base, lay, w = honest["proof"], honest["proof_layout"], _PROOF_WEIGHTS
                else:
                    target = "blockproof"
                    base, lay, w = honest["bytes"], honest["bp_layout"], _BP_WEIGHTS
                data, desc = _mutate(rng, base, lay, w, kind, honest["inner_off"])
        except (struct.error, OverflowError, ValueError):   # out of range: draw again
            continue
        if data != base:
            return target, kind, desc, data
    raise RuntimeError(f"case {index}: no mutation changed the target in 1000 draws")
