"""What a block proved in epochs reports of each part (prover/blocks/epochs.py), in a module
of its own: :class:`prover.blocks.proof.VerifiedTxBlock` names it in its fields, and a plain
block's verify does not import the epoch machinery (segments, their execution)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PartReport:
    """What verify reports of a part: its kind and transactions, its segments (a long
    part) and its verify seconds."""
    kind: str
    first: int
    count: int
    segments: int
    #: a long part's executed cycles in an execute report; None in a verify result (the
    #: proofs do not bind a run's exact count: prover/programs/segment_proof.py)
    cycles: int | None
    seconds: float

    def to_json(self) -> dict:
        return {"kind": self.kind, "first": self.first, "count": self.count,
                "segments": self.segments, "cycles": self.cycles,
                "seconds": round(self.seconds, 4)}


__all__ = ["PartReport"]
