"""VM soundness: attacks on the block AIRs that honest trace generation cannot express.

MEMORY address wrap-around (docs/vm.md "MEMORY").  The sorted-gap constraint bounds each
address step by 2^24, and about p / 2^24 = 120 such steps wrap past p, so without a range
check on the addresses themselves a sorted run 0, 1, ..., M-2, w_1, ..., w_120, M-1 with
wild addresses w_i >= M satisfied every constraint.  A wild address is never read by the
prologue, so its first read is unconstrained: a block whose honest execution fails
("LOAD address ... out of range") got a proof, verifying against the block, of any output.
Now every real MEMORY row sends its address on ``range16``, and the attack is refused.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from steadfast.air import check_traces
from steadfast.air.check import LookupImbalance, interaction_rows
import functools

from steadfast.prover.api import Prover, ProverConfig
from steadfast.prover.api import verify as _verify

# weak test parameters: verifications require no security minimum, explicitly
verify = functools.partial(_verify, min_security_bits=0)
from steadfast.verifier.errors import LogUpError
from steadfast.vm import isa
from steadfast.vm.airs import MEMORY_LAYOUT, RANGE_SIZE, block_airs
from steadfast.vm.block import parse_block
from steadfast.vm.interpreter import ExecutionError, execute
from steadfast.vm.rom import build_rom
from steadfast.vm.statement import block_public_values
from steadfast.vm.traces import _pow2, build_traces, cpu_trace, memory_accesses, poseidon2_trace, program_counts

P = isa.P
M = 8                       # the smallest memory: prologue 1 row, addresses 0..7
FORGED = 1234               # the output the attacker claims
STEP = 1 << 24              # the largest address step sorted_gap admits (gap 2^24 - 1)


def _wild_pointers() -> list[int]:
    """The fewest addresses >= M that lead, in steps of at most 2^24, from M - 2 (the last
    address below M - 1 that the prologue touches) past p to M - 1: the p + 1 distance
    needs ceil((p + 1) / 2^24) = 121 steps, i.e. 120 wild addresses, spread evenly."""
    steps = -(-(P + 1) // STEP)
    s = -(-(P + 1) // steps)
    ptrs = [M - 2 + i * s for i in range(1, steps)]
    assert M <= ptrs[0] and ptrs[-1] < P and s <= STEP and P + M - 1 - ptrs[-1] <= STEP
    return ptrs


def _block_json(code) -> dict:
    return {"format": "steadfast-block", "version": 1, "memory_size": M, "initial_memory": [],
            "programs": [{"name": "wild", "code": code}],
            "transactions": [{"program": 0, "inputs": [], "outputs": [FORGED]}]}


def _malicious_record(ptrs):
    """The execution record of the wild block as a cheating prover would write it: every
    ``LOAD 1, 0`` from a wild pointer "reads" FORGED.  Built honestly from a shadow block
    with ``SET 1, FORGED`` in place of each LOAD (same ROM shape, same memory effects,
    same hash calls), then given the wild block's ROM and the LOAD rows' operand values."""
    wild, shadow = [], []
    for a in ptrs:
        wild += [["SET", 0, a], ["LOAD", 1, 0]]
        shadow += [["SET", 0, a], ["SET", 1, FORGED]]
    tail = [["WRITE", 1], ["HALT"]]
    obj = _block_json(wild + tail)
    block = parse_block(obj)
    rec = execute(parse_block(_block_json(shadow + tail)))
    rom = build_rom(block)
    assert rom.rows.shape == rec.rom.rows.shape
    loads = np.nonzero(rom.rows[rec.pc, 0] == isa.LOAD)[0]
    assert loads.size == len(ptrs)
    va, vb = rec.va.copy(), rec.vb.copy()
    va[loads] = ptrs                        # m[0], the pointer
    vb[loads] = FORGED                      # m[pointer], never constrained by the prologue
    return obj, block, dataclasses.replace(rec, block=block, rom=rom, va=va, vb=vb)


def _wrapped_memory_trace(acc: np.ndarray) -> np.ndarray:
    """MEMORY sorted as 0..M-2, the wild addresses ascending, then M - 1 (which is
    p + M - 1 modulo p); columns filled as vm.traces.memory_trace fills them."""
    key = np.where(acc[:, 0] == M - 1, P + M - 1, acc[:, 0])
    acc = acc[np.lexsort((acc[:, 1], key))]
    L = MEMORY_LAYOUT.idx
    k = acc.shape[0]
    T = np.zeros((_pow2(k), MEMORY_LAYOUT.width), dtype=np.int64)
    for name, j in (("addr", 0), ("time", 1), ("value", 2), ("is_write", 3)):
        T[:k, L[name]] = acc[:, j]
    T[:k, L["is_real"]] = 1
    same = np.zeros(k, dtype=np.int64)
    same[1:] = acc[1:, 0] == acc[:-1, 0]
    gap = np.zeros(k, dtype=np.int64)
    gap[1:] = np.where(same[1:] == 1, acc[1:, 1] - acc[:-1, 1] - 1,
                       acc[1:, 0] - acc[:-1, 0] - 1) % P
    assert gap.max() < STEP                 # every step, the wrapping one included, fits
    T[:k, L["same"]] = same
    T[:k, L["gap_lo"]] = gap & 0xFFFF
    T[:k, L["gap_hi"]] = gap >> 16
    T[k:, L["addr"]] = acc[-1, 0]
    return (T % P).astype(np.uint32)


def _range_counts_for(airs, tables, table_pv) -> np.ndarray:
    """The attacker's best RANGE column for whatever ``range16`` sends the AIRs declare:
    every sent value below 2^16 counted (evaluated from the AIRs, so it is right for the
    AIR under test, with or without the address check)."""
    vals = []
    for air, t, pv in zip(airs, tables, table_pv):
        if t is None:
            continue
        for it, (v, m) in zip(air.interactions, interaction_rows(air, t, pv)):
            if it.bus == "range16" and it.sign > 0:
                assert set(np.unique(m).tolist()) <= {0, 1}
                vals.append(v[0][m == 1].astype(np.int64))
    vals = np.concatenate(vals)
    vals = vals[vals < RANGE_SIZE]
    return np.bincount(vals, minlength=RANGE_SIZE).astype(np.uint32).reshape(-1, 1)


@pytest.fixture(scope="module")
def attack():
    ptrs = _wild_pointers()
    obj, block, rec = _malicious_record(ptrs)
    airs = block_airs(rec.rom.rows)
    cpu = cpu_trace(rec)
    mem = _wrapped_memory_trace(memory_accesses(cpu))
    pv = [int(x) for x in block_public_values(block, rec.rom, rec.final_digest)]
    table_pv = [pv, [], [pv[0]], [], []]
    tables = [cpu, program_counts(cpu, airs[1].fixed_height), mem, None,
              poseidon2_trace(rec.hash_in)]
    tables[3] = _range_counts_for(airs, tables, table_pv)
    return dict(ptrs=ptrs, obj=obj, block=block, rec=rec, airs=airs, tables=tables,
                pv=pv, table_pv=table_pv)


def test_honest_execution_refuses_the_wild_block(attack):
    with pytest.raises(ExecutionError, match=r"LOAD address .* out of range \[0, 8\)"):
        execute(attack["block"])
    assert attack["rec"].outputs == ((FORGED,),)
    assert len(attack["ptrs"]) == 120


def test_wrapped_memory_fails_the_address_range_check(attack):
    """Every constraint of every table holds on the malicious trace (so the sorted gaps
    really do wrap past p); what fails is ``range16``: MEMORY sends each wild address,
    and no RANGE row receives it."""
    a = attack
    mem = a["tables"][2]
    addr = mem[mem[:, MEMORY_LAYOUT.idx["is_real"]] == 1, MEMORY_LAYOUT.idx["addr"]]
    assert addr[-1] == M - 1 and set(a["ptrs"]) <= set(addr.tolist())
    with pytest.raises(LookupImbalance) as ei:
        check_traces(a["airs"], a["tables"], a["table_pv"])
    err = ei.value
    assert err.bus == "range16"
    assert err.values[0] in a["ptrs"] and err.values[0] >= RANGE_SIZE and err.net == 1


def test_forced_proof_of_wrapped_memory_is_rejected(attack):
    a = attack
    cheat = Prover(ProverConfig(backend="host", num_queries=8, pow_bits=2, check=False,
                                self_check=False))   # let the forged proof out
    proof = cheat.prove_tables(a["tables"], a["pv"], a["rec"].rom.rows)
    with pytest.raises(LogUpError):
        verify(proof, block=a["obj"])
    with pytest.raises(LogUpError):
        verify(proof)


def test_every_address_up_to_the_largest_memory_passes_the_range_check():
    """Completeness at the format's limit: M = 2^16, addresses 0..65535 all range-checked
    (check mode only; the RANGE multiplicities count every address once per access)."""
    obj = _block_json([["HALT"]])
    obj.update(memory_size=1 << 16, transactions=[],
               initial_memory=[{"address": (1 << 16) - 8, "values": [1, 2, 3, 4, 5, 6, 7, 8]}])
    bt = build_traces(execute(parse_block(obj)))
    mem, rng = bt.traces[2], bt.traces[3]
    real = mem[:, MEMORY_LAYOUT.idx["is_real"]] == 1
    assert mem[real, MEMORY_LAYOUT.idx["addr"]].max() == (1 << 16) - 1
    # every cell is read by the prologue and the epilogue: 2 address sends per value
    # (the gap limbs add to the counts of 0 and small values only)
    assert rng[-1, 0] == 2 and int(rng[:, 0].sum()) == 4 * int(real.sum())
    check_traces(bt.airs, bt.traces, bt.table_public_values)
