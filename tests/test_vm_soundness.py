"""VM soundness: attacks on the block AIRs that honest trace generation cannot express.

MEMORY addresses (docs/vm.md "MEMORY").  An earlier MEMORY bounded each address step by a
gap below 2^24, and about p / 2^24 = 120 such steps wrap past p, so a sorted run
0, 1, ..., M-2, w_1, ..., w_120, M-1 with wild addresses w_i >= M satisfied every
constraint.  A wild address is never read by the prologue, so its first read is
unconstrained: a block whose honest execution fails ("LOAD address ... out of range") got
a proof, verifying against the block, of any output.  A range16 check on every address
closed it; now the address step itself is constrained to 0 or 1 (the prologue reads every
cell 0..M-1, so honest steps are), which with row 0 at address 0 keeps every real address
an integer below the table height, and the attack fails ``addr_step``.  The other attacks
here (a skipped address, a step back, a padding row between real rows, a read changing a
value, an address >= M) each fail a named MEMORY constraint.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from steadfast.air import ConstraintViolation, check_constraints, check_traces
from steadfast.air.check import check_lookups, interaction_rows
from steadfast.air.eval import domain_leaf
from steadfast.air.program import evaluate
import functools

from steadfast.prover.api import Prover, ProverConfig
from steadfast.prover.api import verify as _verify

# weak test parameters: verifications require no security minimum, explicitly
verify = functools.partial(_verify, min_security_bits=0)
from steadfast.verifier.errors import CompositionError
from steadfast.vm import isa
from steadfast.vm.airs import MEMORY_LAYOUT, RANGE_SIZE, block_airs, build_memory
from steadfast.vm.block import parse_block
from steadfast.vm.interpreter import ExecutionError, execute
from steadfast.vm.rom import build_rom
from steadfast.vm.statement import block_public_values
from steadfast.vm.traces import (_pow2, build_traces, cpu_trace, memory_accesses, memory_trace,
                                 poseidon2_trace, program_counts)

P = isa.P
M = 8                       # the smallest memory: prologue 1 row, addresses 0..7
FORGED = 1234               # the output the attacker claims
STEP = 1 << 24              # the old design's largest address step (gap 2^24 - 1)


def _wild_pointers() -> list[int]:
    """The fewest addresses >= M that lead, in steps of at most 2^24 (what the old design's
    sorted gap admitted), from M - 2 (the last address below M - 1 that the prologue
    touches) past p to M - 1: the p + 1 distance
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


def _attacker_memory_trace(acc: np.ndarray, height: int | None = None) -> np.ndarray:
    """MEMORY rows in the attacker's order ``acc`` (int64[k, 4]: address, time, value,
    is_write), columns filled as vm.traces.memory_trace fills them, except that the gap
    limbs take the best value available: (1 - d) * (time' - time - 1) mod p, with d the
    address step, wherever that is below 2^24 (so sorted_gap holds there), else 0."""
    L = MEMORY_LAYOUT.idx
    k = acc.shape[0]
    n = height or _pow2(k)
    T = np.zeros((n, MEMORY_LAYOUT.width), dtype=np.int64)
    for name, j in (("addr", 0), ("time", 1), ("value", 2), ("is_write", 3)):
        T[:k, L[name]] = acc[:, j] % P
    T[:k, L["is_real"]] = 1
    d = (acc[1:, 0] - acc[:-1, 0]) % P
    tgap = (acc[1:, 1] - acc[:-1, 1] - 1) % P
    want = np.array([(1 - int(x)) * int(g) % P for x, g in zip(d, tgap)], dtype=np.int64)
    gap = np.zeros(k, dtype=np.int64)
    gap[1:] = np.where(want < STEP, want, 0)
    T[:k, L["gap_lo"]] = gap & 0xFFFF
    T[:k, L["gap_hi"]] = gap >> 16
    for name, j in (("addr", 0), ("time", 1), ("value", 2)):
        T[k:, L[name]] = acc[-1, j] % P
    return (T % P).astype(np.uint32)


def _wrapped_memory_trace(acc: np.ndarray) -> np.ndarray:
    """MEMORY sorted as 0..M-2, the wild addresses ascending, then M - 1 (which is
    p + M - 1 modulo p): the old design's wrap-around order."""
    key = np.where(acc[:, 0] == M - 1, P + M - 1, acc[:, 0])
    acc = acc[np.lexsort((acc[:, 1], key))]
    steps = np.diff(np.where(acc[:, 0] == M - 1, P + M - 1, acc[:, 0]))
    assert steps.max() <= STEP                # every step, the wrapping one included, fits
    return _attacker_memory_trace(acc)


def failures(air, main: np.ndarray, pv=()) -> dict:
    """{constraint name: [rows where it fails]} for every user constraint of ``air`` on
    ``main`` -- all failures, not only the first that check_constraints reports."""
    n = main.shape[0]
    values = evaluate(air.user_program, domain_leaf(main.T, None, None, 1, [int(x) for x in pv], {}))
    rows = np.arange(n)
    out = {}
    for c, v in zip(air.user_constraints, values):
        v = np.broadcast_to(np.asarray(v, dtype=np.uint64), (n,))
        mask = {"all": rows >= 0, "first": rows == 0, "last": rows == n - 1,
                "transition": rows < n - 1}[c.when]
        bad = np.nonzero((v % P != 0) & mask)[0]
        if bad.size:
            out[c.name] = bad.tolist()
    return out


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


def test_wrapped_memory_fails_addr_step(attack):
    """The old design's attack trace: every other table's constraints hold and every bus
    balances (the memory tuples are the CPU's, the gap limbs fit 16 bits), so what refuses
    it is MEMORY's ``addr_step``, failing exactly on the 121 steps into, between and out
    of the wild addresses, and nowhere else (sorted_gap and read_consistency, written for
    d in {0, 1}, may fail on those rows too)."""
    a = attack
    mem = a["tables"][2]
    L = MEMORY_LAYOUT.idx
    addr = mem[mem[:, L["is_real"]] == 1, L["addr"]].astype(np.int64)
    assert addr[-1] == M - 1 and set(a["ptrs"]) <= set(addr.tolist())
    for air, t, pv in zip(a["airs"], a["tables"], a["table_pv"]):
        if air.name != "memory":
            check_constraints(air, t, pv)
    check_lookups(a["airs"], a["tables"], a["table_pv"])
    jumps = np.nonzero((np.diff(addr) % P) > 1)[0].tolist()
    assert len(jumps) == len(a["ptrs"]) + 1
    bad = failures(a["airs"][2], mem, a["table_pv"][2])
    assert bad["addr_step"] == jumps
    assert all(set(rows) <= set(jumps) for rows in bad.values())
    with pytest.raises(ConstraintViolation) as ei:
        check_traces(a["airs"], a["tables"], a["table_pv"])
    assert (ei.value.table, ei.value.constraint, ei.value.row) == ("memory", "addr_step", jumps[0])


def test_forced_proof_of_wrapped_memory_is_rejected(attack):
    a = attack
    cheat = Prover(ProverConfig(backend="host", num_queries=8, pow_bits=2, check=False,
                                self_check=False))   # let the forged proof out
    proof = cheat.prove_tables(a["tables"], a["pv"], a["rec"].rom.rows)
    # the out-of-domain check runs before FRI: MEMORY's constraints do not match its parts
    with pytest.raises(CompositionError, match=r"\[memory\]"):
        verify(proof, block=a["obj"])
    with pytest.raises(CompositionError, match=r"\[memory\]"):
        verify(proof)


def test_every_address_up_to_the_largest_memory_is_provable():
    """Completeness at the format's limit: M = 2^16, addresses 0..65535 in unit steps
    (check mode only).  MEMORY sends only gap limbs on range16: 3 per real row."""
    obj = _block_json([["HALT"]])
    obj.update(memory_size=1 << 16, transactions=[],
               initial_memory=[{"address": (1 << 16) - 8, "values": [1, 2, 3, 4, 5, 6, 7, 8]}])
    bt = build_traces(execute(parse_block(obj)))
    mem, rng = bt.traces[2].reshape(-1, MEMORY_LAYOUT.width), bt.traces[3]   # any slots
    assert bt.traces[2].shape[1] == bt.slots["memory"] * MEMORY_LAYOUT.width
    real = mem[:, MEMORY_LAYOUT.idx["is_real"]] == 1
    addr = mem[real, MEMORY_LAYOUT.idx["addr"]].astype(np.int64)
    assert addr.max() == (1 << 16) - 1 and set(np.diff(addr).tolist()) == {0, 1}
    assert int(rng[:, 0].sum()) == 3 * int(real.sum())
    check_traces(bt.airs, bt.traces, bt.table_public_values)


# --------------------------------------------------------------------------- MEMORY attacks
# Each takes the honest access log of a small block (M = 64: every address has at least
# its prologue and epilogue read), rearranges it as an attacker would, fills the columns
# with _attacker_memory_trace and asserts exactly which MEMORY constraints fail where.

@pytest.fixture(scope="module")
def honest_log():
    from tests.vm_blocks import one_tx_block
    bt = build_traces(execute(one_tx_block()), slots={"memory": 1})   # one access per row
    acc = memory_accesses(bt.traces[0])
    acc = acc[np.lexsort((acc[:, 1], acc[:, 0]))]
    return bt.airs[2], acc, bt.traces[2], bt.table_public_values[2]


def test_attacker_fill_of_the_honest_order_is_the_honest_trace(honest_log):
    air, acc, mem, pv = honest_log
    assert np.array_equal(_attacker_memory_trace(acc, mem.shape[0]), mem)
    assert np.array_equal(memory_trace(acc[::-1].copy()), mem)
    assert failures(air, mem, pv) == {}
    assert mem.shape[0] > acc.shape[0] + 1          # padding rows for the attacks below
    assert pv[0] == 64 and acc[-1, 0] == 63


def _first_row(acc, address):
    return int(np.nonzero(acc[:, 0] == address)[0][0])


def test_skipping_an_address_fails_addr_step(honest_log):
    """Address 20 left out (its rows dropped): the step 19 -> 21 is 2.  (Its CPU accesses
    are then unmatched on the memory bus as well.)"""
    air, acc, mem, pv = honest_log
    forged = acc[acc[:, 0] != 20]
    r = _first_row(forged, 21) - 1
    bad = failures(air, _attacker_memory_trace(forged, mem.shape[0]), pv)
    assert bad["addr_step"] == [r] and set(bad) <= {"addr_step", "sorted_gap"}
    with pytest.raises(ConstraintViolation) as ei:
        check_constraints(air, _attacker_memory_trace(forged, mem.shape[0]), pv)
    assert (ei.value.constraint, ei.value.row) == ("addr_step", r)


def test_a_step_back_fails_addr_step_alone(honest_log):
    """Addresses 20, 21 (never written: prologue and epilogue reads of 0) interleaved as
    20, 21, 20, 21.  The multiset of accesses is the honest one (the memory bus balances),
    the time gap of the step back fits, values agree: only addr_step (d = -1) refuses it."""
    air, acc, mem, pv = honest_log
    a, b = _first_row(acc, 20), _first_row(acc, 21)
    assert acc[a:b + 2, 0].tolist() == [20, 20, 21, 21] and not acc[a:b + 2, 3].any()
    forged = acc.copy()
    forged[a:a + 4] = acc[[a, b, a + 1, b + 1]]
    assert sorted(map(tuple, forged.tolist())) == sorted(map(tuple, acc.tolist()))
    bad = failures(air, _attacker_memory_trace(forged, mem.shape[0]), pv)
    assert bad == {"addr_step": [a + 1]}


def test_a_padding_row_between_real_rows_fails(honest_log):
    """A non-real row inserted after real row r (a copy of it as a read, gap 0): the real
    rows are no longer a prefix (padding_at_end), and the real row before the padding is
    not the last address (last_address, also on the padding row's own transition)."""
    air, acc, mem, pv = honest_log
    L = MEMORY_LAYOUT.idx
    r = _first_row(acc, 30)
    forged = np.concatenate([mem[:r + 1], mem[r:r + 1], mem[r + 1:-1]])
    forged[r + 1, [L["is_real"], L["is_write"], L["gap_lo"], L["gap_hi"]]] = 0
    assert failures(air, forged, pv) == {"padding_at_end": [r + 1], "last_address": [r, r + 1]}


def test_a_read_changing_the_value_fails_read_consistency(honest_log):
    air, acc, mem, pv = honest_log
    L = MEMORY_LAYOUT.idx
    r = _first_row(acc, 30) + 1                     # the epilogue read of address 30
    assert acc[r, 0] == acc[r - 1, 0] and acc[r, 3] == 0 and acc[r + 1, 0] == 31
    forged = mem.copy()
    forged[r, L["value"]] = (int(forged[r, L["value"]]) + 1) % P
    assert failures(air, forged, pv) == {"read_consistency": [r - 1]}


def test_an_address_at_or_past_memory_size_fails(honest_log):
    """A real row at address M = 64 after the last one (a unit step, gap 0; padding
    repeats it): only last_address refuses it.  A wild address M + 5 in its place also
    breaks addr_step."""
    air, acc, mem, pv = honest_log
    k = acc.shape[0]
    extra = np.array([[64, int(acc[-1, 1]) + 1, 0, 1]], dtype=np.int64)
    forged = np.concatenate([acc, extra])
    assert failures(air, _attacker_memory_trace(forged, mem.shape[0]), pv) == {"last_address": [k]}
    extra[0, 0] = 64 + 5
    bad = failures(air, _attacker_memory_trace(np.concatenate([acc, extra]), mem.shape[0]), pv)
    assert bad["addr_step"] == [k - 1] and bad["last_address"] == [k]


@st.composite
def _access_logs(draw):
    """A small honest MEMORY log: M = 8, every address accessed 1..3 times at distinct
    times, reads returning the last value written (or a random initial value)."""
    counts = draw(st.lists(st.integers(1, 3), min_size=8, max_size=8))
    addrs = np.repeat(np.arange(8), counts)
    times = np.array(draw(st.permutations(range(len(addrs)))), dtype=np.int64) * 3
    writes = draw(st.lists(st.booleans(), min_size=len(addrs), max_size=len(addrs)))
    vals = draw(st.lists(st.integers(0, P - 1), min_size=len(addrs), max_size=len(addrs)))
    acc = np.stack([addrs, times, np.zeros_like(addrs), np.array(writes, np.int64)], 1)
    acc = acc[np.lexsort((acc[:, 1], acc[:, 0]))]
    cur = None
    for i in range(len(acc)):
        if i == 0 or acc[i, 0] != acc[i - 1, 0] or acc[i, 3]:
            cur = vals[i]
        acc[i, 2] = cur
    return acc


@settings(max_examples=40, deadline=None)
@given(_access_logs(), st.data())
def test_memory_accepts_exactly_the_sorted_order(acc, data):
    """Reference: a MEMORY log is acceptable iff its rows are sorted by (address, time)
    (times are distinct within an address, so that order is unique).  The honest fill
    passes every constraint; any other order of the same rows fails one."""
    air = build_memory()
    assert failures(air, memory_trace(acc), [8]) == {}
    n = len(acc)
    perm = np.arange(n)
    i = data.draw(st.integers(0, n - 2))
    perm[[i, i + 1]] = perm[[i + 1, i]]                  # one adjacent swap, or any order
    perm = np.array(data.draw(st.one_of(st.just(perm.tolist()), st.permutations(range(n)))))
    forged = acc[perm]
    sorted_order = bool(np.all(np.lexsort((forged[:, 1], forged[:, 0])) == np.arange(len(acc))))
    assert (failures(air, _attacker_memory_trace(forged), [8]) == {}) == sorted_order
