"""Fuzz the verifier on the proof files bench/fuzz_verify.py does not reach: a program's
proof (b"STRV": one STARK), a program proved in linked segments (b"STRS") and a block
proved in epochs (b"STBE": block STARKs and segmented long transactions).

    PYTHONPATH=. python bench/fuzz_formats.py N [--formats program segments epochs]
                                                [--seed S] [--case FMT:I] [--json] [--small]

For each format one honest proof is made at the default parameters and cached in the
temporary directory (keyed by the code, the format and the statement), and must verify
before any mutation is tried.  The statements:

* ``program``  guests/bin/sha256.elf on 100 bytes of bench/realworld_bench.py's pattern;
* ``segments`` the same program on 600 bytes, in segments of 2^13 cycles (7 segments);
* ``epochs``   a block of hello, sha256 on 300 bytes (a long transaction, segments of
  2^12) and hello again (a group part on each side).

``--small`` (the tests' fixture) proves 20 / 60 / 40 input bytes in segments of 2^10 with weak
parameters (6 queries, 1 bit of grinding) and verifies with min_security_bits=0.

Each case ``(format, i)`` draws from its own generator (seed, format, i), so ``--case
segments:17`` replays one with its traceback.  The mutation kinds:

* ``file``: a byte-level mutation of the whole file (bench/fuzz_mutations.py's bit flips,
  bursts, u32 overwrites, header fields at boundary values, truncations, extensions,
  insertions / deletions), positions biased towards the file's own header, the segment and
  part headers and the inner proofs' headers and small arrays (a layout walked from the
  honest file);
* ``inner``: one inner STARK proof (a segment's, a part's, the program's) mutated by the
  whole catalogue of fuzz_verify -- including structure-aware re-encodings, table sections
  swapped and queries duplicated -- and wrapped back, so the file's lengths stay
  consistent and the case reaches the STARK checks;
* ``record``: one field of a segment's record (cycles, final, exit code, pc, a register,
  a word address or value, the output) or of a part's header (kind, first, count) set to
  a boundary value or a neighbour, the file encoded again;
* ``parts``: segments or parts dropped, duplicated, swapped, reversed, truncated, or taken
  from the honest proof of another statement (another input);
* ``statement``: what the proof is checked against -- the program's input (a byte, one
  more, one less, empty), another program, a max_cycles; a block's transactions, claims
  and max_cycles (fuzz_mutations' statement mutations).

Outcomes as fuzz_verify's: **accepted** (a forgery: what verified is false -- saved to
``--save-dir``), **typed** (a ``VerificationError``), **untyped** (anything else, or a
case past ``--hard-timeout``), and **true**: the case verified and what it verified is
true (every program run on its input exits within the verified max_cycles with the
verified exit code and output) -- another encoding of a true statement, e.g. a segmented
proof's max_cycles raised (docs/rv32.md "Long programs: segments"); listed, not failed.
The last line is ``fuzz-formats: N mutated, A accepted, U untyped errors``; the exit code
is non-zero when A > 0 or U > 0.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import random
import struct
import sys
import tempfile
import time
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.fuzz_mutations import (_BP_WEIGHTS, _PROOF_WEIGHTS, Field, Layout,  # noqa: E402
                                  _boundary_values, _mutate, _mutate_statement, proof_layout)
from bench.fuzz_verify import _code_key, run_case  # noqa: E402
from steadfast.prover.programs.proof import SEGMENTED_MAGIC  # noqa: E402
from steadfast.rv32.chips.common import NUM_REGS  # noqa: E402

FORMATS = ("program", "segments", "epochs")
_KINDS = {"file": 0.30, "inner": 0.30, "record": 0.15, "parts": 0.10, "statement": 0.15}
_FILE_KINDS = {"bitflip": 0.2, "multibit": 0.12, "u32": 0.2, "header": 0.2, "truncate": 0.1,
               "extend": 0.08, "splice": 0.1}
_INNER_KINDS = {"bitflip": 0.14, "multibit": 0.08, "u32": 0.16, "header": 0.16,
                "truncate": 0.06, "extend": 0.05, "splice": 0.05, "swap_tables": 0.08,
                "dup_query": 0.08, "reencode": 0.14}


# --------------------------------------------------------------------------- statements

#: ``--small``: smaller inputs, segments of 2^10 and weak parameters
#: (checked with min_security_bits=0): the tests' fixture, not a security check
SMALL_CONFIG = {"num_queries": 6, "pow_bits": 1, "logup_pow_bits": 1, "deep_pow_bits": 1,
                "commit_pow_bits": 1}


def statement(fmt: str, variant: int = 0, small: bool = False) -> dict:
    """The honest statement of a format (``variant`` 1: another input, for the parts taken
    from another proof; ``small``: the tests' sizes)."""
    from bench.realworld_bench import pattern
    from steadfast import rv32
    path = os.path.join(ROOT, "guests", "bin", "sha256.elf")
    prog = rv32.load_elf(path)
    extra = b"x" * variant
    if fmt == "program":
        return {"elf": prog, "elf_path": path, "input": pattern(20 if small else 100) + extra,
                "segment_cycles": None}
    if fmt == "segments":
        return {"elf": prog, "elf_path": path, "input": pattern(60 if small else 600) + extra,
                "segment_cycles": 1 << (10 if small else 13)}
    from steadfast.rv32.blockfile import Block, Transaction
    hello = rv32.load_elf(os.path.join(ROOT, "guests", "bin", "hello.elf"))
    txs = (Transaction(hello, b"", name="hello"),
           Transaction(prog, pattern(40 if small else 300) + extra, name="sha256"),
           Transaction(hello, b"epochs", name="hello"))
    return {"block": Block(txs, 1 << 20), "segment_cycles": 1 << (10 if small else 12)}


def _key(fmt: str, st: dict, config: dict) -> str:
    h = hashlib.sha256(fmt.encode())
    if "block" in st:
        h.update(json.dumps(st["block"].to_json(), sort_keys=True).encode())
    else:
        with open(st["elf_path"], "rb") as fh:
            h.update(fh.read())
        h.update(st["input"])
    h.update(repr(st["segment_cycles"]).encode())
    return _code_key(h.digest(), config)


def honest_proof(fmt: str, variant: int = 0, log=print, small: bool = False) -> tuple[dict, bytes]:
    """(statement, honest proof bytes), cached in the temporary directory."""
    st = statement(fmt, variant, small)
    config = SMALL_CONFIG if small else {}
    cache = os.path.join(tempfile.gettempdir(), "steadfast_fuzz_formats")
    os.makedirs(cache, exist_ok=True)
    path = os.path.join(cache, f"{fmt}{variant}_{_key(fmt, st, config)}.proof")
    if not os.path.exists(path):
        from steadfast.prover.api import Prover, ProverConfig
        log(f"proving the honest {fmt} proof (variant {variant}) -> {path}")
        prover = Prover(ProverConfig(backend="host", segment_cycles=st["segment_cycles"],
                                     **config))
        if fmt == "epochs":
            proof = prover.prove_block(st["block"])
        else:
            proof = prover.prove_program(st["elf"], st["input"])
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(proof.to_bytes())
        os.replace(tmp, path)
    with open(path, "rb") as fh:
        return st, fh.read()


def verify_fn(min_security_bits: int = 100):
    from steadfast.prover import api

    def verify(data, st):                   # api looked up per call (the tests replace it)
        if "block" in st:
            return api.verify(data, st["block"], min_security_bits=min_security_bits)
        return api.verify(data, elf=st["elf"], input=st["input"],
                          max_cycles=st.get("max_cycles"), min_security_bits=min_security_bits)
    return verify


# --------------------------------------------------------------------------- layouts

def _inner_fields(lay: Layout, proof: bytes, off: int) -> None:
    try:
        inner = proof_layout(proof).shifted(off)
    except Exception:                       # noqa: BLE001 -- a proof the walker cannot read
        lay.fields.append(Field(off, off + len(proof), "rows", "proof bytes", 4))
        return
    lay.fields += inner.fields
    lay.sections += inner.sections
    lay.queries += inner.queries


def _hdr(lay: Layout, at: int, spec: list, prefix: str) -> int:
    for name, width in spec:
        lay.fields.append(Field(at, at + width, "bp_header", f"{prefix}{name}",
                                0 if name == "magic" else width))
        at += width
    return at


def _segments_layout(lay: Layout, data: bytes, at: int, prefix: str) -> int:
    at = _hdr(lay, at, [("magic", 4), ("version", 2), ("reserved", 2), ("segment_cycles", 4),
                        ("max_cycles", 4), ("segments", 4)], prefix)
    n = struct.unpack_from("<I", data, at - 4)[0]
    for j in range(n):
        p = f"{prefix}segment {j} "
        at = _hdr(lay, at, [("cycles", 4), ("final", 1), ("exit_code", 1), ("pad", 2),
                            ("pc_out", 4)], p)
        lay.fields.append(Field(at, at + 4 * NUM_REGS, "small", p + "regs_out", 4))
        at += 4 * NUM_REGS
        k = struct.unpack_from("<I", data, at)[0]
        at = _hdr(lay, at, [("words", 4)], p)
        for name in ("wa", "v_out"):
            if k:
                lay.fields.append(Field(at, at + 4 * k, "small", p + name, 4))
            at += 4 * k
        m = struct.unpack_from("<I", data, at)[0]
        at = _hdr(lay, at, [("output length", 4)], p)
        if m:
            lay.fields.append(Field(at, at + m, "small", p + "output", 1))
        at += m
        b = struct.unpack_from("<I", data, at)[0]
        at = _hdr(lay, at, [("proof length", 4)], p)
        _inner_fields(lay, data[at:at + b], at)
        at += b
    return at


def file_layout(fmt: str, data: bytes) -> Layout:
    """The honest file's fields: the container's headers as ``bp_header``, the inner
    proofs' fields as proof_layout gives them (shifted)."""
    lay = Layout()
    if fmt == "program":
        at = _hdr(lay, 0, [("magic", 4), ("version", 2), ("reserved", 2), ("length", 4)], "")
        _inner_fields(lay, data[at:], at)
    elif fmt == "segments":
        _segments_layout(lay, data, 0, "")
    else:
        at = _hdr(lay, 0, [("magic", 4), ("version", 2), ("reserved", 2), ("n_tx", 4),
                           ("segment_cycles", 4), ("parts", 4)], "")
        n = struct.unpack_from("<I", data, 16)[0]
        for j in range(n):
            at = _hdr(lay, at, [("kind", 1), ("pad8", 1), ("pad16", 2), ("first", 4),
                                ("count", 4), ("length", 4)], f"part {j} ")
            b = struct.unpack_from("<I", data, at - 4)[0]
            if data[at:at + 4] == SEGMENTED_MAGIC:     # a long part
                _segments_layout(lay, data[:at + b], at, f"part {j} ")
            else:
                _inner_fields(lay, data[at:at + b], at)
            at += b
    return lay


# --------------------------------------------------------------------------- the file's objects

def _parse(fmt: str, data: bytes):
    if fmt == "program":
        from steadfast.prover.programs.proof import ProgramProof
        return ProgramProof.from_bytes(data)
    if fmt == "segments":
        from steadfast.prover.programs.segment_proof import SegmentedProof
        return SegmentedProof.from_bytes(data)
    from steadfast.prover.blocks.epochs import BlockEpochsProof
    return BlockEpochsProof.from_bytes(data)


def _inners(fmt: str, obj) -> list:
    """[(path, inner STARK bytes)]: path () the program's, (j,) segment / group part j's,
    (j, s) segment s of long part j."""
    if fmt == "program":
        return [((), obj.proof)]
    if fmt == "segments":
        return [((j,), s.proof) for j, s in enumerate(obj.segments)]
    out = []
    for j, p in enumerate(obj.parts):
        seg = _long(p)
        out += [((j,), p.proof)] if seg is None else \
            [((j, s), r.proof) for s, r in enumerate(seg.segments)]
    return out


def _long(part):
    """A long part's SegmentedProof, else None (a group's protocol proof)."""
    if part.proof[:4] != SEGMENTED_MAGIC:
        return None
    from steadfast.prover.programs.segment_proof import SegmentedProof
    return SegmentedProof.from_bytes(part.proof)


def _put(obj, attr: str, j: int, new):
    """``obj`` (a file's dataclass) with element j of its tuple ``attr`` replaced."""
    xs = getattr(obj, attr)
    return dataclasses.replace(obj, **{attr: xs[:j] + (new,) + xs[j + 1:]})


def _with_inner(fmt: str, obj, path: tuple, proof: bytes) -> bytes:
    rep = dataclasses.replace
    if fmt == "program":
        return rep(obj, proof=proof).to_bytes()
    if fmt == "segments":
        return _put(obj, "segments", path[0], rep(obj.segments[path[0]], proof=proof)).to_bytes()
    p = obj.parts[path[0]]
    if len(path) == 2:
        seg = _long(p)
        proof = _put(seg, "segments", path[1],
                     rep(seg.segments[path[1]], proof=proof)).to_bytes()
    return _put(obj, "parts", path[0], rep(p, proof=proof)).to_bytes()


def _int_value(rng: random.Random, honest: int, width: int) -> int:
    vals = [v for v in _boundary_values(width, honest) if v != honest]
    return rng.choice(vals)


def _record_mutation(rng: random.Random, seg) -> tuple:
    """One field of one segment record changed -> (new record, description)."""
    import numpy as np
    rep = dataclasses.replace
    field = rng.choice(("cycles", "final", "exit_code", "pc_out", "regs_out", "wa", "v_out",
                        "output"))
    if field in ("cycles", "pc_out"):
        v = getattr(seg, field)
        new = rng.choice((v + 1, v - 1, v + 4, v - 4, _int_value(rng, v, 4)))
        new = min(max(new, 0), (1 << 32) - 1)
        return rep(seg, **{field: new}), f"{field} {v} -> {new}"
    if field == "final":
        return rep(seg, final=not seg.final), f"final -> {not seg.final}"
    if field == "exit_code":
        new = _int_value(rng, seg.exit_code, 1)
        return rep(seg, exit_code=new), f"exit_code {seg.exit_code} -> {new}"
    if field == "regs_out":
        regs = list(seg.regs_out)
        r = rng.randrange(NUM_REGS)
        regs[r] = rng.choice((regs[r] + 1, regs[r] ^ 1, 0, _int_value(rng, regs[r], 4))) \
            % (1 << 32)
        return rep(seg, regs_out=tuple(regs)), f"register {r} -> {regs[r]}"
    if field in ("wa", "v_out"):
        a = np.array(getattr(seg, field), dtype=np.int64)
        if a.size == 0 or rng.random() < 0.2:   # a word dropped from both, or one added
            wa, v = list(seg.wa), list(seg.v_out)
            if wa and rng.random() < 0.5:
                i = rng.randrange(len(wa))
                del wa[i], v[i]
                what = f"word {i} dropped"
            else:
                wa.append((wa[-1] + 1) if wa else 0x1000)
                v.append(rng.randrange(1 << 32))
                what = "a word appended"
            return rep(seg, wa=np.array(wa, np.int64), v_out=np.array(v, np.int64)), what
        i = rng.randrange(a.size)
        a[i] = rng.choice((a[i] + 1, a[i] - 1, a[i] ^ 0x80000000, 0)) % (1 << 32)
        return rep(seg, **{field: a}), f"{field}[{i}] -> {a[i]}"
    out = bytearray(seg.output)
    r = rng.random()
    if out and r < 0.5:
        i = rng.randrange(len(out))
        out[i] ^= 1 << rng.randrange(8)
        what = f"output byte {i} flipped"
    elif out and r < 0.7:
        out = out[:-1]
        what = "output one byte shorter"
    else:
        out += bytes([rng.randrange(256)])
        what = "output one byte longer"
    return rep(seg, output=bytes(out)), what


def _one_record(rng: random.Random, seg) -> tuple:
    """A SegmentedProof with one segment's record changed -> (file, description)."""
    s = rng.randrange(len(seg.segments))
    new, what = _record_mutation(rng, seg.segments[s])
    return _put(seg, "segments", s, new), f"segment {s}: {what}"


def _record(rng: random.Random, fmt: str, obj) -> tuple[bytes, str]:
    if fmt == "segments":
        new, what = _one_record(rng, obj)
        return new.to_bytes(), what
    j = rng.randrange(len(obj.parts))
    p = obj.parts[j]
    seg = _long(p)
    if seg is not None and rng.random() < 0.6:
        new, what = _one_record(rng, seg)
        p = dataclasses.replace(p, proof=new.to_bytes())
        return _put(obj, "parts", j, p).to_bytes(), f"part {j} {what}"
    field = rng.choice(("kind", "first", "count"))
    v = getattr(p, field)
    new = rng.choice((v + 1, v - 1, 0, 2, _int_value(rng, v, 1 if field == "kind" else 4)))
    new = min(max(new, 0), 255 if field == "kind" else (1 << 32) - 1)
    return _put(obj, "parts", j, dataclasses.replace(p, **{field: new})).to_bytes(), \
        f"part {j}: {field} {v} -> {new}"


def _parts(rng: random.Random, fmt: str, obj, other) -> tuple[bytes, str]:
    rep = dataclasses.replace
    attr = "segments" if fmt == "segments" else "parts"
    xs, ys = list(getattr(obj, attr)), list(getattr(other, attr))
    op = rng.choice(("drop", "dup", "swap", "reverse", "truncate", "foreign"))
    if op == "drop":
        i = rng.randrange(len(xs))
        del xs[i]
        what = f"{attr[:-1]} {i} dropped"
    elif op == "dup":
        i = rng.randrange(len(xs))
        xs.insert(rng.randrange(len(xs) + 1), xs[i])
        what = f"{attr[:-1]} {i} duplicated"
    elif op == "swap" and len(xs) > 1:
        i, j = rng.sample(range(len(xs)), 2)
        xs[i], xs[j] = xs[j], xs[i]
        what = f"{attr} {i} and {j} swapped"
    elif op == "reverse" and len(xs) > 1:
        xs.reverse()
        what = f"{attr} reversed"
    elif op == "truncate" and len(xs) > 1:
        k = rng.randrange(1, len(xs))
        xs = xs[:k]
        what = f"only the first {k} {attr}"
    else:
        i = rng.randrange(min(len(xs), len(ys)))
        xs[i] = ys[i]
        what = f"{attr[:-1]} {i} from the proof of another input"
    if not xs:
        return b"", what + " (none left)"
    return rep(obj, **{attr: tuple(xs)}).to_bytes(), what


def _statement(rng: random.Random, fmt: str, st: dict, claims) -> tuple[dict, str]:
    if fmt == "epochs":
        block, what = _mutate_statement(rng, st["block"], claims)
        return {**st, "block": block}, what
    data = bytearray(st["input"])
    r = rng.random()
    if r < 0.35:
        i = rng.randrange(len(data))
        data[i] ^= 1 << rng.randrange(8)
        return {**st, "input": bytes(data)}, f"input byte {i} flipped"
    if r < 0.5:
        return {**st, "input": bytes(data) + b"\0"}, "input one byte longer"
    if r < 0.65:
        return {**st, "input": bytes(data[:-1])}, "input one byte shorter"
    if r < 0.72:
        return {**st, "input": b""}, "input empty"
    if r < 0.85:
        from steadfast import rv32
        name = rng.choice(("hello.elf", "sort.elf", "bench.elf"))
        return {**st, "elf": rv32.load_elf(os.path.join(ROOT, "guests", "bin", name))}, \
            f"the program {name}"
    mc = rng.choice((1 << 12, 1 << 14, 1 << 16, 1 << 21, 1 << 24, 12345))
    return {**st, "max_cycles": mc}, f"max_cycles {mc}"


def draw_case(seed: int, fmt: str, index: int, h: dict) -> tuple[str, str, bytes, dict]:
    """(kind, description, file bytes, statement) of case ``index`` of a format; re-drawn
    until the file or the statement differs from the honest one."""
    rng = random.Random(f"fuzz_formats:{seed}:{fmt}:{index}")
    kinds = [k for k in _KINDS if fmt != "program" or k in ("file", "inner", "statement")]
    for _ in range(1000):
        kind = rng.choices(kinds, [_KINDS[k] for k in kinds])[0]
        st, data = h["statement"], h["bytes"]
        try:
            if kind == "file":
                sub = rng.choices(list(_FILE_KINDS), list(_FILE_KINDS.values()))[0]
                data, desc = _mutate(rng, data, h["layout"], _BP_WEIGHTS, sub, 0)
                desc = f"{sub}: {desc}"
            elif kind == "inner":
                path, proof = rng.choice(h["inners"])
                sub = rng.choices(list(_INNER_KINDS), list(_INNER_KINDS.values()))[0]
                new, desc = _mutate(rng, proof, proof_layout(proof), _PROOF_WEIGHTS, sub, 0)
                data = _with_inner(fmt, h["obj"], path, new)
                desc = f"inner {path} {sub}: {desc}"
            elif kind == "record":
                data, desc = _record(rng, fmt, h["obj"])
            elif kind == "parts":
                data, desc = _parts(rng, fmt, h["obj"], h["other"])
            else:
                st, desc = _statement(rng, fmt, st, h["claims"])
                if st.get("max_cycles", -1) == h.get("max_cycles"):
                    continue                # the proof's own limit: the same statement
        except (struct.error, OverflowError, ValueError, IndexError):
            continue
        if data != h["bytes"] or st is not h["statement"]:
            return kind, desc, data, st
    raise RuntimeError(f"{fmt} case {index}: no mutation changed anything in 1000 draws")


def honest_cases(fmt: str, log=print, small: bool = False) -> dict:
    st, raw = honest_proof(fmt, 0, log, small)
    _, other = honest_proof(fmt, 1, log, small) if fmt != "program" else (None, raw)
    obj = _parse(fmt, raw)
    claims = obj.claims if fmt == "epochs" else None
    return {"statement": st, "bytes": raw, "obj": obj, "other": _parse(fmt, other),
            "layout": file_layout(fmt, raw), "inners": _inners(fmt, obj), "claims": claims}


# --------------------------------------------------------------------------- running

def true_statement(st: dict, res) -> bool:
    """Whether what an accepted case verified is true: the machine runs every program on
    its input within the verified max_cycles and exits with the verified exit code and
    output (and a block's claims are those).  An accepted case that is true is another
    encoding of a true statement (reported, not a forgery); one that is not is a forgery."""
    from steadfast import rv32
    from steadfast.rv32.abi import MAX_CYCLES_CEILING
    from steadfast.rv32.errors import ExecutionError
    runs = [(st["elf"], st["input"], None, None)] if "block" not in st else \
        [(t.program, t.input, t.exit_code, t.output) for t in st["block"].transactions]
    codes = [res.exit_code] if "block" not in st else list(res.exit_codes)
    outs = [res.output] if "block" not in st else list(res.outputs)
    if len(codes) != len(runs) or len(outs) != len(runs):
        return False
    for (prog, data, claim_code, claim_out), code, out in zip(runs, codes, outs):
        try:
            # the fuzzed programs run far below 2^24 cycles; a longer run counts as false
            ex = rv32.execute(prog, data, min(res.max_cycles, MAX_CYCLES_CEILING))
        except ExecutionError:
            return False
        if (ex.exit_code, bytes(ex.output)) != (code, bytes(out)):
            return False
        if claim_code is not None and claim_code != code or \
                claim_out is not None and bytes(claim_out) != bytes(out):
            return False
    return True


def _run(verify, data: bytes, st: dict, hard_timeout: float):
    """run_case's classification for a (file, statement) pair; an accepted case is
    "true" when what it verified is a true statement (:func:`true_statement`)."""
    got = []

    def call(obj, block=None):
        got.append(verify(obj, block))
    outcome, err, last, tb = run_case(call, None, "file", data, None, st, hard_timeout, {})
    if outcome == "accepted" and true_statement(st, got[0]):
        return "true", "", "", ""
    return outcome, err, last, tb


def fuzz(n: int, formats=FORMATS, seed: int = 0, as_json: bool = False,
         save_dir: str | None = None, slow: float = 5.0, hard_timeout: float = 120.0,
         cases=None, out=None, small: bool = False) -> tuple[dict, int]:
    """Run the fuzzer over ``formats``; prints the report (last line: the result line) to
    ``out``; returns (summary, exit code).  ``small``: the tests' statements and weak
    parameters, verified with min_security_bits=0."""
    out = out or sys.stdout

    def log(*a):
        print(*a, file=out, flush=True)

    verify = verify_fn(0 if small else 100)
    save_dir = save_dir or os.path.join(tempfile.gettempdir(), "steadfast_fuzz_formats", "found")
    summary: dict = {"seed": seed, "small": small, "formats": {}}
    total = acc_n = unt_n = 0
    for fmt in formats:
        h = honest_cases(fmt, log, small)
        t = time.perf_counter()
        res = verify(h["bytes"], h["statement"])    # the honest proof must pass
        honest_s = time.perf_counter() - t
        h["max_cycles"] = getattr(res, "max_cycles", None)
        log(f"{fmt}: honest proof {len(h['bytes']):,} bytes, {len(h['inners'])} inner "
            f"STARK(s), verify {honest_s:.3f} s")
        indices = [i for f, i in cases if f == fmt] if cases is not None else list(range(n))
        outcomes, kinds, errors = Counter(), Counter(), Counter()
        accepted, untyped, slow_cases, times = [], [], [], []
        t_all = time.perf_counter()
        for i in indices:
            kind, desc, data, st = draw_case(seed, fmt, i, h)
            t0 = time.perf_counter()
            outcome, err, last, tb = _run(verify, data, st, hard_timeout)
            dt = time.perf_counter() - t0
            times.append(dt)
            outcomes[outcome] += 1
            kinds[(kind, err or outcome)] += 1
            errors[err or outcome] += 1
            what = f"{fmt} case {i} [{kind}] {desc}"
            if outcome == "accepted":
                os.makedirs(save_dir, exist_ok=True)
                path = os.path.join(save_dir, f"accepted_{fmt}_seed{seed}_case{i}.proof")
                with open(path, "wb") as fh:
                    fh.write(data)
                accepted.append({"case": i, "kind": kind, "mutation": desc, "saved": path})
                log(f"ACCEPTED {what} -> saved {path}")
            elif outcome == "true":
                log(f"TRUE {what}: accepted, and what it verified is true")
            elif outcome == "untyped":
                untyped.append({"case": i, "kind": kind, "mutation": desc, "error": last})
                log(f"UNTYPED {what}: {last}")
                if cases is not None:
                    log(tb)
            if dt > slow:
                slow_cases.append({"case": i, "kind": kind, "mutation": desc,
                                   "seconds": round(dt, 2)})
                log(f"SLOW {what}: {dt:.1f} s")
        wall = time.perf_counter() - t_all
        m = len(indices)
        total, acc_n, unt_n = total + m, acc_n + len(accepted), unt_n + len(untyped)
        summary["formats"][fmt] = {
            "n": m, "proof_bytes": len(h["bytes"]), "honest_verify_s": round(honest_s, 3),
            "accepted": len(accepted), "untyped": len(untyped), "typed": outcomes["typed"],
            "true": outcomes["true"],
            "wall_s": round(wall, 1), "mean_case_s": round(wall / max(m, 1), 4),
            "max_case_s": round(max(times, default=0.0), 3),
            "errors": dict(sorted(errors.items())),
            "kinds": {f"{k}/{o}": c for (k, o), c in sorted(kinds.items())},
            "accepted_cases": accepted, "untyped_cases": untyped, "slow_cases": slow_cases}
        if not as_json:
            log(f"{fmt}: {m} cases in {wall:.1f} s ({wall / max(m, 1) * 1e3:.1f} ms mean, "
                f"{max(times, default=0.0):.2f} s max); outcomes: "
                + ", ".join(f"{k} {v}" for k, v in sorted(errors.items())))
            log(f"{fmt}: by kind: " + ", ".join(
                f"{k} {sum(c for (kk, _), c in kinds.items() if kk == k)}" for k in _KINDS))
    if as_json:
        log(json.dumps(summary, indent=1))
    log(f"fuzz-formats: {total} mutated, {acc_n} accepted, {unt_n} untyped errors")
    return summary, (1 if acc_n or unt_n else 0)


def main(argv=None, out=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int, nargs="?", default=300, help="cases per format")
    ap.add_argument("--formats", nargs="+", choices=FORMATS, default=list(FORMATS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="the summary as JSON")
    ap.add_argument("--case", action="append", default=None,
                    help="FMT:I -- replay case I of a format with its traceback (repeatable)")
    ap.add_argument("--save-dir", default=None, help="where accepted proofs are written")
    ap.add_argument("--slow", type=float, default=5.0, help="report cases slower than this (s)")
    ap.add_argument("--hard-timeout", type=float, default=120.0,
                    help="a case past this many seconds is an untyped error (0: no limit)")
    ap.add_argument("--small", action="store_true",
                    help="the tests' small statements and weak parameters (min_security_bits 0)")
    a = ap.parse_args(argv)
    cases = None
    if a.case:
        cases = []
        for c in a.case:
            fmt, _, i = c.partition(":")
            if fmt not in FORMATS or not i.isdigit():
                ap.error(f"--case takes FMT:I with FMT one of {', '.join(FORMATS)}, got {c!r}")
            cases.append((fmt, int(i)))
        a.formats = [f for f in FORMATS if any(f == g for g, _ in cases)]
    _, code = fuzz(a.n, a.formats, a.seed, a.json, a.save_dir, a.slow, a.hard_timeout,
                   cases, out, a.small)
    return code


if __name__ == "__main__":
    sys.exit(main())
