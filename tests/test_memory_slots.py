"""MEMORY with k accesses per row (vm/airs.py build_memory(k), docs/vm.md "Slots").

The k-slot AIR must be exactly the one-access-per-row AIR read over the sequence of slots
(access v = row v // k, slot v % k): every constraint between consecutive accesses v,
v + 1 of the k = 1 table is the constraint ``name@(v % k)`` at row v // k of the k-slot
table (within a row for v % k < k - 1, the transition to the next row's slot 0 for the
last slot).  The tests compare the failures of the two AIRs on the same sequences --
the honest log, the attacks of tests/test_vm_soundness.py, and random corruptions -- so
a missing or mis-wired slot constraint shows up as a difference.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from steadfast.air import check_traces
from steadfast.prover.api import Prover, ProverConfig, verify
from steadfast.verifier import decode
from steadfast.vm.airs import MEMORY_LAYOUT, MEMORY_SLOTS, block_airs, build_memory, memory_layout
from steadfast.vm.interpreter import execute
from steadfast.vm.traces import (build_traces, choose_slots, cpu_trace, memory_accesses,
                                 memory_count, memory_trace)

from tests.test_vm_soundness import _attacker_memory_trace, failures
from tests.vm_blocks import hash_heavy_block, memory_heavy_block, one_tx_block

W = MEMORY_LAYOUT.width
P = (1 << 31) - (1 << 27) + 1
ONE_ROW = {"first_real", "first_addr", "last_address_last"}


def _mapped(f1: dict, k: int) -> dict:
    """The k = 1 failures {name: [access v]} as the k-slot AIR names them."""
    out: dict = {}
    for name, rows in f1.items():
        for v in rows:
            if name in ONE_ROW:
                key, row = name, v // k
            else:
                key, row = (name if k == 1 else f"{name}@{v % k}"), v // k
            out.setdefault(key, []).append(row)
    return {key: sorted(rows) for key, rows in out.items()}


@pytest.fixture(scope="module")
def log():
    bt = build_traces(execute(one_tx_block()), slots={"memory": 1})
    acc = memory_accesses(bt.traces[0])
    return acc[np.lexsort((acc[:, 1], acc[:, 0]))], bt.table_public_values[2]


def _compare(trace1: np.ndarray, pv, ks=(2, 3, 5, 8, 9, 16)):
    f1 = failures(build_memory(1), trace1, pv)
    for k in ks:
        if trace1.shape[0] % k:
            continue
        fk = failures(build_memory(k), trace1.reshape(-1, k * W), pv)
        assert fk == _mapped(f1, k), (k, f1)
    return f1


def test_layout_and_shapes():
    for k in MEMORY_SLOTS:
        air = build_memory(k, log_blowup=1)         # LogUp degree 3: 2 fractions a batch
        assert air.main_width == memory_layout(k).width == 7 * k
        assert len(air.interactions) == 4 * k and air.aux_width == 2 * k
        assert air.max_degree == 3 and air.num_parts == 2
        # log_blowup 2 (format 5): degree 5 (4 fractions a batch, 4 parts) from k = 4 on,
        # degree 4 (3 a batch, 3 parts) at k = 3; k = 1, 2 keep degree 3 (k = 2: 4 + 2
        # columns, as 3 + 3 and 2 + 4: ties go to the smallest degree)
        air = build_memory(k)
        d = 3 if k <= 2 else 4 if k == 3 else 5
        assert (air.max_degree, air.num_parts, air.aux_width) == (d, d - 1, -(-4 * k // (d - 1)))
    assert memory_layout(1) is MEMORY_LAYOUT
    assert [c.name for c in build_memory(1).constraints[:10]] == [
        "is_real_bool", "is_write_bool", "first_real", "first_addr", "padding_at_end",
        "addr_step", "sorted_gap", "read_consistency", "last_address", "last_address_last"]
    with pytest.raises(ValueError, match="MEMORY takes k"):
        memory_layout(17)
    with pytest.raises(ValueError, match="memory"):
        block_airs(np.zeros((1, 4)), {"memory": 0})


def test_honest_log_in_slots_is_the_k1_trace_reshaped(log):
    acc, pv = log
    for k in MEMORY_SLOTS:
        mem = memory_trace(acc[::-1].copy(), k)                 # any input order
        rows = -(-acc.shape[0] // k)
        assert mem.shape == (1 << max(1, (rows - 1).bit_length()), k * W)
        flat = mem.reshape(-1, W)
        assert np.array_equal(flat, _attacker_memory_trace(acc, flat.shape[0]))
        assert failures(build_memory(k), mem, pv) == {}


@pytest.mark.parametrize("block", [one_tx_block, hash_heavy_block, memory_heavy_block])
def test_forced_slots_satisfy_every_constraint_and_bus(block):
    rec = execute(block())
    assert memory_count(rec) == memory_accesses(cpu_trace(rec)).shape[0]
    for k in (2, 3, 7):
        bt = build_traces(rec, slots={"memory": k})
        assert bt.slots["memory"] == k and bt.traces[2].shape[1] == k * W
        check_traces(bt.airs, bt.traces, bt.table_public_values)


def test_soundness_attacks_fail_the_same_way_in_slots(log):
    acc, pv = log
    n = 1 << (acc.shape[0] + 40).bit_length()                 # padding room, divisible by 16
    # a skipped address, a step back, a changed read, an address >= M, a gap that lies
    first = lambda a: int(np.nonzero(acc[:, 0] == a)[0][0])   # noqa: E731
    skipped = acc[acc[:, 0] != 20]
    back = acc.copy()
    a, b = first(20), first(21)
    back[a:a + 4] = acc[[a, b, a + 1, b + 1]]
    changed = acc.copy()
    reads = np.nonzero((np.diff(acc[:, 0]) == 0) & (acc[1:, 3] == 0))[0] + 1
    changed[reads[len(reads) // 2], 2] += 1
    past = np.concatenate([acc, [[pv[0], 10 ** 6, 0, 0]]])
    for forged in (skipped, back, changed, past):
        assert _compare(_attacker_memory_trace(forged, n), pv)      # k = 1 refuses it ...
    # ... and a padding access between real ones, at every slot position
    honest = _attacker_memory_trace(acc, n)
    for r in range(30, 38):
        t = np.concatenate([honest[:r + 1], honest[r:r + 1], honest[r + 1:-1]])
        L = MEMORY_LAYOUT.idx
        t[r + 1, [L["is_real"], L["is_write"], L["gap_lo"], L["gap_hi"]]] = 0
        assert _compare(t, pv)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_random_corruptions_fail_identically(data):
    """Random edits of the honest log (any column, any access, padding included)."""
    rec = execute(one_tx_block())
    bt = build_traces(rec, slots={"memory": 1})
    acc = memory_accesses(bt.traces[0])
    acc = acc[np.lexsort((acc[:, 1], acc[:, 0]))]
    pv = bt.table_public_values[2]
    t = _attacker_memory_trace(acc, 1 << (acc.shape[0] + 40).bit_length()).astype(np.int64)
    for _ in range(data.draw(st.integers(1, 3))):
        v = data.draw(st.integers(0, t.shape[0] - 1))
        c = data.draw(st.integers(0, W - 1))
        t[v, c] = (t[v, c] + data.draw(st.sampled_from([1, P - 1, 2, 1 << 16]))) % P
    _compare(t.astype(np.uint32), pv)


def _next_pow2(x: int) -> int:
    n = 2
    while n < x:
        n *= 2
    return n


@pytest.mark.parametrize("accesses", [1, 7, 2_000, 1 << 16, (1 << 16) + 1, 532_324, 2_131_064])
def test_choice_minimises_committed_cells(accesses):
    # 7k main + 4 * 2k aux + 4 * 2 parts per row, rows = next_pow2(ceil(A / k))
    cells = {k: _next_pow2(-(-accesses // k)) * (15 * k + 8) for k in MEMORY_SLOTS}
    best = min(cells.values())
    assert choose_slots("memory", accesses) == min(k for k in MEMORY_SLOTS if cells[k] == best)


def test_chosen_slots_at_the_bench_sizes():
    # sized_block(16 / 18, 0.25): 532,324 / 2,131,064 accesses (bench/cells_bench.py):
    # 65,536 / 262,144 rows of 9 (90 % used) x 143 cells
    assert choose_slots("memory", 532_324) == 9
    assert choose_slots("memory", 2_131_064) == 9
    assert choose_slots("memory", 1_985) == 16          # examples/block.json: 128 rows


FAST = ProverConfig(backend="host", log_blowup=2, num_queries=8, pow_bits=2, check=True)


def test_block_proof_with_memory_slots_verifies():
    rec = execute(one_tx_block())
    bt = build_traces(rec, slots={"memory": 3})
    proof = Prover(FAST).prove_tables(bt.traces, bt.public_values, rec.rom.rows)
    assert len(decode(proof.proof).tables[2].ood_main) == 3 * W
    res = verify(proof, block=one_tx_block(), min_security_bits=0)     # weak on purpose
    assert res.final_digest == rec.final_digest
