"""The LogUp batching degree chosen per AIR and log_blowup (proof format 5, issue #12).

air/builder.py ``choose_logup_degree``: of d in [base, max(base, cap)], base = max(user
degree, 2, the largest single interaction's degree), cap = 3 at log_blowup 1 else 5, the d
whose AIR has the fewest aux_width + num_parts, ties to the smallest d.  The reference
below builds the AIR at every d (the ``logup_degree`` override, nothing of the chooser)
and compares; the VM tables' choices are pinned; block proofs at log_blowup 1 and 2
prove and verify; a proof whose LogUp was batched for another blowup is refused.

Proofs here use weak parameters (8 queries) on purpose: min_security_bits=0.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from steadfast.air import AirBuilder
from steadfast.air.builder import Air, AirError, choose_logup_degree, logup_degree_cap
from steadfast.prover.api import BlockProof, Prover, ProverConfig, verify
from steadfast.prover.prove import prove
from steadfast.verifier.errors import ShapeError, VerificationError
from steadfast.verifier.proof_format import Params, decode
from steadfast.vm import airs as vm_airs
from steadfast.vm.interpreter import execute
from steadfast.vm.traces import block_slots, build_traces, choose_slots, committed_cells

from vm_blocks import hash_heavy_block, one_tx_block

ROM = np.zeros((1, 4), dtype=np.int64)


def _rebuild(air: Air, d: int) -> Air:
    """``air``'s user constraints and interactions with the LogUp degree budget d."""
    return Air(air.name, air.main_names, air.prep_names, air.public_names,
               air.user_constraints, air.interactions, air.preprocessed, logup_degree=d)


def _reference(air: Air, log_blowup: int) -> Air:
    """The rule, naively: build every budget from the smallest one that accepts every
    interaction up to the cap, keep the first with the fewest aux + parts columns."""
    user = max([c.degree for c in air.user_constraints], default=0)
    base = max(user, 2)
    while True:
        try:
            _rebuild(air, base)
            break
        except AirError:
            base += 1
    cap = 3 if log_blowup == 1 else 5
    best = None
    for d in range(base, max(base, cap) + 1):
        a = _rebuild(air, d)
        if best is None or a.aux_width + a.num_parts < best.aux_width + best.num_parts:
            best = a
    return best


def test_cap_is_the_blowup_bound():
    assert logup_degree_cap(1) == 3
    assert all(logup_degree_cap(lb) == 5 for lb in range(2, 9))
    assert vm_airs.DEFAULT_LOG_BLOWUP == Params().log_blowup


def test_vm_choices_are_as_stated():
    for lb in (1, 2, 3):
        airs = {a.name: a for a in vm_airs.block_airs(ROM, {"memory": 9, "poseidon2": 3}, lb)}
        cpu, mem = airs["cpu"], airs["memory"]
        if lb == 1:
            assert (cpu.logup_target, cpu.aux_width, cpu.num_parts) == (3, 15, 2)
            assert (mem.logup_target, mem.aux_width, mem.num_parts) == (3, 18, 2)
        else:
            assert (cpu.logup_target, cpu.aux_width, cpu.num_parts) == (5, 8, 4)
            assert (mem.logup_target, mem.aux_width, mem.num_parts) == (5, 9, 4)
        for a in (cpu, mem):
            a.check_parts(lb)                      # fits the blowup
        # POSEIDON2, RANGE, PROGRAM: nothing gained, today's AIR exactly (the builder's
        # default budget, no log_blowup)
        assert airs["poseidon2"].logup_target == 3
        for name, default in (("poseidon2", vm_airs._poseidon2_air("poseidon2", 3, True, True)),
                              ("range", _rebuild(airs["range"], 2)),
                              ("program", _rebuild(airs["program"], 2))):
            assert airs[name].fingerprint() == default.fingerprint(), name
    # MEMORY with one slot keeps degree 3 at every blowup (2 + 2 columns against 1 + 4)
    for lb in (1, 2):
        assert vm_airs.table_air("memory", 1, lb).logup_target == 3


@pytest.mark.parametrize("lb", [1, 2, 3])
def test_vm_airs_match_the_reference(lb):
    cases = [vm_airs.block_airs(ROM, log_blowup=lb)[i] for i in (0, 1, 3)]
    cases += [vm_airs.table_air("memory", k, lb) for k in vm_airs.MEMORY_SLOTS]
    cases += [vm_airs.table_air("poseidon2", k, lb) for k in vm_airs.P2_SLOTS]
    for air in cases:
        ref = _reference(air, lb)
        assert air.logup_target == ref.logup_target, (air.name, air.main_width)
        assert air.fingerprint() == ref.fingerprint()
        assert (air.aux_width, air.num_parts, air.max_degree) == (ref.aux_width, ref.num_parts,
                                                                  ref.max_degree)


@st.composite
def _airs(draw):
    """A random AIR: 4 main columns, one user constraint of degree 1..4 (maybe on the
    first row), 1..12 interactions whose values and multiplicities are products of
    columns (degree 1..3 and 0..2)."""
    b = AirBuilder("rand")
    c = b.main_cols("c", 4)

    def prod(deg):
        e = 1
        for _ in range(deg):
            e = e * c[draw(st.integers(0, 3))]
        return e

    u = draw(st.integers(1, 4))
    if draw(st.booleans()):
        b.when_first_row(prod(u) - 1)
    else:
        b.assert_zero(prod(u) - 1)
    for _ in range(draw(st.integers(1, 12))):
        vals = [prod(draw(st.integers(1, 3))) for _ in range(draw(st.integers(1, 3)))]
        mult = prod(draw(st.integers(0, 2)))
        (b.send if draw(st.booleans()) else b.receive)(draw(st.sampled_from(["x", "y"])), vals,
                                                       multiplicity=mult)
    return b


@settings(max_examples=60, deadline=None)
@given(_airs(), st.integers(1, 4))
def test_chooser_matches_the_naive_rule(builder, lb):
    air = builder.build(log_blowup=lb)
    ref = _reference(air, lb)
    assert air.logup_target == ref.logup_target
    assert air.fingerprint() == ref.fingerprint()
    user = max(c.degree for c in air.user_constraints)
    assert choose_logup_degree(user, air.interactions, lb) == air.logup_target
    # without log_blowup: today's budget, the smallest accepted
    plain = builder.build()
    base = max(user, 2, min(d for d in range(2, 12) if _accepts(air, d)))
    assert plain.logup_target == base


def _accepts(air, d):
    try:
        _rebuild(air, d)
        return True
    except AirError:
        return False


def test_slot_chooser_counts_the_new_columns():
    """choose_slots minimises committed_cells with the AIRs of the proof's blowup."""
    for items in (0, 1_985, 17_681, 532_324, 2_131_064):
        for lb in (1, 2):
            cells = {k: committed_cells(vm_airs.table_air("memory", k, lb),
                                        max(2, 1 << (max(-(-items // k), 1) - 1).bit_length()))
                     for k in vm_airs.MEMORY_SLOTS}
            best = min(cells.values())
            assert choose_slots("memory", items, lb) == min(k for k in cells if cells[k] == best)


@pytest.fixture(scope="module")
def hash_rec():
    return execute(hash_heavy_block())


@pytest.mark.parametrize("lb", [1, 2])
def test_block_proves_and_verifies_at_each_blowup(lb):
    block = one_tx_block()
    prover = Prover(ProverConfig(backend="host", log_blowup=lb, num_queries=8, pow_bits=2))
    proof = prover.prove_block(block)
    res = verify(BlockProof.from_bytes(proof.to_bytes()), block=block, min_security_bits=0)
    assert res.params.log_blowup == lb
    d = decode(proof.proof)
    airs = vm_airs.block_airs(proof.rom, vm_airs.slots_from_widths(
        [len(t.ood_main) for t in d.tables]), lb)
    assert [len(t.ood_aux) for t in d.tables] == [4 * a.aux_width for a in airs]
    assert [len(t.ood_parts) for t in d.tables] == [4 * a.num_parts for a in airs]
    assert {t.name: t.parts for t in proof.stats.tables}["cpu"] == (2 if lb == 1 else 4)


def test_proof_batched_for_another_blowup_is_refused():
    """A proof at log_blowup 2 whose tables use log_blowup 1's AIRs (degree-3 batching:
    15 aux and 2 parts for CPU) is refused: the verifier derives the degree-5 AIRs."""
    rec = execute(one_tx_block())
    bt = build_traces(rec, log_blowup=1)
    proof = prove(bt.traces, bt.airs, bt.table_public_values,
                  Params(log_blowup=2, num_queries=8, pow_bits=2), check=False)
    with pytest.raises(VerificationError) as ei:
        verify(BlockProof(np.asarray(rec.rom.rows, dtype=np.int64), proof),
               min_security_bits=0)
    assert isinstance(ei.value, ShapeError), repr(ei.value)


def test_block_slots_thread_the_blowup(hash_rec):
    for lb in (1, 2):
        slots = block_slots(hash_rec, log_blowup=lb)
        bt = build_traces(hash_rec, log_blowup=lb)
        assert bt.slots == slots
        assert [a.fingerprint() for a in bt.airs] == [
            a.fingerprint() for a in vm_airs.block_airs(hash_rec.rom.rows, slots, lb)]
    with pytest.raises(ValueError, match="log_blowup"):
        vm_airs.block_airs(ROM, log_blowup=0)
