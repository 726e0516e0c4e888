"""How a proved output is shown in one line: the same words in ``prove``, ``verify`` and
``prove --execute-only`` of a block (prover/cli/txblock.py, prover/blocks/prover.py)."""
from __future__ import annotations


def show_output(output: bytes, limit: int = 200) -> str:
    """Text as a Python bytes literal, anything else in hex (the first ``limit`` / 4
    bytes)."""
    text = all(32 <= b < 127 or b in (9, 10, 13) for b in output)
    k = limit if text else limit // 4
    more = " ..." if len(output) > k else ""
    return (repr(output[:k]) if text else output[:k].hex() or "(none)") + more


__all__ = ["show_output"]
