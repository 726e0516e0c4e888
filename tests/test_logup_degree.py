"""The LogUp batching degree chosen per AIR and log_blowup (proof format 5, issue #12).

air/builder.py ``choose_logup_degree``: of d in [base, max(base, cap)], base = max(user
degree, 2, the largest single interaction's degree), cap = 3 at log_blowup 1 else 5, the d
whose AIR has the fewest aux_width + num_parts, ties to the smallest d.  The reference
below builds the AIR at every d (the ``logup_degree`` override, nothing of the chooser)
and compares; the RV32IM tables' choices (rv32/tables.py) are pinned; blocks of RISC-V
transactions (block format 2) prove and verify at log_blowup 1 and 2; a proof whose LogUp
was batched for another blowup is refused.

Proofs here use weak parameters (8 queries) on purpose: min_security_bits=0.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from steadfast.air import AirBuilder
from steadfast.air.builder import Air, AirError, choose_logup_degree, logup_degree_cap
from steadfast.prover.api import Prover, ProverConfig, verify
from steadfast.prover.core.prove import prove
from steadfast.prover.blocks.proof import TxBlockProof
from steadfast.rv32 import block as rblock
from steadfast.rv32.chips.common import pow2_rows
from steadfast.rv32.chips.poseidon2 import _poseidon2_air
from steadfast.rv32.chips.program import image_of
from steadfast.rv32.run import execute
from steadfast.rv32.tables import (SLOTTED, TABLES, cells_per_row, choose_slots,
                                   opening_bytes, slot_menu, static_air, table_airs)
from steadfast.rv32.traces import DEFAULT_LOG_BLOWUP, committed_cells
from steadfast.verifier.errors import ShapeError, VerificationError
from steadfast.verifier.proof_format import Params, decode

from txblocks import hash_heavy_block, one_tx_block, program

STATEMENT = ("program", "registers", "io")          # built from the statement (table_airs)


def _hello_airs(lb: int) -> dict:
    airs = table_airs(image_of(program("hello")), b"abc", b"hello from rv32im\ncba", lb)
    return dict(zip(TABLES, airs))
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
    assert DEFAULT_LOG_BLOWUP == Params().log_blowup


def test_rv32_choices_are_as_stated():
    for lb in (1, 2, 3):
        airs = _hello_airs(lb)
        alu, mem, jump = airs["alu"], airs["memory"], airs["jump"]
        if lb == 1:
            assert (alu.logup_target, alu.aux_width, alu.num_parts) == (3, 10, 2)
            assert (jump.logup_target, jump.aux_width, jump.num_parts) == (3, 7, 2)
        else:
            assert (alu.logup_target, alu.aux_width, alu.num_parts) == (5, 5, 4)
            assert (jump.logup_target, jump.aux_width, jump.num_parts) == (4, 5, 3)
        for a in airs.values():
            a.check_parts(lb)                      # fits the blowup
        # MEMORY keeps degree 3 at every blowup (4 aux + 2 parts)
        assert (mem.logup_target, mem.aux_width, mem.num_parts) == (3, 4, 2)
        # POSEIDON2, BYTES, PROGRAM: nothing gained, the builder's default budget exactly
        # (no log_blowup)
        assert airs["poseidon2"].logup_target == 3
        for name, default in (("poseidon2", _poseidon2_air("poseidon2", 1, constraints=True,
                                                           receive=True)),
                              ("bytes", _rebuild(airs["bytes"], 2)),
                              ("program", _rebuild(airs["program"], 2))):
            assert airs[name].fingerprint() == default.fingerprint(), name


@pytest.mark.parametrize("lb", [1, 2, 3])
def test_rv32_airs_match_the_reference(lb):
    """Every RV32 table at k = 1 (the statement's three built for hello), the slotted
    ones at every other k of their menus too."""
    cases = list(_hello_airs(lb).values())
    cases += [static_air(name, lb, k) for name in SLOTTED for k in slot_menu(name) if k > 1]
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
    """choose_slots minimises committed cells ("cells") or the modelled opening bytes
    ("size") with the AIRs of the proof's blowup."""
    for name in ("alu", "load", "poseidon2"):
        for items in (0, 1_985, 17_681, 532_324, 2_131_064):
            for lb in (1, 2):
                rows = {k: max(2, 1 << (max(-(-items // k), 1) - 1).bit_length())
                        for k in slot_menu(name)}
                airs = {k: static_air(name, lb, k) for k in rows}
                cells = {k: committed_cells(airs[k], rows[k]) for k in rows}
                assert all(cells[k] == rows[k] * cells_per_row(airs[k]) for k in rows)
                best = min(cells.values())
                assert choose_slots(name, items, lb, "cells") == \
                    min(k for k in cells if cells[k] == best), (name, items, lb)
                size = {k: opening_bytes(airs[k], rows[k], lb) for k in rows}
                best = min(size.values())
                assert choose_slots(name, items, lb) == \
                    min(k for k in size if size[k] == best), (name, items, lb)


def _run(blk):
    return [execute(t.program, t.input, blk.max_cycles, record=True) for t in blk.transactions]


@pytest.fixture(scope="module")
def hash_block():
    blk = hash_heavy_block()
    return blk, _run(blk)


@pytest.mark.parametrize("lb", [1, 2])
def test_block_proves_and_verifies_at_each_blowup(lb):
    block = one_tx_block()
    prover = Prover(ProverConfig(backend="host", log_blowup=lb, num_queries=8, pow_bits=2))
    proof = prover.prove_block(block)
    res = verify(TxBlockProof.from_bytes(proof.to_bytes()), block=block, min_security_bits=0)
    assert res.params.log_blowup == lb
    d = decode(proof.proof)
    tx_slots, p2 = rblock.slots_of(d, 1)
    tx = block.transactions[0]
    airs = rblock.block_airs([tx.program], [tx.input], [tx.output], lb, tx_slots, p2)
    assert [len(t.ood_aux) for t in d.tables] == [4 * a.aux_width for a in airs]
    assert [len(t.ood_parts) for t in d.tables] == [4 * a.num_parts for a in airs]
    parts = dict(zip(rblock.table_names(1), [t.parts for t in proof.stats.tables]))
    assert parts["tx0/alu"] == (2 if lb == 1 else 4) and parts["bytes"] == 1


def test_proof_batched_for_another_blowup_is_refused():
    """A proof at log_blowup 2 whose tables use log_blowup 1's AIRs (degree-3 batching:
    10 aux and 2 parts for ALU) is refused: the verifier derives the degree-5 AIRs."""
    blk = one_tx_block()
    bt = rblock.build_block_traces([t.program for t in blk.transactions], _run(blk),
                                   blk.max_cycles, 1)
    proof = prove(bt.traces, bt.airs, bt.table_public_values,
                  Params(log_blowup=2, num_queries=8, pow_bits=2), check=False)
    with pytest.raises(VerificationError) as ei:
        verify(TxBlockProof(1, proof), block=blk, min_security_bits=0)
    assert isinstance(ei.value, ShapeError), repr(ei.value)


def test_block_slots_thread_the_blowup(hash_block):
    blk, exs = hash_block
    progs = [t.program for t in blk.transactions]
    for lb in (1, 2):
        bt = rblock.build_block_traces(progs, exs, blk.max_cycles, lb)
        tx_slots = []
        for tr in bt.txs:
            want = {name: choose_slots(name, max(1, tr.real_rows[name]), lb) for name in SLOTTED
                    if name != "poseidon2"}
            assert {n: k for n, k in tr.slots.items() if n != "poseidon2"} == want
            tx_slots.append(want)
        assert bt.p2_slots == choose_slots(
            "poseidon2", max(1, sum(tr.real_rows["poseidon2"] for tr in bt.txs)), lb)
        airs = rblock.block_airs(progs, [t.input for t in blk.transactions],
                                 [bytes(e.output) for e in exs], lb, tx_slots, bt.p2_slots)
        assert [a.fingerprint() for a in bt.airs] == [a.fingerprint() for a in airs]
        lbs = {a.logup_target for a in bt.airs if a.name.endswith("alu")}
        assert lbs == {3 if lb == 1 else 5}
