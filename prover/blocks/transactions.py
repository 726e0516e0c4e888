"""Running a block's transactions for its proof: :func:`run_transaction` (with the
record, an execution failure or a false claim an :class:`UnprovableBlock` naming the
transaction) and the claim checks shared by the one-STARK and the epochs paths."""
from __future__ import annotations

from ...rv32 import block as rblock
from ...rv32.errors import ExecutionError
from ...rv32.run import execute as rv32_execute

from ..common.errors import UnprovableBlock


def _claims(i: int, tx, ex) -> tuple:
    if tx.exit_code is None and tx.output is None:
        return None, None
    try:
        _check_claims(i, tx, ex)
    except UnprovableBlock as exc:
        return False, exc.reason
    return True, None


def run_transaction(i: int, tx, max_cycles: int, claims: bool = True):
    """Run transaction ``i`` with the record; an execution failure or (``claims``) a false
    claim is an :class:`UnprovableBlock` naming the transaction."""
    try:
        ex = rv32_execute(tx.program, tx.input, rblock.stark_limit(max_cycles), record=True)
    except ExecutionError as exc:
        raise UnprovableBlock(f"transaction {i} ({tx.name}): execution failed: {exc}",
                              table=f"{rblock.tx_prefix(i)}rv32") from None
    if claims:
        _check_claims(i, tx, ex)
    return ex


def _check_claims(i: int, tx, ex) -> None:
    if tx.exit_code is not None and tx.exit_code != ex.exit_code:
        raise UnprovableBlock(f"transaction {i} ({tx.name}): the block claims exit code "
                              f"{tx.exit_code}, execution exits with {ex.exit_code}")
    if tx.output is not None and tx.output != bytes(ex.output):
        out = bytes(ex.output)
        k = next((j for j, (a, b) in enumerate(zip(tx.output, out)) if a != b),
                 min(len(tx.output), len(out)))
        raise UnprovableBlock(f"transaction {i} ({tx.name}): the block's claimed output "
                              f"differs from what execution writes (first difference at byte "
                              f"{k}: {len(tx.output)} bytes claimed, {len(out)} written)",
                              details=[f"claimed {tx.output[k:k + 16].hex()}",
                                       f"written {out[k:k + 16].hex()}"])


__all__ = ["run_transaction"]
