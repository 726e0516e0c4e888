"""Split chips (docs/rv32.md "Split chips (design and soundness)"): a program's instruction
chip may hold its rows in two tables, its own and a piece ``name+`` after the 18.

Proved here on guests/bin/sha256.elf over 512 bytes with the split thresholds lowered
(rv32.tables.SPLIT_MIN_ROWS / SPLIT_MIN_SAVING), so that a small run splits several
chips: the proof verifies; the two tables hold exactly the one table's rows; a piece's
label (its one public value) changed, duplicated, reordered or naming a chip that does
not split is refused by name; a forged row in a piece is refused in check mode; a
segment's proof may not carry a piece; and a program too small to split keeps the
18-table proof's bytes."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings, strategies as st
import pytest

from steadfast import rv32
from steadfast.air import ConstraintViolation, LookupImbalance, check_traces
from steadfast.prover.api import Prover, ProverConfig, verify_program
from steadfast.prover.engine.air_proof import decode_proof
from steadfast.prover.programs.proof import ProgramProof
from steadfast.rv32 import tables as T
from steadfast.rv32.statement import slots_of, split_of, verify_execution
from steadfast.rv32.traces import build_traces
from steadfast.verifier.errors import PublicValuesError, ShapeError, VerificationError
from steadfast.verifier.proof_format import encode

ROOT = Path(__file__).resolve().parent.parent
ELF = ROOT / "guests" / "bin" / "sha256.elf"
DATA = bytes(range(256)) * 2
FAST = dict(backend="host", num_queries=6, pow_bits=1)
DEFAULTS = {"SPLIT_MIN_ROWS": T.SPLIT_MIN_ROWS, "SPLIT_MIN_SAVING": T.SPLIT_MIN_SAVING}


@pytest.fixture(scope="module")
def low_thresholds():
    mp = pytest.MonkeyPatch()
    mp.setattr(T, "SPLIT_MIN_ROWS", 16)
    mp.setattr(T, "SPLIT_MIN_SAVING", 0)
    yield
    mp.undo()


@pytest.fixture(scope="module")
def run(low_thresholds):
    prog = rv32.load_elf(str(ELF))
    ex = rv32.execute(prog, DATA, 1 << 20, record=True)
    one = build_traces(prog, ex, 1 << 20)
    two = build_traces(prog, ex, 1 << 20, slot_objective="split")
    return prog, ex, one, two


@pytest.fixture(scope="module")
def proof(low_thresholds):
    p = Prover(ProverConfig(slots="split", **FAST)).prove_program(str(ELF), DATA)
    return p.to_bytes(), decode_proof(p.proof)


def test_split_traces_hold_the_same_rows(run):
    _, _, one, two = run
    assert two.split, "the lowered thresholds split nothing"
    assert two.names == list(T.TABLES) + [c + "+" for c in two.split]
    assert len(two.airs) == len(two.traces) == len(two.table_public_values) == len(two.names)
    for c in two.split:
        i, j = T.INDEX[c], two.names.index(c + "+")
        assert one.slots[c] == two.slots[c] == two.slots[c + "+"] == 1
        n1, n2 = two.traces[i].shape[0], two.traces[j].shape[0]
        first, rest = two.real_rows[c], two.real_rows[c + "+"]
        assert first == n1 and first + rest == one.real_rows[c]      # the chip's table is full
        assert n1 & (n1 - 1) == 0 and n2 & (n2 - 1) == 0 and rest <= n2 <= n1
        # the union, in order, is the one table's rows; the rest is zero padding
        assert np.array_equal(np.vstack([two.traces[i], two.traces[j][:rest]]),
                              one.traces[i][:first + rest])
        assert not two.traces[j][rest:].any() and not one.traces[i][first + rest:].any()
        assert two.table_public_values[j] == [T.INDEX[c]]
        assert two.airs[j].name == two.airs[i].name + "+"
        assert two.airs[j].main_names == two.airs[i].main_names
    assert sum(two.cells().values()) < sum(one.cells().values())
    check_traces(two.airs, two.traces, two.table_public_values)    # the honest split holds


def test_split_proof_verifies(proof):
    raw, decoded = proof
    split = split_of(decoded)
    assert split and len(decoded.tables) == len(T.TABLES) + len(split)
    v = verify_program(raw, str(ELF), DATA, min_security_bits=None)
    assert v.exit_code == 0 and len(v.public_values) == len(decoded.tables)
    prog = rv32.load_elf(str(ELF))
    claim, _ = verify_execution(encode(decoded), prog, DATA, 1 << 24, min_security_bits=None)
    assert claim.output == v.output


def _wrapped(d) -> bytes:
    """A program proof's file bytes around the decoded STARK ``d``."""
    return ProgramProof(encode(d)).to_bytes()


def _relabelled(decoded, labels):
    """The proof's bytes with the pieces' public values replaced by ``labels``."""
    import copy
    d = copy.deepcopy(decoded)
    for tp, pv in zip(d.tables[len(T.TABLES):], labels):
        tp.public_values = np.asarray(pv, dtype=tp.public_values.dtype)
    return _wrapped(d)


def _labels(decoded):
    return [[int(v) for v in tp.public_values] for tp in decoded.tables[len(T.TABLES):]]


@pytest.mark.parametrize("how", ["not a chip", "ecall", "program", "two values", "none",
                                 "duplicate", "out of order"])
def test_piece_label_refused_by_name(proof, how):
    _, decoded = proof
    labels = _labels(decoded)
    assert len(labels) >= 2
    if how == "not a chip":
        labels[0] = [len(T.TABLES) + 3]
    elif how == "ecall":
        labels[0] = [T.INDEX["ecall"]]
    elif how == "program":
        labels[-1] = [T.INDEX["program"]]
    elif how == "two values":
        labels[0] = labels[0] * 2
    elif how == "none":
        labels[0] = []
    elif how == "duplicate":
        labels[1] = labels[0]
    else:
        labels[0], labels[1] = labels[1], labels[0]
    raw = _relabelled(decoded, labels)
    with pytest.raises(PublicValuesError) as e:
        verify_program(raw, str(ELF), DATA, min_security_bits=None)
    assert e.value.table == "rv32_pieces" and "public values" in str(e.value)


def test_piece_relabelled_as_another_chip_refused(proof):
    """A label naming another splittable chip (in order): that chip's AIR is checked on
    the rows; the proof does not verify."""
    _, decoded = proof
    labels = _labels(decoded)
    split = split_of(decoded)
    last = T.INDEX[split[-1]]
    other = next(c for c in T.SPLITTABLE if T.INDEX[c] > last)
    labels[-1] = [T.INDEX[other]]
    with pytest.raises(VerificationError):
        verify_program(_relabelled(decoded, labels), str(ELF), DATA, min_security_bits=None)


def test_piece_dropped_refused(proof):
    import copy
    _, decoded = proof
    d = copy.deepcopy(decoded)
    d.tables = d.tables[:-1]
    with pytest.raises(VerificationError):
        verify_program(_wrapped(d), str(ELF), DATA, min_security_bits=None)


def test_fewer_than_18_tables_is_a_shape_error(proof):
    _, decoded = proof
    with pytest.raises(ShapeError):
        split_of([[0]] * (len(T.TABLES) - 1))
    assert set(slots_of(decoded)) >= {c + "+" for c in split_of(decoded)}


def test_segments_split_and_verify(low_thresholds):
    """A run proved in segments (2^14 cycles each) splits each segment's chips; the
    segmented proof verifies, and a segment whose piece is relabelled is refused by name
    (naming the segment)."""
    import dataclasses
    from steadfast.prover.programs.segment_proof import SegmentedProof
    cfg = ProverConfig(segment_cycles=1 << 14, **FAST)
    p = Prover(cfg).prove_program(str(ELF), DATA)
    assert isinstance(p, SegmentedProof) and len(p.segments) >= 2
    splits = [split_of(decode_proof(r.proof)) for r in p.segments]
    assert all(splits), splits
    v = verify_program(p.to_bytes(), str(ELF), DATA, min_security_bits=None)
    assert v.exit_code == 0
    d = decode_proof(p.segments[1].proof)
    labels = _labels(d)
    labels[0] = [T.INDEX["ecall"]]
    bad_seg = dataclasses.replace(p.segments[1],
                                  proof=ProgramProof.from_bytes(_relabelled(d, labels)).proof)
    bad = dataclasses.replace(p, segments=(p.segments[0], bad_seg) + tuple(p.segments[2:]))
    with pytest.raises(PublicValuesError, match="segment 1") as e:
        verify_program(bad.to_bytes(), str(ELF), DATA, min_security_bits=None)
    assert e.value.table == "rv32_pieces"


@pytest.mark.parametrize("lie", ["result", "dropped"])
def test_forged_piece_row_refused(run, lie):
    _, _, _, two = run
    c = "alu" if "alu" in two.split else two.split[0]
    j = two.names.index(c + "+")
    traces = [t.copy() for t in two.traces]
    air = two.airs[j]
    if lie == "result":
        col = air.main_names.index("c_lo" if "c_lo" in air.main_names else air.main_names[-1])
        traces[j][0, col] = (int(traces[j][0, col]) + 1) % 2013265921
    else:                                       # a real row taken out of the piece
        traces[j][0, :] = 0
    with pytest.raises((ConstraintViolation, LookupImbalance)):
        check_traces(two.airs, traces, two.table_public_values)


def test_choose_split_rules(low_thresholds, monkeypatch):
    lb = 2
    monkeypatch.setattr(T, "SPLIT_MIN_ROWS", 1 << 12)
    monkeypatch.setattr(T, "SPLIT_MIN_SAVING", 2)
    # 2^18 + a quarter: split into 2^18 (full) and the rest
    assert T.choose_split("alu", (1 << 18) + (1 << 16), 1, lb, 1 << 20) == (1 << 18, 1)
    # past half of the next power of two: the two tables would not be smaller
    assert T.choose_split("alu", (1 << 18) + (1 << 17) + 1, 1, lb, 1 << 20) is None
    # a power of two exactly, or a table of at most SPLIT_MIN_ROWS rows: one table
    assert T.choose_split("alu", 1 << 18, 1, lb, 1 << 20) is None
    assert T.choose_split("alu", (1 << 11) + 10, 1, lb, 1) is None
    # not a splittable chip
    assert T.choose_split("ecall", (1 << 18) + 5, 1, lb, 1) is None
    assert T.choose_split("memory", (1 << 18) + 5, 1, lb, 1) is None
    # the saving is weighed against the run: 2 cells a cycle
    items = (1 << 14) + 100
    assert T.choose_split("alu", items, 1, lb, 1000) is not None
    assert T.choose_split("alu", items, 1, lb, 1 << 24) is None


def test_table_names_and_labels():
    assert T.table_names(()) == T.TABLES
    assert T.table_names(("alu", "shift"))[-2:] == ("alu+", "shift+")
    for bad in (("shift", "alu"), ("alu", "alu"), ("ecall",), ("memory",)):
        with pytest.raises(ValueError):
            T.table_names(bad)
    base = [[]] * len(T.TABLES)
    assert T.split_of_public_values(base) == ()
    assert T.split_of_public_values(base + [[T.INDEX["alu"]], [T.INDEX["div"]]]) == ("alu", "div")
    with pytest.raises(ValueError):
        T.split_of_public_values(base + [[T.INDEX["div"]], [T.INDEX["alu"]]])
    with pytest.raises(ValueError):
        T.split_of_public_values(base[:-1])


def test_no_split_keeps_the_18_table_bytes(monkeypatch):
    """At the default thresholds a small program splits nothing: "split" gives the bytes
    of "size" (the 18-table proof)."""
    for k, v in DEFAULTS.items():               # the module's lowered ones may be in force
        monkeypatch.setattr(T, k, v)
    hello = ROOT / "guests" / "bin" / "hello.elf"
    a = Prover(ProverConfig(slots="size", **FAST)).prove_program(str(hello), b"world")
    b = Prover(ProverConfig(slots="split", **FAST)).prove_program(str(hello), b"world")
    assert a.proof == b.proof
    assert len(decode_proof(b.proof).tables) == len(T.TABLES)


def test_command_line_splits_by_default_and_verifies(low_thresholds, tmp_path, capsys):
    """``prove PROGRAM.elf`` splits by default (the thresholds lowered here), ``--slots
    size`` gives the 18 tables; ``verify`` accepts both, and the security line is the
    split tables' (the CLI reads the pieces off the proof)."""
    from steadfast.prover.cli import main_prove, main_verify
    inp = tmp_path / "in.bin"
    inp.write_bytes(DATA)
    weak = ["--queries", "6", "--pow-bits", "1", "--backend", "host"]
    counts = {}
    for slots in ("split", "size"):
        out = tmp_path / f"{slots}.proof"
        argv = [str(ELF), "--input", str(inp), "-o", str(out), *weak]
        argv += [] if slots == "split" else ["--slots", "size"]
        code = main_prove(argv)
        o, e = capsys.readouterr()
        assert code == 0 and "Traceback" not in o + e, e
        counts[slots] = len(decode_proof(ProgramProof.from_bytes(out.read_bytes()).proof).tables)
        code = main_verify([str(out), "--elf", str(ELF), "--input", str(inp),
                            "--min-security-bits", "0"])
        o, e = capsys.readouterr()
        assert code == 0 and "Traceback" not in o + e, e
    assert counts["size"] == len(T.TABLES) < counts["split"]


def _split_block():
    from steadfast.rv32.blockfile import parse_block
    obj = {"format": "steadfast-block", "version": 2, "max_cycles": 1 << 20,
           "state_in": "00" * 32,
           "transactions": [{"elf": "examples/hello.elf", "input": b"world".hex()},
                            {"elf": "guests/bin/sha256.elf", "input": DATA.hex()},
                            {"elf": "guests/bin/sha256.elf", "input": DATA[:300].hex()},
                            {"elf": "examples/merkle.elf", "input": MERKLE_IN.hex()}]}
    return parse_block(obj, ROOT)


# examples/merkle.c's input: 40 leaves of 8 words -> 39 SYS_POSEIDON2 calls, P2CALL's 39
# rows in 32 + a piece of 8
MERKLE_IN = (40).to_bytes(4, "little") + b"".join(
    (7 * i + 3).to_bytes(4, "little") for i in range(40 * 8))


@pytest.fixture(scope="module")
def block_proof(low_thresholds):
    blk = _split_block()
    p = Prover(ProverConfig(**FAST)).prove_block(blk)
    return blk, p


def test_block_splits_and_verifies(block_proof):
    """A block's transactions split their chips too: the pieces after the shared tables,
    each labelled 18 x transaction + chip; the proof verifies (the one-machine verifier
    and the library's)."""
    from steadfast.prover.api import verify
    from steadfast.rv32 import block as rblock
    blk, p = block_proof
    d = decode_proof(p.proof)
    pieces = rblock.pieces_of(d, 4)
    assert pieces and {i for i, _ in pieces} >= {1, 2} and (3, "p2call") in pieces, pieces
    assert len(d.tables) == rblock.num_tables(4) + len(pieces)
    tx_slots, _ = rblock.slots_of(d, 4)
    assert rblock.pieces_in(tx_slots) == pieces
    res = verify(p, block=blk, min_security_bits=0)
    assert res.exit_codes == [0, 0, 0, 0] and res.outputs[0].startswith(b"hello from rv32im")


def _with_labels(d, base, labels):
    import copy
    d = copy.deepcopy(d)
    for tp, pv in zip(d.tables[base:], labels):
        tp.public_values = np.asarray(pv, dtype=tp.public_values.dtype)
    return d


@pytest.mark.parametrize("how", ["no transaction", "ecall", "out of order", "another tx"])
def test_block_piece_label_refused(block_proof, how):
    import copy
    from steadfast.prover.api import verify
    from steadfast.prover.blocks.proof import TxBlockProof
    from steadfast.rv32 import block as rblock
    blk, p = block_proof
    d = copy.deepcopy(decode_proof(p.proof))
    base = rblock.num_tables(4)
    labels = [[int(v) for v in tp.public_values] for tp in d.tables[base:]]
    assert len(labels) >= 2
    if how == "no transaction":
        labels[-1] = [18 * 4 + T.INDEX["alu"]]
    elif how == "ecall":
        labels[0] = [18 * 1 + T.INDEX["ecall"]]
    elif how == "out of order":
        labels[0], labels[1] = labels[1], labels[0]
    else:       # a valid label, in order: the same chip of the transaction before
        j = next(j for j in range(len(labels)) if labels[j][0] >= 18
                 and (j == 0 or labels[j - 1][0] < labels[j][0] - 18))
        labels[j] = [labels[j][0] - 18]
        assert rblock.pieces_of(_with_labels(d, base, labels), 4)       # well-formed
    d = _with_labels(d, base, labels)
    bad = TxBlockProof.from_bytes(p.to_bytes())
    bad = type(bad)(**{**bad.__dict__, "proof": encode(d)})
    with pytest.raises(VerificationError) as e:
        verify(bad, block=blk, min_security_bits=0)
    if how != "another tx":
        assert isinstance(e.value, PublicValuesError) and e.value.table == "rv32_pieces"


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(T.SPLITTABLE), items=st.integers(1, 1 << 22),
       cycles=st.integers(0, 1 << 22))
def test_choose_split_property(name, items, cycles):
    """Whenever choose_split splits: the chip's table is a full power of two past
    SPLIT_MIN_ROWS, the piece holds the rest in at most as many rows, and the two commit
    at least SPLIT_MIN_SAVING cells a cycle fewer than the one table would."""
    from steadfast.rv32.chips.common import pow2_rows
    got = T.choose_split(name, items, 1, 2, cycles)
    rows = pow2_rows(items)
    if got is None:
        return
    first, k2 = got
    rest = items - first
    assert first & (first - 1) == 0 and rows > T.SPLIT_MIN_ROWS and first == rows // 2
    assert 0 < rest and pow2_rows(-(-rest // k2)) <= first
    cells = T._slot_shape(name, 2, 1)[1]
    two = first * cells + pow2_rows(-(-rest // k2)) * T._slot_shape(name, 2, k2)[1]
    assert rows * cells - two >= max(1, T.SPLIT_MIN_SAVING * cycles)


def test_block_pieces_stay_within_the_table_count(low_thresholds, monkeypatch):
    """The proof format counts tables in a u16: a block splits a transaction's chips only
    while 10 more tables (one a SPLITTABLE table) still fit (the limit lowered here to
    the block's tables + 10: only the first transaction splits)."""
    from steadfast.prover.api import verify
    from steadfast.rv32 import block as rblock
    monkeypatch.setattr(rblock, "MAX_PROOF_TABLES", rblock.num_tables(4) + len(T.SPLITTABLE))
    blk = _split_block()
    p = Prover(ProverConfig(**FAST)).prove_block(blk)
    d = decode_proof(p.proof)
    pieces = rblock.pieces_of(d, 4)
    assert pieces and {i for i, _ in pieces} == {0}, pieces
    assert len(d.tables) <= rblock.MAX_PROOF_TABLES
    assert verify(p, block=blk, min_security_bits=0).exit_codes == [0, 0, 0, 0]


def test_cells_split_slots_chips_and_pieces_and_verifies(low_thresholds):
    """``slots="cells-split"``: the slotted chips take the fewest-cells k (as "cells"),
    then split as "split" does, the piece at its own fewest-cells k -- a program's proof,
    a run in segments and a block's verify, with pieces of more than one item a row."""
    from steadfast.prover.api import verify
    from steadfast.rv32 import block as rblock
    prog = rv32.load_elf(str(ELF))
    ex = rv32.execute(prog, DATA, 1 << 20, record=True)
    cells = build_traces(prog, ex, 1 << 20, slot_objective="cells")
    both = build_traces(prog, ex, 1 << 20, slot_objective="cells-split")
    assert both.split and not cells.split
    for c in T.SLOTTED:
        assert both.slots[c] == cells.slots[c], c
    for c in both.split:
        rest = both.real_rows[c + "+"]
        assert both.slots[c + "+"] == T.choose_slots(c, rest, 2, "cells")
    assert max(both.slots[c + "+"] for c in both.split) > 1, both.slots
    assert sum(both.cells().values()) < sum(cells.cells().values())
    p = Prover(ProverConfig(slots="cells-split", **FAST)).prove_program(str(ELF), DATA)
    d = decode_proof(p.proof)
    assert split_of(d) == both.split and slots_of(d) == both.slots
    assert verify_program(p.to_bytes(), str(ELF), DATA, min_security_bits=None).exit_code == 0
    seg = Prover(ProverConfig(slots="cells-split", segment_cycles=1 << 14, **FAST)) \
        .prove_program(str(ELF), DATA)
    assert len(seg.segments) >= 2 and all(split_of(decode_proof(r.proof)) for r in seg.segments)
    assert verify_program(seg.to_bytes(), str(ELF), DATA, min_security_bits=None).exit_code == 0
    blk = _split_block()
    bp = Prover(ProverConfig(slots="cells-split", **FAST)).prove_block(blk)
    bd = decode_proof(bp.proof)
    tx_slots, _ = rblock.slots_of(bd, 4)
    assert rblock.pieces_of(bd, 4) and max(k for s in tx_slots for k in s.values()) > 1
    assert verify(bp, block=blk, min_security_bits=0).exit_codes == [0, 0, 0, 0]
