"""The five tables: honest traces satisfy every constraint and balance every bus; altered
traces and false claims fail, naming the constraint (AIR check mode)."""
from __future__ import annotations

import numpy as np
import pytest

from steadfast.air import ConstraintViolation, LookupImbalance, check_constraints, check_traces
from steadfast.vm import isa
from steadfast.vm.airs import CPU_LAYOUT, MEMORY_LAYOUT, P2_LAYOUT, block_airs
from steadfast.vm.block import parse_block
from steadfast.vm.interpreter import execute
from steadfast.vm.statement import PV_OUTPUTS
from steadfast.vm.traces import build_traces

from tests.vm_blocks import empty_block, hash_heavy_block, memory_heavy_block, one_tx_block

P = isa.P
BLOCKS = {"empty": empty_block, "one_tx": one_tx_block, "hash_heavy": hash_heavy_block,
          "memory_heavy": memory_heavy_block}
_cache: dict = {}


def traces(name):
    if name not in _cache:
        # one access per MEMORY row: the tests below edit MEMORY by MEMORY_LAYOUT's
        # columns (slotted MEMORY: tests/test_memory_slots.py)
        _cache[name] = build_traces(execute(BLOCKS[name]()), slots={"memory": 1})
    bt = _cache[name]
    return bt.airs, [t.copy() for t in bt.traces], bt.table_public_values


def test_degrees_and_parts():
    airs = block_airs(np.zeros((3, 4), dtype=np.int64))
    by = {a.name: a for a in airs}
    assert [a.name for a in airs] == ["cpu", "program", "memory", "range", "poseidon2"]
    # the default log_blowup 2: CPU's LogUp batched to degree 5 (8 aux, 4 parts; format 5)
    assert (by["cpu"].max_degree, by["cpu"].num_parts, by["cpu"].aux_width) == (5, 4, 8)
    assert by["program"].max_degree <= 2 and by["program"].num_parts == 1
    assert by["range"].num_parts == 1 and by["range"].fixed_height == 1 << 16
    assert (by["poseidon2"].max_degree, by["poseidon2"].num_parts) == (3, 2)
    assert (by["memory"].max_degree, by["memory"].num_parts) == (3, 2)     # k = 1: 2 + 2 < 1 + 4
    one = {a.name: a for a in block_airs(np.zeros((3, 4), dtype=np.int64), log_blowup=1)}
    assert (one["cpu"].max_degree, one["cpu"].num_parts, one["cpu"].aux_width) == (3, 2, 15)
    assert by["memory"].main_width == MEMORY_LAYOUT.width == 7
    assert len(by["memory"].interactions) == 4
    assert by["cpu"].main_width == CPU_LAYOUT.width and by["poseidon2"].main_width == P2_LAYOUT.width


@pytest.mark.parametrize("name", list(BLOCKS))
def test_honest_traces_pass(name):
    airs, ts, pvs = traces(name)
    check_traces(airs, ts, pvs)
    cpu = ts[0]
    rec_cycles = int(cpu[:, CPU_LAYOUT.idx["is_stop"]].nonzero()[0][0]) + 1
    assert cpu.shape[0] >= rec_cycles and cpu.shape[0] & (cpu.shape[0] - 1) == 0


def test_example_block_passes():
    import os
    from steadfast.vm.block import load_block
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bt = build_traces(execute(load_block(os.path.join(root, "examples", "block.json"))))
    check_traces(bt.airs, bt.traces, bt.table_public_values)


def _violation(airs, ts, pvs):
    with pytest.raises((ConstraintViolation, LookupImbalance)) as ei:
        check_traces(airs, ts, pvs)
    return ei.value


def test_false_claimed_outputs_name_the_constraint():
    obj = one_tx_block().to_json()
    obj["transactions"][0]["outputs"] = [6]            # execution writes 5
    bt = build_traces(execute(parse_block(obj)))
    err = _violation(bt.airs, bt.traces, bt.table_public_values)
    assert isinstance(err, ConstraintViolation)
    assert (err.table, err.constraint) == ("cpu", "output_digest[0]")


def _row_of(cpu, op):
    return int(np.nonzero(cpu[:, CPU_LAYOUT.idx[f"is_{isa.OPCODE_NAMES[op].lower()}"]])[0][0])


@pytest.mark.parametrize("op,column,constraint", [
    (isa.ADD, ("v", 16), "add"),
    (isa.READ, ("v", 3), "event_position"),
    (isa.READ, ("v", 1), "event_tag"),
    (isa.DISPATCH, ("v", 2), "event_tx"),
    (isa.HALT, ("tx", 0), "tx_step"),
])
def test_altered_cpu_cell_fails(op, column, constraint):
    airs, ts, pvs = traces("one_tx")
    cpu = ts[0]
    r = _row_of(cpu, op)
    j = CPU_LAYOUT.idx[column[0]] + column[1]
    if column[0] == "tx":
        r += 1                                         # the row after HALT keeps the old tx
    cpu[r, j] = (int(cpu[r, j]) + 1) % P
    err = _violation(airs, ts, pvs)
    assert isinstance(err, ConstraintViolation) and err.table == "cpu"
    assert err.constraint == constraint


def test_altered_branch_flag_fails():
    airs, ts, pvs = traces("hash_heavy")
    cpu = ts[0]
    r = _row_of(cpu, isa.BNZ)
    cpu[r, CPU_LAYOUT.idx["nz"]] ^= 1
    err = _violation(airs, ts, pvs)
    assert err.table == "cpu" and err.constraint in ("bnz_target", "bnz_nz", "bnz_zero")


def test_altered_hash_output_fails_in_poseidon2_or_bus():
    airs, ts, pvs = traces("hash_heavy")
    p2 = ts[4]
    p2[3, P2_LAYOUT.idx["cube0"] + 5] ^= 1          # row 3, slot 0 (slots: docs/vm.md)
    err = _violation(airs, ts, pvs)
    slot = "" if p2.shape[1] == P2_LAYOUT.width else "@0"
    assert (err.table, err.constraint) == ("poseidon2", "full0[5]_cube" + slot)
    airs, ts, pvs = traces("hash_heavy")
    cpu = ts[0]
    r = _row_of(cpu, isa.HASH)
    cpu[r, CPU_LAYOUT.idx["o"] + 3] = (int(cpu[r, CPU_LAYOUT.idx["o"] + 3]) + 1) % P
    err = _violation(airs, ts, pvs)                    # the CPU claims a wrong hash
    assert isinstance(err, LookupImbalance) and err.bus in ("memory", "poseidon2")


def _same_address_rows(mem):
    """Real rows r >= 1 that continue row r - 1's address."""
    M = MEMORY_LAYOUT.idx
    real = mem[:, M["is_real"]] == 1
    same = np.zeros(mem.shape[0], dtype=bool)
    same[1:] = real[1:] & (mem[1:, M["addr"]] == mem[:-1, M["addr"]])
    return same


def test_memory_read_consistency_and_order():
    airs, ts, pvs = traces("memory_heavy")
    mem = ts[2]
    M = MEMORY_LAYOUT.idx
    reads = np.nonzero(_same_address_rows(mem) & (mem[:, M["is_write"]] == 0))[0]
    r = int(reads[len(reads) // 2])
    mem[r, M["value"]] = (int(mem[r, M["value"]]) + 1) % P
    err = _violation(airs, ts, pvs)
    assert (err.table, err.constraint) == ("memory", "read_consistency")
    # swapping two accesses of one address breaks the order
    airs, ts, pvs = traces("memory_heavy")
    mem = ts[2]
    r = int(np.nonzero(_same_address_rows(mem))[0][5])
    mem[[r - 1, r]] = mem[[r, r - 1]]
    err = _violation(airs, ts, pvs)
    assert err.table == "memory" and err.constraint in ("sorted_gap", "read_consistency")


def test_memory_addresses_step_by_at_most_one():
    """Honest MEMORY traces step through every address 0..M-1 in unit steps (the prologue
    reads every cell); moving one row's address breaks addr_step."""
    airs, ts, pvs = traces("memory_heavy")
    mem = ts[2]
    M = MEMORY_LAYOUT.idx
    real = mem[:, M["is_real"]] == 1
    addr = mem[real, M["addr"]].astype(np.int64)
    assert addr[0] == 0 and addr[-1] == pvs[2][0] - 1 and set(np.diff(addr).tolist()) == {0, 1}
    r = int(np.nonzero(_same_address_rows(mem))[0][4])
    mem[r, M["addr"]] = (int(mem[r, M["addr"]]) + 2) % P
    err = _violation(airs, ts, pvs)
    assert (err.table, err.constraint, err.row) == ("memory", "addr_step", r - 1)


def test_memory_gap_out_of_range_is_unbalanced():
    airs, ts, pvs = traces("memory_heavy")
    mem = ts[2]
    M = MEMORY_LAYOUT.idx
    r = int(np.nonzero(_same_address_rows(mem))[0][3])
    # claim a huge gap limb: the constraint still holds if lo absorbs it, but lo leaves 16 bits
    lo = int(mem[r, M["gap_lo"]]) + (1 << 16)
    hi = int(mem[r, M["gap_hi"]])
    mem[r, M["gap_lo"]] = lo
    mem[r, M["gap_hi"]] = (hi - 1) % P
    err = _violation(airs, ts, pvs)
    assert isinstance(err, LookupImbalance) and err.bus == "range16"


def test_altered_multiplicities_unbalance_the_buses():
    airs, ts, pvs = traces("one_tx")
    ts[1][3, 0] += 1                                   # PROGRAM claims an extra execution
    err = _violation(airs, ts, pvs)
    assert isinstance(err, LookupImbalance) and err.bus == "program"
    airs, ts, pvs = traces("one_tx")
    ts[3][7, 0] += 1
    err = _violation(airs, ts, pvs)
    assert isinstance(err, LookupImbalance) and err.bus == "range16"


def test_wrong_public_values_fail():
    airs, ts, pvs = traces("one_tx")
    for idx, name in ((1, "initial_digest[0]"), (9, "final_digest[0]"), (25, "input_digest[0]")):
        bad = [list(p) for p in pvs]
        bad[0][idx] = (bad[0][idx] + 1) % P
        with pytest.raises(ConstraintViolation) as ei:
            check_constraints(airs[0], ts[0], bad[0])
        assert ei.value.constraint == name
    bad = [list(p) for p in pvs]
    bad[2][0] = 128                                    # MEMORY: memory_size
    with pytest.raises(ConstraintViolation) as ei:
        check_constraints(airs[2], ts[2], bad[2])
    assert ei.value.constraint.startswith("last_address")
    assert pvs[0][PV_OUTPUTS.start] != 0


def test_trace_without_padding_rows():
    """memory_size 8, no transactions: exactly 4 cycles, a CPU table with no padding."""
    bt = build_traces(execute(empty_block(memory_size=8)))
    assert bt.traces[0].shape[0] == 4
    assert bt.traces[0][:, CPU_LAYOUT.idx["is_stop"]].tolist() == [0, 0, 0, 1]
    check_traces(bt.airs, bt.traces, bt.table_public_values)


def test_skipping_the_epilogue_is_refused():
    """A CPU trace that DISPATCHes straight to STOP (so no digest check would fire) breaks
    ``stop_after_epilogue`` -- the constraint that forces the epilogue to run."""
    airs, ts, pvs = traces("empty")
    cpu = ts[0]
    L = CPU_LAYOUT.idx
    ops = [isa.OPCODE_NAMES[k] for k in range(1, isa.NUM_OPCODES)]
    sel = [L[f"is_{n.lower()}"] for n in ops]
    d = _row_of(cpu, isa.DISPATCH)
    stop = _row_of(cpu, isa.STOP)
    forged = cpu.copy()
    forged[d, L["v"]] = cpu[stop, L["pc"]]             # the DISPATCH target: the STOP row
    forged[d + 1] = cpu[stop]
    forged[d + 1:, sel] = 0
    forged[d + 1, L["is_stop"]] = 1
    forged[d + 1:, L["clk"]] = np.arange(d + 1, cpu.shape[0])
    forged[d + 1:, L["hin"]:L["hin"] + 8] = cpu[d, L["o"]:L["o"] + 8]
    forged[d + 2:, L["pc"]] = 0
    with pytest.raises(ConstraintViolation) as ei:
        check_constraints(airs[0], forged, pvs[0])
    assert (ei.value.constraint, ei.value.row) == ("stop_after_epilogue", d)
