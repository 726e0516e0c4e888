"""The reference VM: instruction semantics, execution errors, digests, sample blocks."""
from __future__ import annotations

import numpy as np
import pytest

from steadfast.vm import isa
from steadfast.vm.block import parse_block
from steadfast.vm.interpreter import ExecutionError, claim_mismatches, execute
from steadfast.vm.poseidon2 import _permute_py, compress, permute_one, permute_rows, sponge, statement_digest
from steadfast.vm.programs import make_block, sized_block
from steadfast.vm.statement import (PV_FINAL, PV_INITIAL, PV_INPUTS, PV_MAX_CYCLES, PV_OUTPUTS,
                                    PV_PROGRAMS, block_public_values)

from tests.vm_blocks import empty_block, hash_heavy_block, memory_heavy_block, one_tx_block
from tests.kat import KAT_IN, KAT_OUT

P = isa.P


def run(code, inputs=(), memory=(), memory_size=64, max_cycles=None):
    """Execute one transaction of ``code``; return (record, final memory)."""
    blk = make_block([("t", code)], [(0, list(inputs))], memory_size, memory, max_cycles)
    rec = execute(blk)
    return rec, rec.final_memory


def test_poseidon2_known_answer_all_forms():
    assert _permute_py(KAT_IN) == KAT_OUT
    assert permute_one(KAT_IN) == KAT_OUT
    r = permute_rows(np.array([KAT_IN, [0] * 16], dtype=np.uint32))
    assert r["out"][0].tolist() == KAT_OUT
    assert r["out"][1].tolist() == _permute_py([0] * 16)
    # the stored values are y = x^7 and t = x^3 of the same x: y^3 = t^7
    y = r["full_sbox"].astype(np.uint64).ravel()
    t = r["full_cube"].astype(np.uint64).ravel()
    assert all(pow(int(a), 3, P) == pow(int(b), 7, P) for a, b in zip(y, t))
    yp, tp = r["part_sbox"].ravel(), r["part_cube"].ravel()
    assert all(pow(int(a), 3, P) == pow(int(b), 7, P) for a, b in zip(yp, tp))


def test_sponge_matches_verifier_hash_rows():
    from steadfast.verifier.poseidon2 import hash_rows
    vals = list(range(1, 41))
    assert sponge(vals) == hash_rows(np.array([vals], dtype=np.uint32))[0].tolist()
    left, right = list(range(8)), list(range(8, 16))
    assert compress(left, right) == _permute_py(left + right)[:8]


@pytest.mark.parametrize("op,x,y,want", [
    ("ADD", 5, 7, 12), ("ADD", P - 1, 2, 1), ("SUB", 3, 5, P - 2), ("MUL", 1 << 20, 1 << 20, (1 << 40) % P),
    ("LT", 3, 5, 1), ("LT", 5, 3, 0), ("LT", 4, 4, 0), ("LT", 0, 65535, 1)])
def test_binary_ops(op, x, y, want):
    _, mem = run([["READ", 0], ["READ", 1], [op, 2, 0, 1], ["WRITE", 2], ["HALT"]], [x, y])
    assert mem[2] == want


def test_set_addi_load_store_jumps():
    code = [["SET", 0, 20], ["SET", 1, -1], ["ADDI", 2, 1, 5],      # m2 = 4
            ["STORE", 0, 2],                                        # m[20] = 4
            ["LOAD", 3, 0],                                         # m3 = m[20] = 4
            ["SET", 4, 3],
            ["ADDI", 4, 4, -1], ["BNZ", 4, 6],                      # loop 3 times
            ["JMP", 10], ["SET", 5, 99],                            # skipped
            ["HALT"]]
    rec, mem = run(code)
    assert mem[1] == P - 1 and mem[2] == 4 and mem[20] == 4 and mem[3] == 4
    assert mem[4] == 0 and mem[5] == 0
    pcs = [rec.rom.source[p][1] for p in rec.pc.tolist() if rec.rom.source[p][0] == 0]
    assert pcs == [0, 1, 2, 3, 4, 5, 6, 7, 6, 7, 6, 7, 8, 10]


def test_hash_instruction_and_io_chains():
    code = [["READ", 8], ["HASH", 24, 8, 16], ["WRITE", 24], ["WRITE", 31], ["HALT"]]
    rec, mem = run(code, [123], memory=[(16, list(range(1, 9)))])
    want = compress([123, 0, 0, 0, 0, 0, 0, 0], list(range(1, 9)))
    assert mem[24:32] == want
    assert rec.outputs == ((want[0], want[7]),)
    pv = block_public_values(rec.block, rec.rom, rec.final_digest)
    assert pv[PV_INPUTS] == rec.input_digest and pv[PV_OUTPUTS] == rec.output_digest
    # the statement digests: the sponge from (0 x 8, length, 0 x 7)
    assert pv[PV_INITIAL] == rec.initial_digest == statement_digest(rec.block.dense_memory())
    assert pv[PV_FINAL] == rec.final_digest == statement_digest(mem)
    assert pv[PV_PROGRAMS] == statement_digest(rec.rom.flat())
    assert pv[PV_MAX_CYCLES] == rec.block.max_cycles == 1 << 21


@pytest.mark.parametrize("code,inputs,fragment,where", [
    ([["FOO", 1], ["HALT"]], [], "bad opcode 'FOO'", "$.programs[0].code[0]"),
    ([["JMP", 7]], [], "jump target 7 out of range", "$.programs[0].code[0]"),
    ([["SET", 64, 1], ["HALT"]], [], "memory address 64 out of range", "$.programs[0].code[0]"),
    ([["HASH", 0, 60, 0], ["HALT"]], [], "60..67 out of range", "$.programs[0].code[0]"),
    ([["SET", 0, 1]], [], "ran past the end", "$.programs[0].code[0]"),
    ([["READ", 0], ["HALT"]], [], "READ past the end of the inputs", "$.programs[0].code[0]"),
    ([["HALT"]], [5], "1 unread input", "$.programs[0].code[0]"),
    ([["SET", 0, 70000], ["LT", 1, 0, 0], ["HALT"]], [], "LT operand out of range",
     "$.programs[0].code[1]"),
    ([["SET", 0, 64], ["LOAD", 1, 0], ["HALT"]], [], "LOAD address m[0] = 64", "$.programs[0].code[1]"),
    ([["SET", 0, 99], ["STORE", 0, 0], ["HALT"]], [], "STORE address", "$.programs[0].code[1]"),
    ([["JMP", 0]], [], "cycle limit 100 reached", "$.programs[0].code[0]"),
])
def test_execution_errors_say_where(code, inputs, fragment, where):
    obj = {"format": "steadfast-block", "version": 1, "memory_size": 64, "initial_memory": [],
           "max_cycles": 100, "programs": [{"name": "bad", "code": code}],
           "transactions": [{"program": 0, "inputs": inputs, "outputs": []}]}
    with pytest.raises(ExecutionError) as ei:
        execute(parse_block(obj))
    err = ei.value
    assert fragment in str(err)
    assert "transaction 0 (program 'bad')" in str(err)
    assert err.tx == 0 and err.cycle >= 9          # after the 8-cycle prologue and DISPATCH
    assert err.path == where
    assert f"cycle {err.cycle}" in str(err)


def test_unexecuted_bad_instruction_is_harmless():
    code = [["JMP", 2], ["FOO", 1, 2, 3], ["HALT"]]
    rec, _ = run(code)
    assert rec.rom.rows[rec.rom.entries[0] + 1, 0] == isa.INVALID


def test_empty_block_is_prologue_dispatch_epilogue_stop():
    blk = empty_block()
    rec = execute(blk)
    ops = rec.rom.rows[rec.pc, 0].tolist()
    assert ops == [isa.ABSORB_INIT] * 8 + [isa.DISPATCH] + [isa.ABSORB_FINAL] * 8 + [isa.STOP]
    assert rec.initial_digest == rec.final_digest


def test_claim_mismatches_name_the_output():
    blk = one_tx_block()
    obj = blk.to_json()
    obj["transactions"][0]["outputs"] = [6]
    rec = execute(parse_block(obj))
    assert claim_mismatches(rec) == ["$.transactions[0].outputs[0]: claims 6, execution wrote 5"]
    obj["transactions"][0]["outputs"] = []
    assert "claims 0 output(s), execution wrote 1" in claim_mismatches(execute(parse_block(obj)))[0]
    assert claim_mismatches(execute(blk)) == []


def test_sample_blocks_run():
    for blk in (empty_block(), one_tx_block(), hash_heavy_block(), memory_heavy_block()):
        rec = execute(blk)
        assert claim_mismatches(rec) == []
    rec = execute(hash_heavy_block())
    assert int((rec.rom.rows[rec.pc, 0] == isa.HASH).sum()) == 30


@pytest.mark.parametrize("k,share", [(10, 0.0), (10, 0.5), (11, 0.25)])
def test_sized_blocks_fill_their_power_of_two(k, share):
    blk = sized_block(k, share, seed=3, memory_size=256, table_size=64, n_tx=3)
    rec = execute(blk)
    assert (1 << k) - 40 <= rec.cycles <= 1 << k
    got = float((rec.rom.rows[rec.pc, 0] == isa.HASH).mean())
    assert abs(got - share) < 0.05
