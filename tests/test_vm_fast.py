"""The compiled interpreter (vm/fastexec.py) and trace kernels (vm/tracekernels.py) against
the implementation they replaced, kept verbatim in tests/vm_reference.py, and against
digests of that implementation's outputs computed before the change: execution records,
every trace and the execution errors must be identical, bit for bit."""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from steadfast.vm import fastexec, isa, traces as TR
from steadfast.vm.airs import slot_menu
from steadfast.vm.block import load_block, parse_block
from steadfast.vm.interpreter import ExecutionError, _execute_py, execute
from steadfast.vm.programs import sized_block
from steadfast.vm.rom import build_rom

from tests import vm_reference as REF
from tests.vm_blocks import empty_block, hash_heavy_block, memory_heavy_block, one_tx_block

P = isa.P
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "block.json"
SMALL = {8: dict(memory_size=256, n_tx=4), 9: dict(memory_size=128, n_tx=3)}


def _h(*objs) -> str:
    m = hashlib.sha256()
    for o in objs:
        if isinstance(o, np.ndarray):
            m.update(f"{o.dtype}{o.shape}".encode())
            m.update(np.ascontiguousarray(o).tobytes())
        else:
            m.update(repr(o).encode())
    return m.hexdigest()[:16]


def _record_digest(rec) -> str:
    return _h(rec.pc, rec.va, rec.vb, rec.vc, rec.hash_cycle, rec.hash_in, rec.hash_out,
              rec.outputs, rec.final_memory, rec.initial_digest, rec.final_digest,
              rec.input_digest, rec.output_digest)


def _traces_digest(rec) -> str:
    cpu = TR.cpu_trace(rec)
    acc = TR.memory_accesses(cpu)
    mems = [TR.memory_trace(acc, s) for s in (1, 3, 9, 16)]
    p2 = [TR.poseidon2_trace(rec.hash_in, k) for k in (1, 2, 3)]
    return _h(cpu, acc, *mems, TR.range_counts(cpu, mems[1]), TR.program_counts(cpu, 1 << 12),
              *p2)


def _block(name, k, share, seed):
    if name == "example":
        return load_block(EXAMPLE)
    return sized_block(k, share, seed=seed, **SMALL.get(k, {}))


# (record digest, traces digest) of the implementation at 687c514 (tests/vm_reference.py),
# computed with that code before the compiled paths existed
SAVED = {
    ('example', None, None, None): ('c5497e1175fa8e5e', '5d42139e7930caf3'),
    ('sized', 8, 0.0, 0): ('a2509e227e866439', 'd0ea436570d4c184'),
    ('sized', 8, 0.0, 1): ('27f040bf6302fe0e', 'bdb34501fe29e884'),
    ('sized', 8, 0.25, 0): ('3f984483f76d0ef6', 'b78622594cf32200'),
    ('sized', 8, 0.25, 1): ('411636455eac1e85', 'c8520082f063c1f4'),
    ('sized', 8, 0.5, 0): ('53711aa97e668f1b', 'f7d880aafa48f674'),
    ('sized', 8, 0.5, 1): ('32d622d61736d274', '52e92334647cb289'),
    ('sized', 9, 0.0, 9): ('ba4ea08f7331a799', 'e0bb26e7a97e2beb'),
    ('sized', 9, 0.25, 9): ('b82e60d5ca6c8675', '89bba444e8201af2'),
    ('sized', 9, 0.5, 9): ('b8fdc93f2ff93bf9', '8e596fa0eab4597a'),
    ('sized', 10, 0.0, 0): ('6f0146525366998a', '1c2801e0be833f0b'),
    ('sized', 10, 0.0, 1): ('3d608a9e3b8c0741', 'a05d3c386842ec23'),
    ('sized', 10, 0.25, 0): ('a4fbb280a4e1f783', 'bd895fbe720db65f'),
    ('sized', 10, 0.25, 1): ('6f67335e35601060', '170cf517d16c8e6d'),
    ('sized', 10, 0.5, 0): ('43e3681fe907b81a', '23c4a97a27f23118'),
    ('sized', 10, 0.5, 1): ('b3aa36300b8c552e', '83b7e3ab6583f986'),
    ('sized', 11, 0.0, 11): ('11f3b37b857ed857', '2a1047183be9e2b2'),
    ('sized', 11, 0.25, 11): ('97adab030c375584', '677ece81f0134a0c'),
    ('sized', 11, 0.5, 11): ('0e43f4974854c64f', 'ad0e6a01073b80a9'),
    ('sized', 12, 0.0, 12): ('d34e6fe39a6b3f9a', 'a2917452aff3e653'),
    ('sized', 12, 0.25, 12): ('9b2660274be2fead', '8b3088ea76ba9191'),
    ('sized', 12, 0.5, 12): ('7eb46e61433b8002', '4ebfc50c391db420'),
}


@pytest.mark.parametrize("key", list(SAVED))
def test_matches_saved_digests_of_the_earlier_code(key):
    rec = execute(_block(*key))
    assert (_record_digest(rec), _traces_digest(rec)) == SAVED[key]


def _same_record(got, want):
    for f in ("pc", "va", "vb", "vc", "hash_cycle", "hash_in", "hash_out"):
        x, y = getattr(got, f), getattr(want, f)
        assert x.dtype == y.dtype and x.shape == y.shape, f
        assert np.array_equal(x, y), f
    for f in ("outputs", "final_memory", "initial_digest", "final_digest", "input_digest",
              "output_digest"):
        x, y = getattr(got, f), getattr(want, f)
        assert type(x) is type(y) and x == y, f
        assert all(type(a) is type(b) for a, b in zip(x, y)), f
    assert got.block is want.block


def _same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape and a.flags.c_contiguous
    assert np.array_equal(a, b)


def _same_traces(rec, max_cycles=None):
    cpu = TR.cpu_trace(rec, max_cycles)
    _same(cpu, REF.cpu_trace_ref(rec, max_cycles))
    acc = TR.memory_accesses(cpu)
    _same(acc, REF.memory_accesses_ref(cpu))
    for s in slot_menu("memory"):
        mem = TR.memory_trace(acc, s)
        _same(mem, REF.memory_trace_ref(acc, s))
        _same(TR.range_counts(cpu, mem), REF.range_counts_ref(cpu, mem))
    for height in (rec.rom.rows.shape[0], 1 << 12):
        _same(TR.program_counts(cpu, height), REF.program_counts_ref(cpu, height))
    for k in slot_menu("poseidon2"):
        _same(TR.poseidon2_trace(rec.hash_in, k), REF.poseidon2_trace_ref(rec.hash_in, k))


BLOCKS = [("example", None, None, None), ("sized", 8, 0.0, 0), ("sized", 8, 0.5, 1),
          ("sized", 9, 0.25, 2), ("sized", 10, 0.0, 3), ("sized", 10, 0.25, 0),
          ("sized", 11, 0.5, 4), ("sized", 12, 0.25, 5)]


@pytest.mark.parametrize("key", BLOCKS)
def test_record_and_traces_match_reference(key):
    blk = _block(*key)
    rec = execute(blk)
    _same_record(rec, REF.execute_ref(blk, rec.rom))
    _same_record(rec, _execute_py(blk, rec.rom))
    _same_traces(rec)


@pytest.mark.parametrize("make", [empty_block, one_tx_block, hash_heavy_block,
                                  memory_heavy_block])
def test_sample_blocks_match_reference(make):
    blk = make()
    rec = execute(blk)
    _same_record(rec, REF.execute_ref(blk))
    _same_traces(rec)
    # a false limit (slack outside [0, 2^21)) and a tight one
    _same_traces(rec, rec.cycles - 1)
    _same_traces(rec, rec.cycles)


# --------------------------------------------------------------------------- errors

def _obj(code, inputs=(), max_cycles=100, memory=(), memory_size=64, n_tx=1):
    return {"format": "steadfast-block", "version": 1, "memory_size": memory_size,
            "initial_memory": [{"address": a, "values": list(v)} for a, v in memory],
            "max_cycles": max_cycles, "programs": [{"name": "p", "code": code}],
            "transactions": [{"program": 0, "inputs": list(inputs), "outputs": []}] * n_tx}


def _outcome(fn, blk):
    try:
        return "ok", fn(blk)
    except ExecutionError as e:
        return "error", (str(e), e.reason, e.where, e.cycle, e.tx, e.path)


def _same_outcome(blk):
    assert fastexec.rom_ok(build_rom(blk), blk.memory_size)     # the compiled loop runs it
    got, want = _outcome(execute, blk), _outcome(REF.execute_ref, blk)
    assert got[0] == want[0], (got, want)
    if got[0] == "error":
        assert got[1] == want[1]
    else:
        _same_record(got[1], want[1])
        _same_traces(got[1])
    return got


@pytest.mark.parametrize("code,inputs", [
    ([["READ", 0], ["READ", 1], ["LT", 2, 0, 1], ["HALT"]], [1 << 16, 3]),
    ([["READ", 0], ["READ", 1], ["LT", 2, 0, 1], ["HALT"]], [3, P - 1]),
    ([["SET", 0, 64], ["LOAD", 1, 0], ["HALT"]], []),
    ([["SET", 0, 99], ["STORE", 0, 1], ["HALT"]], []),
    ([["READ", 0], ["HALT"]], []),
    ([["READ", 0], ["HALT"]], [5, 6]),
    ([["SET", 0, 1]], []),
    ([["FOO", 1], ["HALT"]], []),
    ([["SET", 0, 64], ["HALT"]], []),
    ([["JMP", 0]], []),
    ([["SET", 0, 5], ["SET", 1, 63], ["HASH", 2, 0, 1], ["HALT"]], []),
])
def test_errors_match_reference(code, inputs):
    kind, _ = _same_outcome(parse_block(_obj(code, inputs)))
    assert kind == "error" or code[-1] == ["HALT"]


@pytest.mark.parametrize("max_cycles", [1, 8, 9, 10, 12, 13, 30, 31, 32])
def test_cycle_limit_everywhere_matches_reference(max_cycles):
    # the limit falls in the prologue, on DISPATCH, in the program, in the epilogue, on STOP
    code = [["READ", 0], ["WRITE", 0], ["HALT"]]
    _same_outcome(parse_block(_obj(code, [7], max_cycles=max_cycles, memory_size=64)))


def test_non_canonical_memory_runs_the_python_loop():
    from steadfast.vm.block import Block
    blk = parse_block(_obj([["ADD", 2, 0, 1], ["WRITE", 2], ["HALT"]], memory=[(0, [1, 2])]))
    odd = Block(blk.memory_size, ((0, (P + 1, 2)),), blk.programs, blk.transactions,
                blk.max_cycles, blk.version)
    rec = execute(odd)
    _same_record(rec, REF.execute_ref(odd, rec.rom))
    assert rec.outputs == ((3,),)
    assert rec.hash_in.max() > P and rec.va.max() > P       # the traces reduce them mod p
    _same_traces(rec)


# --------------------------------------------------------------------------- properties

_USER = ["SET", "ADD", "SUB", "MUL", "ADDI", "LT", "LOAD", "STORE", "JMP", "BNZ", "HASH",
         "READ", "WRITE", "HALT"]


@st.composite
def _programs(draw):
    """Short random programs over 32 cells: every instruction kind, operands anywhere
    (out-of-range jumps become INVALID rows), values near 0, p and 2^16; mostly forward
    jumps and inputs matching the READs so that most runs complete, the rest fail in every
    way the interpreter can."""
    n = draw(st.integers(1, 12))
    msize = 32
    addr = st.integers(0, msize - 1)
    waddr = st.integers(0, msize - 8)
    small = st.one_of(st.integers(0, 40), st.integers(P - 3, P - 1), st.integers(-3, 70000))
    code = []
    for i in range(n):
        op = draw(st.sampled_from(_USER))
        target = st.one_of(st.integers(min(i + 1, n - 1), n - 1), st.integers(0, n - 1))
        if op == "SET":
            ins = [op, draw(addr), draw(small)]
        elif op in ("ADD", "SUB", "MUL", "LT"):
            ins = [op, draw(addr), draw(addr), draw(addr)]
        elif op == "ADDI":
            ins = [op, draw(addr), draw(addr), draw(small)]
        elif op in ("LOAD", "STORE"):
            ins = [op, draw(addr), draw(addr)]
        elif op == "JMP":
            ins = [op, draw(st.one_of(target, st.just(n)))]     # n: out of range -> INVALID
        elif op == "BNZ":
            ins = [op, draw(addr), draw(target)]
        elif op == "HASH":
            ins = [op, draw(waddr), draw(waddr), draw(waddr)]
        elif op in ("READ", "WRITE"):
            ins = [op, draw(addr)]
        else:
            ins = [op]
        code.append(ins)
    if draw(st.integers(0, 4)):
        code.append(["HALT"])
    reads = sum(ins[0] == "READ" for ins in code)
    n_in = draw(st.one_of(st.just(reads), st.integers(0, 4)))
    inputs = draw(st.lists(st.one_of(st.integers(0, 70000), st.integers(0, P - 1)),
                           min_size=n_in, max_size=n_in))
    memory = draw(st.lists(st.one_of(st.integers(0, 40), st.integers(0, P - 1)),
                           min_size=0, max_size=msize))
    n_tx = draw(st.integers(1, 3))
    max_cycles = draw(st.one_of(st.integers(1, 120), st.just(400)))
    return parse_block(_obj(code, inputs, max_cycles, [(0, memory)] if memory else (),
                            msize, n_tx))


@settings(max_examples=150, deadline=None)
@given(_programs())
def test_random_programs_match_reference(blk):
    _same_outcome(blk)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 40), st.integers(0, 3), st.sampled_from([1, 2, 3]), st.data())
def test_poseidon2_trace_any_states(perms, odd, k, data):
    # canonical and non-canonical uint32 lanes; the padding rows permute zero
    hi = [P - 1, P, P + 5, (1 << 32) - 1]
    vals = data.draw(st.lists(st.one_of(st.integers(0, P - 1), st.sampled_from(hi)),
                              min_size=16 * perms, max_size=16 * perms))
    states = np.array(vals, dtype=np.uint32).reshape(perms, 16)
    _same(TR.poseidon2_trace(states, k), REF.poseidon2_trace_ref(states, k))


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_memory_trace_any_accesses(data):
    # ties in (address, time), big and negative values (the lexsort fallback), any slots
    k = data.draw(st.integers(0, 60))
    lo = data.draw(st.sampled_from([0, -5]))
    hi = data.draw(st.sampled_from([6, 1 << 20, (1 << 31) - 1, 1 << 40]))
    cell = st.one_of(st.integers(lo, 6), st.integers(lo, hi))
    acc = np.array(data.draw(st.lists(st.tuples(cell, cell, cell, st.integers(-1, 2)),
                                      min_size=k, max_size=k)), dtype=np.int64).reshape(k, 4)
    s = data.draw(st.sampled_from(slot_menu("memory")))
    _same(TR.memory_trace(acc, s), REF.memory_trace_ref(acc, s))


def test_range_counts_error_matches_reference():
    rec = execute(parse_block(_obj([["READ", 0], ["READ", 1], ["LT", 2, 0, 1], ["HALT"]],
                                   [3, 9])))
    cpu = TR.cpu_trace(rec)
    mem = TR.memory_trace(TR.memory_accesses(cpu))
    L = TR.CPU_LAYOUT.idx
    bad = cpu.copy()
    bad[np.nonzero(bad[:, L["is_lt"]] == 1)[0][0], L["d"]] = 1 << 16
    for c in (bad, cpu):
        m = mem.copy()
        if c is cpu:
            M = TR.MEMORY_LAYOUT.idx
            m[0, M["gap_hi"]] = 1 << 8
        with pytest.raises(ValueError) as want:
            REF.range_counts_ref(c, m)
        with pytest.raises(ValueError) as got:
            TR.range_counts(c, m)
        assert str(got.value) == str(want.value)


def test_memory_accesses_of_an_int64_trace():
    rec = execute(one_tx_block())
    cpu = TR.cpu_trace(rec)
    _same(TR.memory_accesses(cpu.astype(np.int64)), REF.memory_accesses_ref(cpu))


@pytest.mark.parametrize("row,field,value", [(-1, 0, isa.ADD), (None, 1, 60), (None, 3, 99),
                                             (None, 3, -1), (None, 2, P)])
def test_a_rom_the_loop_cannot_run_unchecked_runs_the_python_loop(row, field, value):
    import dataclasses
    blk = parse_block(_obj([["SET", 3, 9], ["HASH", 8, 0, 16], ["JMP", 3], ["HALT"]]))
    rom = build_rom(blk)
    rows = rom.rows.copy()
    if row is None:        # the program's SET, HASH or JMP row, one field out of range
        row = rom.entries[0] + {1: 1, 3: 2, 2: 0}[field]
    rows[row, field] = value
    odd = dataclasses.replace(rom, rows=rows)
    assert fastexec.rom_ok(rom, blk.memory_size) and not fastexec.rom_ok(odd, blk.memory_size)

    def outcome(fn):
        try:
            return fn(blk, odd)
        except Exception as exc:        # noqa: BLE001 -- whatever Python raises
            return type(exc), str(exc)
    got, want = outcome(execute), outcome(_execute_py)
    if isinstance(want, tuple):
        assert got == want
    else:
        _same_record(got, want)
