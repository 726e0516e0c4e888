"""The block statement binds what it claims to bind (issue #11, findings 2 and 3).

* **The cycle limit** (``max_cycles``) is a public value, enforced by the CPU AIR at the
  STOP row with range-checked (one-bit) limbs, and compared by ``verify(..., block=...)``: a block
  whose honest run exceeds its limit has no proof -- not even the proof of the same block
  without the limit.  The verifier and the block format agree on one ceiling, 2^21 cycles.
* **Length-binding digests**: the SPEC section 3 sponge is padding-free, so for a ROM of
  an odd number of rows (a last half block) appending one row equal to lanes 4..7 of the
  sponge state gave the same program digest.  The statement digests now start from a state
  whose lane 8 holds the input length, so the appended ROM is a different statement.

Proofs here use weak parameters (8 queries) on purpose and say so: min_security_bits=0.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from steadfast.air import ConstraintViolation, check_constraints, check_traces
from steadfast.prover.api import BlockProof, Prover, ProverConfig, verify
from steadfast.prover.prove import prove
from steadfast.verifier.proof_format import Params
from steadfast.verifier.errors import PublicValuesError, ShapeError, VerificationError
from steadfast.vm import isa
from steadfast.vm.airs import block_airs, slots_from_widths
from steadfast.vm.block import MAX_CYCLES, parse_block
from steadfast.vm.interpreter import ExecutionError, execute
from steadfast.vm.poseidon2 import permute_one, sponge
from steadfast.vm.rom import build_rom
from steadfast.vm.statement import PV_PROGRAMS, block_public_values
from steadfast.vm.traces import build_traces

P = isa.P
WEAK = 0        # these tests prove with 8 queries: accept weak parameters explicitly
# four instructions + the guard row: 8 + 1 + 5 + 8 + 1 = 23 ROM rows (odd) at M = 64
CODE = [["READ", 0], ["WRITE", 0], ["SET", 1, 5], ["HALT"]]


def _block(max_cycles=None):
    obj = {"format": "steadfast-block", "version": 1, "memory_size": 64,
           "initial_memory": [{"address": 8, "values": [7, 8, 9]}],
           "programs": [{"name": "echo", "code": CODE}],
           "transactions": [{"program": 0, "inputs": [42], "outputs": [42]}]}
    if max_cycles is not None:
        obj["max_cycles"] = max_cycles
    return parse_block(obj)


class _Cheat:
    """Proves whatever tables it is given with the protocol prover itself (no trace check,
    no check of the finished proof) and packs them as a block proof."""

    @staticmethod
    def prove_tables(tables, public_values, rom) -> BlockProof:
        rom = np.asarray(rom, dtype=np.int64)
        pv = [int(v) for v in public_values]
        slots = slots_from_widths([np.shape(t)[1] for t in tables])
        proof = prove(list(tables), block_airs(rom, slots), [pv, [], [pv[0]], [], []],
                      Params(num_queries=8, pow_bits=2), check=False)
        return BlockProof(rom, proof)


@pytest.fixture(scope="module")
def cheat():
    return _Cheat()


@pytest.fixture(scope="module")
def honest():
    """The unlimited block, its execution and its proof."""
    block = _block()
    rec = execute(block)
    proof = Prover(ProverConfig(backend="host", num_queries=8, pow_bits=2)).prove_block(block)
    return block, rec, proof


# --------------------------------------------------------------------------- max_cycles

def test_limit_boundary_matches_the_interpreter(honest):
    """A block of c cycles runs under max_cycles = c and fails under c - 1."""
    cycles = honest[1].cycles
    assert cycles == 2 * 8 + 2 + len(CODE) + 1      # prologue, epilogue, 2 DISPATCH, STOP
    assert execute(_block(cycles)).cycles == cycles
    with pytest.raises(ExecutionError, match=f"cycle limit {cycles - 1} reached"):
        execute(_block(cycles - 1))


def test_proof_without_the_limit_does_not_verify_a_limited_block(honest):
    """Finding 2: the honest run of the limited block fails, so no proof may verify
    against it -- in particular not the proof of the same block without the limit."""
    block, rec, proof = honest
    verify(proof, block=block, min_security_bits=WEAK)
    limited = _block(rec.cycles - 1)
    with pytest.raises(ExecutionError):
        execute(limited)
    with pytest.raises(PublicValuesError, match="max_cycles"):
        verify(proof, block=limited, min_security_bits=WEAK)
    # a larger limit is a different statement too
    with pytest.raises(PublicValuesError, match="max_cycles"):
        verify(proof, block=_block(rec.cycles + 1), min_security_bits=WEAK)


def test_exact_limit_proves_and_verifies():
    block = _block(execute(_block()).cycles)
    bt = build_traces(execute(block))
    check_traces(bt.airs, bt.traces, bt.table_public_values)
    proof = Prover(ProverConfig(backend="host", num_queries=8, pow_bits=2)).prove_block(block)
    res = verify(proof, block=block, min_security_bits=WEAK)
    from steadfast.vm.statement import PV_MAX_CYCLES
    assert res.public_values[PV_MAX_CYCLES] == block.max_cycles


def _forged_limit(rec, limit):
    """The honest traces of ``rec`` with the public max_cycles replaced by ``limit``."""
    from steadfast.vm.statement import PV_MAX_CYCLES
    pv = block_public_values(rec.block, rec.rom, rec.final_digest)
    pv[PV_MAX_CYCLES] = limit
    return build_traces(rec, pv)


def test_forged_cycle_count_above_the_limit_breaks_the_stop_constraint(honest):
    """Finding 2 (b): the trace of a run of c cycles with public max_cycles = c - 1 fails
    the CPU AIR at the STOP row (the trace builder cannot write a negative slack; the
    next test writes it wrapped mod p and forces a proof)."""
    block, rec, _ = honest
    bt = _forged_limit(rec, rec.cycles - 1)
    with pytest.raises(ConstraintViolation, match="cycle_limit"):
        check_constraints(bt.airs[0], bt.traces[0], bt.table_public_values[0])
    with pytest.raises(ConstraintViolation, match="cycle_limit"):
        check_constraints(bt.airs[0], _forged_limit(rec, 0).traces[0], bt.table_public_values[0])


def test_wrapped_slack_fails_the_limb_range_check(honest, cheat):
    """The slack max_cycles - 1 - clk is -1 here.  Written as p - 1 in the lowest limb the
    sum constraint holds, but that limb is not a bit: the limb check fails, and the proof
    forced out of the trace does not verify.  No bit pattern reaches p - 1: the 21 bits
    sum to at most 2^21 - 1."""
    from steadfast.vm.airs import CPU_LAYOUT, slack_bits
    block, rec, _ = honest
    bt = _forged_limit(rec, rec.cycles - 1)
    cpu = bt.traces[0].copy()
    L = CPU_LAYOUT.idx
    cols = slack_bits({"v": range(L["v"], L["v"] + 17), "o": range(L["o"], L["o"] + 16)})
    assert len(cols) == 21 and len(set(cols)) == 21
    cpu[rec.cycles - 1, cols] = 0
    cpu[rec.cycles - 1, cols[0]] = P - 1
    tables = list(bt.traces)
    tables[0] = cpu
    with pytest.raises(ConstraintViolation, match=r"cycle_limit_bit\[0\]") as ei:
        check_constraints(bt.airs[0], cpu, bt.table_public_values[0])
    assert ei.value.row == rec.cycles - 1
    forged = cheat.prove_tables(tables, bt.public_values, rec.rom.rows)
    with pytest.raises(VerificationError):
        verify(forged, block=_block(rec.cycles - 1), min_security_bits=WEAK)
    with pytest.raises(VerificationError):
        verify(forged, min_security_bits=WEAK)


def test_public_limit_outside_the_format_is_refused(honest, cheat):
    """The verifier admits max_cycles in [1, 2^21] only (the block format's range; the
    STOP row's slack argument needs it): 2^21 + 1 is refused, though its slack fits."""
    block, rec, _ = honest
    bt = _forged_limit(rec, MAX_CYCLES + 1)
    check_traces(bt.airs, bt.traces, bt.table_public_values)
    proof = cheat.prove_tables(bt.traces, bt.public_values, rec.rom.rows)
    with pytest.raises(PublicValuesError, match="max_cycles 2097153 is outside"):
        verify(proof, min_security_bits=WEAK)


def test_cpu_table_above_the_cycle_ceiling_is_refused(honest):
    """One ceiling: the block format caps blocks at 2^21 cycles, so the block verifier
    refuses a CPU table of more than 2^21 rows (the protocol itself admits 2^24) before
    any hashing.  The CPU table's log_n byte is rewritten to 22."""
    from steadfast.verifier.proof_format import decode
    from steadfast.vm.block import MAX_LOG_CYCLES
    assert MAX_CYCLES == 1 << MAX_LOG_CYCLES == 1 << 21
    _, _, proof = honest
    log_n = decode(proof.proof).tables[0].log_n
    data = bytearray(proof.proof)
    # find the CPU table's log_n byte: the one whose change shows up in decode
    for pos in range(len(data)):
        if data[pos] != log_n:
            continue
        trial = bytearray(data)
        trial[pos] = MAX_LOG_CYCLES + 1
        try:
            if decode(bytes(trial)).tables[0].log_n == MAX_LOG_CYCLES + 1:
                break
        except Exception:
            continue
    else:
        pytest.fail("no log_n byte found")
    tall = BlockProof(proof.rom, bytes(trial))
    with pytest.raises(ShapeError, match="2\\^21"):
        verify(tall, min_security_bits=WEAK)


# --------------------------------------------------------------------------- digests

def _sponge_state_before_last_block(values):
    """Naive reference: the SPEC section 3 sponge state (zero initial state) after every
    full block of ``values`` -- the state the last, partial block is written into."""
    state = [0] * 16
    full = len(values) - len(values) % 8
    for k in range(0, full, 8):
        state[:8] = values[k:k + 8]
        state = permute_one(state)
    return state


def test_appended_rom_row_collided_under_the_padding_free_sponge():
    """The collision of finding 3, shown on the padding-free sponge (kept: it is the
    Merkle leaf hash, whose inputs have a fixed width)."""
    rom = build_rom(_block())
    assert len(rom) % 2 == 1
    flat = rom.flat()
    extra = _sponge_state_before_last_block(flat)[4:8]
    assert sponge(flat) == sponge(flat + extra)


def test_appended_rom_row_is_a_different_statement(honest, cheat):
    """Finding 3: the ROM with the colliding row appended has a different program
    digest, and a proof of the block carried with that ROM does not verify."""
    block, rec, _ = honest
    rom = build_rom(block)
    extra = _sponge_state_before_last_block(rom.flat())[4:8]
    rom2 = np.vstack([rom.rows, np.array([extra], dtype=np.int64)])
    pv = block_public_values(block, rom)
    pv2 = block_public_values(block, dataclasses.replace(rom, rows=rom2))
    assert pv[PV_PROGRAMS] != pv2[PV_PROGRAMS]
    # the honest traces, the block's public values, the extended ROM (its extra row is
    # executed zero times, so every bus balances)
    bt = build_traces(rec)
    forged = cheat.prove_tables(bt.traces, bt.public_values, rom2)
    with pytest.raises(PublicValuesError, match="program digest"):
        verify(forged, block=block, min_security_bits=WEAK)
    with pytest.raises(PublicValuesError, match="program digest"):
        verify(forged, min_security_bits=WEAK)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, P - 1), min_size=1, max_size=40), st.data())
def test_statement_digest_binds_the_length(values, data):
    """For any input, the same trick (complete the last block with the state's own lanes)
    and any zero-padding give different statement digests."""
    from steadfast.vm.poseidon2 import statement_digest
    n = len(values)
    if n % 8:
        tail = _sponge_state_before_last_block(values)[n % 8:8]
        assert sponge(values) == sponge(values + tail)
        assert statement_digest(values) != statement_digest(values + tail)
    pad = data.draw(st.integers(1, 9))
    assert statement_digest(values) != statement_digest(values + [0] * pad)
    # the reference: the SPEC sponge from a state whose lane 8 holds the length
    state = [0] * 16
    state[8] = n
    for k in range(0, n, 8):
        blk = values[k:k + 8]
        state[:len(blk)] = blk
        state = permute_one(state)
    assert statement_digest(values) == state[:8]


def test_memory_digests_are_length_tagged(honest):
    """The initial and final state digests follow the same rule (lane 8 = M), computed
    by the interpreter and proven by the CPU table's ABSORB rows."""
    from steadfast.vm.poseidon2 import statement_digest
    from steadfast.vm.statement import PV_FINAL, PV_INITIAL
    block, rec, proof = honest
    assert rec.initial_digest == statement_digest(block.dense_memory())
    assert rec.final_digest == statement_digest(rec.final_memory)
    assert rec.final_digest != sponge(rec.final_memory)
    pv = verify(proof, block=block, min_security_bits=WEAK).public_values
    assert pv[PV_INITIAL] == rec.initial_digest and pv[PV_FINAL] == rec.final_digest
