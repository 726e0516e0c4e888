"""A proof as a file: ``save`` writes ``to_bytes()``, ``load`` reads ``from_bytes`` -- one
mixin for the proof records (:class:`prover.engine.air_proof.AirProof`,
:class:`prover.block_proof.BlockProof`, :class:`prover.programs.proof.ProgramProof`), whose
byte layouts are their own."""
from __future__ import annotations

import os
from typing import TypeVar

_F = TypeVar("_F", bound="ProofFile")


class ProofFile:
    """``save(path)`` / ``load(path)`` over the class's ``to_bytes`` / ``from_bytes``."""

    def save(self, path: str | os.PathLike) -> None:
        with open(path, "wb") as fh:
            fh.write(self.to_bytes())  # type: ignore[attr-defined]

    @classmethod
    def load(cls: type[_F], path: str | os.PathLike) -> _F:
        with open(path, "rb") as fh:
            return cls.from_bytes(fh.read())  # type: ignore[attr-defined]


__all__ = ["ProofFile"]
