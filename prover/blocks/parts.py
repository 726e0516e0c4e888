"""What telling a block proved in epochs apart and reporting its parts need, without the
epoch machinery (segments, their execution) that prover/blocks/epochs.py imports: the
file's magic and :class:`PartReport`, which :class:`prover.blocks.proof.VerifiedTxBlock`
names in its fields.  A plain block's verify imports only this."""
from __future__ import annotations

from dataclasses import dataclass

EPOCHS_MAGIC = b"STBE"             # prover/blocks/epochs.py's file (its MAGIC)


@dataclass(frozen=True)
class PartReport:
    """What verify reports of a part of a block proved in epochs (prover/blocks/epochs.py):
    its kind and transactions, its segments (a long part) and its verify seconds."""
    kind: str
    first: int
    count: int
    segments: int
    #: None: the proofs do not bind a run's exact count (prover/programs/segment_proof.py
    #: ``VerifiedSegments``); an execute report's parts (dicts) carry the executed count
    cycles: int | None
    seconds: float

    def to_json(self) -> dict:
        return {"kind": self.kind, "first": self.first, "count": self.count,
                "segments": self.segments, "cycles": self.cycles,
                "seconds": round(self.seconds, 4)}


__all__ = ["EPOCHS_MAGIC", "PartReport"]
