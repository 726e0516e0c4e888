"""POSEIDON2 slots (docs/vm.md "Slots"): k permutations per row.  The packed trace
satisfies every constraint and balances the buses for each k of the menu, the choice of k
minimises committed cells (checked against independent arithmetic), a block proof with
k > 1 proves and verifies, the verifier reads k off the proof and refuses a width no k
gives, and k = 1 is exactly the one-permutation-per-row AIR of before."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from steadfast.air import AirBuilder, ConstraintViolation, LookupImbalance, check_traces
from steadfast.kernels.poseidon2_constants import RC_FULL, RC_PARTIAL
from steadfast.prover.api import Prover, ProverConfig, verify
from steadfast.verifier.errors import ShapeError, VerificationError
from steadfast.verifier.proof_format import decode, encode
from steadfast.vm.airs import (P2_LAYOUT, P2_SLOTS, block_airs, build_poseidon2, p2_layout,
                               slots_from_widths, table_air)
from steadfast.vm.interpreter import execute
from steadfast.vm.poseidon2 import (N_FULL_HALF, N_PARTIAL, WIDTH, external_linear,
                                    internal_linear, permute_rows)
from steadfast.vm.traces import build_traces, choose_slots, poseidon2_trace

from tests.vm_blocks import empty_block, hash_heavy_block, one_tx_block

W1 = 299                     # POSEIDON2's k = 1 width: in, 2 x 4 x 2 full rounds, 2 x 13 partial, mult
P2 = 4                       # table index of POSEIDON2 (CPU, PROGRAM, MEMORY, RANGE, POSEIDON2)


@pytest.fixture(scope="module")
def hash_rec():
    return execute(hash_heavy_block())       # 57 permutations


# ------------------------------------------------------------------ the packed trace

@pytest.mark.parametrize("k", P2_SLOTS)
def test_packed_trace_satisfies_constraints_and_buses(hash_rec, k):
    bt = build_traces(hash_rec, slots={"poseidon2": k})
    check_traces(bt.airs, bt.traces, bt.table_public_values)
    p2 = bt.traces[P2]
    perms = hash_rec.hash_in.shape[0]
    rows = max(2, 1 << (-(-perms // k) - 1).bit_length())
    assert p2.shape == (rows, k * W1) and bt.airs[P2].main_width == k * W1
    assert bt.slots["poseidon2"] == k
    # permutation i sits in row i // k, slot i % k: its input, its output (through the
    # reference permutation) and mult 1; every other slot is a permutation of zero, mult 0
    slots = p2.reshape(rows * k, W1)
    L = P2_LAYOUT.idx
    np.testing.assert_array_equal(slots[:perms, L["in"]:L["in"] + 16], hash_rec.hash_in)
    assert slots[:perms, L["mult"]].tolist() == [1] * perms
    assert not slots[perms:, L["in"]:L["in"] + 16].any() and not slots[perms:, L["mult"]].any()
    ref = permute_rows(np.zeros((1, WIDTH), np.uint32))
    last = 2 * N_FULL_HALF - 1
    if perms < rows * k:
        np.testing.assert_array_equal(slots[-1, L[f"sbox{last}"]:L[f"sbox{last}"] + 16],
                                      ref["full_sbox"][last][0])


@pytest.mark.parametrize("k", [2, 3])
def test_every_slot_is_constrained(hash_rec, k):
    """A wrong cube in the last slot breaks that slot's constraint; a mult moved between
    slots of different permutations breaks the bus."""
    bt = build_traces(hash_rec, slots={"poseidon2": k})
    p2 = bt.traces[P2].copy()
    p2[1, (k - 1) * W1 + P2_LAYOUT.idx["cube0"] + 5] ^= 1
    tables = list(bt.traces[:P2]) + [p2]
    with pytest.raises(ConstraintViolation) as ei:
        check_traces(bt.airs, tables, bt.table_public_values)
    assert ei.value.table == "poseidon2" and ei.value.constraint == f"full0[5]_cube@{k - 1}"
    p2 = bt.traces[P2].copy()
    m = P2_LAYOUT.idx["mult"]
    p2[0, (k - 1) * W1 + m] = 0                  # permutation k - 1 no longer received...
    p2[-1, (k - 1) * W1 + m] = 1                 # ...a permutation of zero is, once
    with pytest.raises(LookupImbalance):
        check_traces(bt.airs, list(bt.traces[:P2]) + [p2], bt.table_public_values)


def test_slot_layout_names():
    for k in P2_SLOTS:
        lay, air = p2_layout(k), table_air("poseidon2", k)
        assert lay.width == air.main_width == k * W1
        assert air.num_parts == 2 and air.aux_width == -(-k // 2)   # 2 fractions a batch
    names = table_air("poseidon2", 3).main_names
    assert list(names[W1:W1 + 2]) == ["in@1[0]", "in@1[1]"] and names[-1] == "mult@2"
    assert names[2 * W1 - 1] == "mult@1" and names[0] == "in@0[0]"


# ------------------------------------------------------------------ k = 1 is unchanged

def _legacy_poseidon2():
    """The one-permutation-per-row AIR as vm/airs.py built it before slots (a copy)."""
    b = AirBuilder("poseidon2")
    col = P2_LAYOUT.declare(b)
    state = external_linear(col["in"])

    def sbox(x, cube, out, name):
        b.assert_zero(cube - x * x * x, name=f"{name}_cube")
        b.assert_zero(out - cube * cube * x, name=f"{name}_sbox")

    for r in range(2 * N_FULL_HALF):
        if r == N_FULL_HALF:
            for k in range(N_PARTIAL):
                x0 = state[0] + int(RC_PARTIAL[k])
                sbox(x0, col["pcube"][k], col["psbox"][k], f"partial{k}")
                state = internal_linear([col["psbox"][k]] + state[1:])
        for i in range(WIDTH):
            sbox(state[i] + int(RC_FULL[r][i]), col[f"cube{r}"][i], col[f"sbox{r}"][i],
                 f"full{r}[{i}]")
        state = external_linear(col[f"sbox{r}"])
    b.receive("poseidon2", list(col["in"]) + state, multiplicity=col["mult"])
    return b.build()


def test_k1_air_is_the_legacy_air():
    legacy = _legacy_poseidon2()
    for air in (build_poseidon2(), build_poseidon2(1), block_airs(np.zeros((1, 4)))[P2]):
        assert air.fingerprint() == legacy.fingerprint()
        assert list(air.main_names) == list(legacy.main_names) and air.main_width == W1
        assert [c.name for c in air.constraints] == [c.name for c in legacy.constraints]
    assert p2_layout(1) is P2_LAYOUT
    assert build_poseidon2(2).fingerprint() != legacy.fingerprint()


def test_bad_slots_are_refused():
    rom = np.zeros((1, 4))
    for bad, word in (({"poseidon2": 4}, "poseidon2"), ({"poseidon2": 0}, "poseidon2"),
                      ({"cpu": 2}, "cpu"), ({"nope": 1}, "nope"), ({"poseidon2": True}, "poseidon2")):
        with pytest.raises(ValueError, match=word):
            block_airs(rom, bad)
    with pytest.raises(ValueError):
        poseidon2_trace(np.zeros((3, 16), np.uint32), 5)
    with pytest.raises(ValueError, match="poseidon2: main width 300"):
        slots_from_widths([1, 1, 7, 1, 300])
    assert slots_from_widths([1, 1, 7, 1, 2 * W1]) == {"memory": 1, "poseidon2": 2}


# ------------------------------------------------------------------ the choice of k

def _next_pow2(x: int) -> int:
    n = 2
    while n < x:
        n *= 2
    return n


def _expected_k(perms: int) -> int:
    """Independent arithmetic: cells = rows x (main + 4 aux + 4 parts) with main 299 k,
    aux ceil(k / 2) EF columns (2 LogUp fractions a batch at degree 3), 2 parts."""
    best = None
    for k in (1, 2, 3):
        rows = _next_pow2(-(-perms // k))
        cells = rows * (W1 * k + 4 * ((k + 1) // 2) + 4 * 2)
        if best is None or cells < best[0]:
            best = (cells, k)
    return best[1]


@pytest.mark.parametrize("perms", [0, 1, 2, 3, 4, 5, 6, 7, 8, 1023, 1024, 1025, 1536, 1537,
                                   2047, 2048, 2049, 3072, 3073, 6144, 6145, 17681, 1 << 16])
def test_choice_minimises_cells_at_power_of_two_edges(perms):
    assert choose_slots("poseidon2", perms) == _expected_k(perms)


def test_choice_known_answers():
    # 17,681 permutations (the 2^16-cycle bench block): k = 1 -> 32,768 rows, k = 2 ->
    # 16,384 rows, k = 3 -> 8,192 rows (5,894 used): k = 3
    assert choose_slots("poseidon2", 17681) == 3
    # a power of two: no padding at k = 1 or 2; k = 2 saves 6 cells a permutation
    # (2 x 311 = 622 against 610 a row): k = 2
    assert choose_slots("poseidon2", 1 << 12) == 2
    assert choose_slots("poseidon2", 3 << 10) == 3          # 1,024 rows of 3, no padding
    assert choose_slots("poseidon2", 0) == 1                # 2 rows each: ties -> smaller k


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 1 << 21))
def test_choice_property(perms):
    assert choose_slots("poseidon2", perms) == _expected_k(perms)


# ------------------------------------------------------------------ proofs

FAST = ProverConfig(backend="host", log_blowup=2, num_queries=8, pow_bits=2, check=True)


@pytest.fixture(scope="module")
def slotted_proof():
    rec = execute(one_tx_block())
    bt = build_traces(rec, slots={"poseidon2": 3})
    assert bt.traces[P2].shape[1] == 3 * W1
    proof = Prover(FAST).prove_tables(bt.traces, bt.public_values, rec.rom.rows)
    return rec, proof


def test_block_proof_with_three_slots_verifies(slotted_proof):
    rec, proof = slotted_proof
    assert len(decode(proof.proof).tables[P2].ood_main) == 3 * W1
    res = verify(proof, block=one_tx_block(), min_security_bits=0)     # weak on purpose
    assert res.final_digest == rec.final_digest
    assert [t.main_width for t in proof.stats.tables][P2] == 3 * W1


def _reshaped(proof, width: int) -> bytes:
    """The proof with POSEIDON2's opened main values cut (or padded) to ``width``."""
    d = decode(proof.proof)
    tp = d.tables[P2]

    def fit(a, axis):
        w = a.shape[axis]
        if width <= w:
            return np.ascontiguousarray(np.take(a, range(width), axis=axis))
        pad = [(0, 0)] * a.ndim
        pad[axis] = (0, width - w)
        return np.pad(a, pad)
    tp = dataclasses.replace(tp, ood_main=fit(tp.ood_main, 0), main_rows=fit(tp.main_rows, 1))
    d.tables[P2] = tp
    return type(proof)(proof.rom, encode(d)).to_bytes()


@pytest.mark.parametrize("width", [3 * W1 - 1, 3 * W1 + 1, W1 + 1, 4 * W1])
def test_verify_refuses_a_width_no_k_gives(slotted_proof, width):
    _, proof = slotted_proof
    with pytest.raises(ShapeError) as ei:
        verify(_reshaped(proof, width), min_security_bits=0)
    msg = str(ei.value)
    assert "poseidon2" in msg and f"main width {width}" in msg


def test_verify_refuses_a_width_of_another_k(slotted_proof):
    """k = 2's width on a k = 3 proof: the verifier takes k = 2's AIR, and the proof (its
    fingerprint in the transcript, its openings) fails -- a typed rejection, no traceback."""
    _, proof = slotted_proof
    with pytest.raises(VerificationError):
        verify(_reshaped(proof, 2 * W1), min_security_bits=0)


def test_prove_tables_refuses_a_width_no_k_gives():
    rec = execute(empty_block())
    bt = build_traces(rec)
    tables = list(bt.traces)
    tables[P2] = np.zeros((2, W1 + 1), np.uint32)
    with pytest.raises(ValueError, match="poseidon2: main width 300"):
        Prover(FAST).prove_tables(tables, bt.public_values, rec.rom.rows)
