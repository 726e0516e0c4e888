"""The command line: ``prove BLOCK.json``, ``prove PROGRAM.elf [--input FILE]`` and
``verify PROOF`` (:mod:`prover.cli.verify`).

Exit status (documented in docs/api.md and in ``--help``):

* 0 -- success (the proof was written / the proof is valid);
* 1 -- the block or program cannot be proven (execution fails, a block's claims are
  false, a trace breaks a constraint) or the proof is invalid; the reason is printed;
* 2 -- bad usage or unreadable input (a missing file, a malformed block -- with the JSON
  path of the bad field --, an ELF the RV32IM machine does not load, an unusable option,
  an unwritable output);
* 3 -- an internal error (a bug: please report the message);
* 4 -- ``prove`` only: the finished proof failed the prover's self-check (the verifier's
  own code, on by default), or PROVER_GPU_XCHECK caught device corruption; a post-mortem
  was written, no proof;
* 130 -- interrupted.

``prove`` tells a program from a block by content (an ELF file starts with ``\\x7fELF``);
a block of RISC-V transactions (docs/block-format.md) is :mod:`prover.cli.txblock`, a
program :mod:`prover.cli.program`, what both do the same way :mod:`prover.cli.prove`.  ``verify`` refuses proofs whose parameters give fewer
conjectured security bits than ``--min-security-bits`` (default
:data:`DEFAULT_MIN_SECURITY_BITS`; the prover's defaults give 110 on the example block):
exit 1, before any hashing.  ``--min-security-bits 0`` accepts any parameters.

No Python traceback ever reaches the terminal; ``-v`` adds detail, ``-q`` keeps only errors.
``prove --cluster`` is :mod:`prover.cli.cluster`; all share :mod:`prover.cli.common`.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from .common import DEFAULT_MIN_SECURITY_BITS, EXIT_USAGE
from .common import Fail as _Fail
from .common import Parser as _Parser
from .common import add_verbosity
from .common import host_kernels_cached as _host_kernels_cached
from .common import log_to_stderr as _log_to_stderr
from .common import main as _main
from .common import skip_final_gc as _skip_final_gc
from .common import write_all as _write_all  # noqa: F401  (the tests' door)
from .verify import run_verify as _run_verify
from .verify import verify_parser as _verify_parser

_EPILOG = ("exit status: 0 success; 1 unprovable block or program, or invalid proof (with "
           "the reason); 2 bad usage or unreadable input (a malformed block names the JSON "
           "path of the bad field, a malformed ELF the part at fault); 3 internal error; 4 "
           "the proof failed the self-check or PROVER_GPU_XCHECK caught device corruption (a "
           "post-mortem was written, no proof)")

# The display itself is prover/cli/display.py: a live rich display on a terminal, plain
# deterministic lines otherwise (logs, CI, pipes); nothing with -q or --json.


# --------------------------------------------------------------------------- prove

def _prove_parser() -> argparse.ArgumentParser:
    from ...verifier.proof_format import Params     # the defaults (light import)
    ap = _Parser(prog="prove", description="Prove a Steadfast block or an RV32IM program "
                                       "(docs/api.md).",
                 epilog=_EPILOG)
    ap.add_argument("block", nargs="*", metavar="BLOCK.json|PROGRAM.elf",
                    help="the block JSON file (docs/block-format.md: a block of RV32IM "
                         "transactions) or the RV32IM program (a static ELF32, "
                         "docs/rv32.md), told apart by content; several with --cluster")
    ap.add_argument("--input", metavar="FILE",
                    help="a program's input (fd 0's bytes; default: none, the empty input)")
    ap.add_argument("--max-cycles", type=int, default=None, metavar="N",
                    help="a program's cycle limit, 1..2^32 - 1, bound by the proof (a run "
                         "within one segment is proved within min(N, 2^24)) (default: "
                         f"{1 << 30:,} = 2^30)")
    ap.add_argument("--segment-cycles", type=int, default=None, metavar="N",
                    help="a program longer than N cycles is proved as linked segments of N "
                         "cycles, one at a time in bounded memory (a power of two, "
                         "2^10..2^22; docs/rv32.md 'Long programs: segments') (default: "
                         f"{1 << 20:,} = 2^20)")
    ap.add_argument("--cluster", nargs="?", const="", metavar="ADDRESS", default=None,
                    help="prove on a Ray cluster (pip install 'steadfast[cluster]'): ADDRESS "
                         "of `ray start --head`, none for a local Ray; several blocks or programs allowed "
                         "(default: no cluster, prove here)")
    ap.add_argument("--shard-tables", action="store_true",
                    help="with --cluster: prove one block or program with its tables spread over "
                         "workers")
    ap.add_argument("--workers", type=int, default=None, help="with --cluster: workers (default 2)")
    ap.add_argument("-o", "--output",
                    help="proof file (default: the block's or program's path with .proof for "
                         ".json / .elf)")
    ap.add_argument("--backend", default=os.environ.get("PROVER_BACKEND", "auto"),
                    help="host, cuda, sim, emu or auto (auto: cuda when usable, else host; "
                         "the default is $PROVER_BACKEND, else auto)")
    ap.add_argument("--vram-budget", default=os.environ.get("PROVER_VRAM_BUDGET"),
                    help="device memory the prover may use, e.g. 6GiB (default: "
                         "$PROVER_VRAM_BUDGET, else what the device has free)")
    ap.add_argument("--host-hold", default=None,
                    help="host LDEs kept between rounds instead of recomputed, e.g. 512MiB; "
                         "0 for the smallest footprint (default: $PROVER_HOST_HOLD, else "
                         "1GiB; docs/design.md)")
    from ..engine.config import PROFILES, SLOT_OBJECTIVES
    ap.add_argument("--profile", default="default", choices=tuple(PROFILES),
                    help="a named parameter set (docs/api.md 'Profiles'): default "
                         "(log_blowup 2, 50 queries), fast (log_blowup 1: a program's fastest "
                         "prove, larger proofs), small (log_blowup 3, 27 queries, 22 proof-of-work "
                         "bits: smaller proofs, slower prove), smallest (log_blowup 5, 17 "
                         "queries: the smallest, about 5x the prove time), fastest (fast with "
                         "--slots cells-split: the fastest prove, the largest proofs); the options "
                         "below override it; each gives >= 100 conjectured bits")
    ap.add_argument("--slots", default=None, choices=SLOT_OBJECTIVES,
                    help="RISC-V proofs: how the instruction chips are laid out -- split: "
                         "one instruction a row, and a chip whose rows would leave its power "
                         "of two at most half full goes in two tables (about a third fewer "
                         "cells for a long program, a larger proof); "
                         "size: one a row, one table a chip, the smallest proof (the bytes "
                         "of earlier releases); cells: up to 4 a row, the fewest committed "
                         "cells, the largest proof; cells-split: cells' rows, then split as "
                         "split does (default: the profile's: split, size for small and "
                         "smallest, cells-split for fastest)")
    ap.add_argument("--log-blowup", type=int, default=None,
                    help="log2 of the LDE blowup (default: the profile's; default profile: "
                         f"{Params.log_blowup})")
    ap.add_argument("--queries", type=int, default=None,
                    help=f"FRI queries (default: the profile's; default profile: "
                         f"{Params.num_queries})")
    ap.add_argument("--pow-bits", type=int, default=None,
                    help="proof-of-work bits before the queries (default: the profile's; "
                         f"default profile: {Params.pow_bits})")
    ap.add_argument("--fri-arity", type=int, default=None, metavar="A",
                    help="FRI folding arity: 2, 4, 8 or 16 (default: the profile's; every "
                         f"profile: {1 << Params.log_fri_arity}); larger: fewer layers, "
                         "smaller proofs")
    ap.add_argument("--cap-height", type=int, default=None, metavar="C",
                    help="Merkle cap height: every commitment is 2^C nodes, 0..8 (default: "
                         f"the profile's; every profile: {Params.log_cap}); openings stop C "
                         "levels below the root")
    ap.add_argument("--threads", type=int, default=None,
                    help="host threads for the numba kernels (default: numba's, all cores)")
    ap.add_argument("--execute-only", action="store_true",
                    help="run the program or the block's transactions and size the proof "
                         "without proving: cycles, rows and padded height per table, "
                         "committed cells, the parameters' security; every transaction's "
                         "exit code and output, a block's claimed-output check (exit 1 when "
                         "false)")
    ap.add_argument("--json", action="store_true",
                    help="print the result as one JSON object on stdout (the --execute-only "
                         "report, or the proof's statistics) instead of text")
    ap.add_argument("--no-self-check", action="store_true",
                    help="do not verify the proof before writing it (saves a few percent; a "
                         "device fault that PROVER_GPU_XCHECK is not on to catch could then "
                         "write a wrong proof)")
    ap.add_argument("--check", action="store_true",
                    help="run the AIR check mode on every table before proving (names the "
                         "table, constraint and row of a violation; slower)")
    ap.add_argument("--precompile", action="store_true",
                    help="compile the device kernels the block or program needs for the backend (into the kernel "
                         "cache, PROVER_KERNEL_CACHE), print what and how long, and exit")
    ap.add_argument("--stats-json", metavar="FILE",
                    help="write the proof statistics as JSON, for failed proofs too (default: "
                         "none)")
    ap.add_argument("--timeline", metavar="FILE",
                    help="write a Chrome/Perfetto trace of every table's stages (device "
                         "backends; default: none)")
    ap.add_argument("--postmortem-dir", metavar="DIR", default=None,
                    help="where the self-check and PROVER_GPU_XCHECK write post-mortems "
                         "(default: $PROVER_POSTMORTEM_DIR, else "
                         "$XDG_STATE_HOME/steadfast/postmortems, i.e. "
                         "~/.local/state/steadfast/postmortems)")
    add_verbosity(ap)
    return ap




def _run_prove(argv) -> int:
    t_start = time.perf_counter()       # what the user waits for: imports, compilation too
    args = _prove_parser().parse_args(argv)
    if args.cluster is not None or args.shard_tables:
        from .cluster import run_cli
        return run_cli(args)
    if len(args.block) != 1:
        raise _Fail(EXIT_USAGE, "prove takes one block or program (several need --cluster; "
                                "see --help)")
    args.block = args.block[0]
    _log_to_stderr(args.quiet)
    try:
        with open(args.block, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise _Fail(EXIT_USAGE, f"cannot read {args.block}: {exc.strerror or exc}") from None
    from ..programs.proof import ELF_MAGIC
    if raw[:4] == ELF_MAGIC:
        from .program import run_prove_program
        return run_prove_program(args, raw, t_start, _host_kernels_cached)
    if args.input is not None or args.max_cycles is not None:
        raise _Fail(EXIT_USAGE, f"--input and --max-cycles apply to programs (ELF files); "
                                f"{args.block} is not an ELF file")
    from .txblock import run_prove_txblock
    return run_prove_txblock(args, raw, t_start, _host_kernels_cached)


# --------------------------------------------------------------------------- entry points

def main_prove(argv=None) -> int:
    """Console entry point ``prove``."""
    code = _main(_run_prove, argv)
    if argv is None:                    # the console command: its process ends here
        _skip_final_gc()
        sys.exit(code)
    return code


def main_verify(argv=None) -> int:
    """Console entry point ``verify``.  Python's cyclic garbage collector is paused for the
    call (re-enabled after it where it was on): a verify allocates its AIRs, its imports'
    objects and the proof's values, keeps them to its end and makes almost no cyclic
    garbage, so the collections it would trigger only walk that heap again (~40 ms of a
    0.5 s warm ``verify``; peak memory unchanged, docs/benchmarks.md)."""
    import gc
    collecting = gc.isenabled()
    gc.disable()
    try:
        code = _main(_run_verify, argv)
    finally:
        if collecting:
            gc.enable()
    if argv is None:
        _skip_final_gc()
        sys.exit(code)
    return code


__all__ = ["main_prove", "main_verify", "EXIT_USAGE", "DEFAULT_MIN_SECURITY_BITS"]
