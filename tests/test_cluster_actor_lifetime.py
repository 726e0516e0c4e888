"""A long-lived cluster actor ends with nothing booked (issue #28's done criterion).

The Ray actor is :class:`prover.cluster.worker._Worker`, a plain class: here it runs in
this process (no Ray), on the emulated device with faults on, doing what a worker of a
busy cluster does -- whole blocks, and the pieces of sharded proofs whose R1 state it
holds between calls -- interleaved so that a whole-block proof's epoch ends while a
sharded job's buffers are still held (issue #28 finding 4: those frees used to be dropped
as stale and the bytes stayed booked for the life of the process).  After every round
the actor's device memory must be back to zero.  ``bench/recovery_soak.py --actor --proofs N``
runs the same loop (:func:`bench.recovery_soak.actor_rounds`) at bench size.
"""
from __future__ import annotations

from bench.recovery_soak import actor_rounds

ROUNDS = 12


def test_an_actor_proving_blocks_and_sharded_pieces_with_faults_ends_with_nothing_booked(
        monkeypatch):
    monkeypatch.setenv("PROVER_FAULTS", "oom@*:0.3,seed=11")
    proofs, in_use, live, mem = actor_rounds(ROUNDS, 60_000)
    assert all(p == proofs[0] for p in proofs)
    assert in_use == [0] * ROUNDS, in_use
    assert live == [0] * ROUNDS, live
