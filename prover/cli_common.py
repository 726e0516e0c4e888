"""What the ``prove`` command's two front ends share -- the one-machine command
(:mod:`prover.cli`) and ``prove --cluster`` (:mod:`prover.cluster_cli`): the exit
statuses, the failure that carries one out, where a proof is written by default and the
configuration the options give.  Imports nothing heavy: the command's start-up stays
light.
"""
from __future__ import annotations

import os

# the exit statuses (docs/api.md "Exit status", ``--help``'s epilog)
EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_INTERNAL, EXIT_XCHECK, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130


class Fail(Exception):
    """Ends a command with exit status ``code`` and the one-line error ``message``."""

    def __init__(self, code: int, message: str):
        self.code = code
        super().__init__(message)


def default_output(block_path: str) -> str:
    """Where ``prove`` writes a block's proof without ``-o``: beside the block, ``.json``
    replaced by ``.proof`` (any other name gets ``.proof`` added)."""
    root, ext = os.path.splitext(block_path)
    return (root if ext.lower() == ".json" else block_path) + ".proof"


def prover_config(args, **fields):
    """The :class:`prover.config.ProverConfig` of ``prove``'s parsed options (plus
    ``fields``); a bad value is the library's :class:`prover.errors.ConfigError`."""
    from .config import ProverConfig
    return ProverConfig(backend=args.backend, vram_budget=args.vram_budget,
                        log_blowup=args.log_blowup, num_queries=args.queries,
                        pow_bits=args.pow_bits, threads=args.threads, check=args.check,
                        **fields, postmortem_dir=args.postmortem_dir,
                        self_check=not args.no_self_check)


__all__ = ["EXIT_OK", "EXIT_INVALID", "EXIT_USAGE", "EXIT_INTERNAL", "EXIT_XCHECK",
           "EXIT_INTERRUPTED", "Fail", "default_output", "prover_config"]
