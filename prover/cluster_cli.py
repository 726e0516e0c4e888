"""``prove --cluster [ADDRESS] BLOCK...``: the command line of cluster mode
(:mod:`prover.cluster`), reached from :mod:`prover.cli`, which parses the options.  Writes
each block's proof beside it, one progress line per block, the exit statuses of
``prove`` (:mod:`prover.cli_common`).
"""
from __future__ import annotations

import os
import sys
import time

from steadfast.vm.block import BlockError, load_block

from .cli_common import (EXIT_INTERNAL, EXIT_INVALID, EXIT_OK, EXIT_USAGE, EXIT_XCHECK, Fail,
                         default_output, prover_config)
from .cluster import ClusterProver
from .errors import ClusterError, ConfigError, ProofSelfCheckFailure, UnprovableBlock
from .timeline import Timeline


def run_cli(args) -> int:
    """``prove --cluster [ADDRESS] BLOCK... [--shard-tables] [--workers N]`` (prover/cli.py
    parses; a :class:`prover.cli_common.Fail` ends the command).  Writes BLOCK.proof
    beside each block (``-o`` with one block), one progress line per block; the exit
    codes of ``prove``: 1 for a block that cannot be proven (naming it), 2 usage, 3 a
    cluster failure, 4 a self-check failure."""
    paths = list(args.block)
    address = args.cluster or None
    if address is not None and (os.path.exists(address) or address.lower().endswith(".json")):
        paths.insert(0, address)         # "--cluster BLOCK ...": no address, a local Ray
        address = None
    if not paths:
        raise Fail(EXIT_USAGE, "no block given (see --help)")
    if args.precompile or getattr(args, "execute_only", False):
        raise Fail(EXIT_USAGE, "--precompile and --execute-only do not apply to --cluster")
    if args.shard_tables and len(paths) != 1:
        raise Fail(EXIT_USAGE, f"--shard-tables proves one block, got {len(paths)}")
    if args.output and len(paths) != 1:
        raise Fail(EXIT_USAGE, "-o/--output needs exactly one block")
    blocks = []
    for path in paths:
        try:
            blocks.append(load_block(path))
        except OSError as exc:
            raise Fail(EXIT_USAGE, f"cannot read {path}: {exc.strerror or exc}") from None
        except BlockError as exc:
            raise Fail(EXIT_USAGE, f"{path}: {exc}") from None
    outs = [args.output] if args.output else [default_output(p) for p in paths]
    for out in outs:
        d = os.path.dirname(os.path.abspath(out))
        if not os.path.isdir(d):
            raise Fail(EXIT_USAGE, f"cannot write {out}: no directory {d}")
    cfg = prover_config(args)
    workers = args.workers if args.workers is not None else 2
    say = (lambda msg: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    t0 = time.perf_counter()
    try:
        timeline = None
        if args.timeline:
            timeline = Timeline()
        # the PROVER_* switches of this command's environment apply in the workers
        env = {k: v for k, v in os.environ.items() if k.startswith("PROVER_")}
        cp = ClusterProver(address, cfg, workers=workers, timeline=timeline, worker_env=env)
    except ConfigError as exc:
        raise Fail(EXIT_USAGE, str(exc)) from None
    except ClusterError as exc:
        raise Fail(EXIT_INTERNAL, str(exc)) from None
    say(f"cluster: {workers} workers ({cp.gpus} GPUs), {len(paths)} block(s)"
        + (", tables sharded" if args.shard_tables else ""))
    with cp:
        try:
            if args.shard_tables:
                results = [(0, cp.prove_sharded(blocks[0]))]
            else:
                results = cp.prove_many(blocks)
            for i, proof in results:
                data = proof.to_bytes()
                try:
                    with open(outs[i], "wb") as fh:
                        fh.write(data)
                except OSError as exc:
                    raise Fail(EXIT_USAGE, f"cannot write {outs[i]}: {exc.strerror or exc}") from None
                c = proof.stats.counters.get("cluster", {})
                say(f"[{time.perf_counter() - t0:8.2f}s] {paths[i]}: wrote {outs[i]} "
                    f"({len(data):,} bytes; {proof.stats.cycles:,} cycles; "
                    f"{c.get('seconds', 0):.2f}s; retries {c.get('retries', 0)})")
        except UnprovableBlock as exc:
            i = getattr(exc, "cluster_piece", 0) if not args.shard_tables else 0
            name = paths[i] if isinstance(i, int) and 0 <= i < len(paths) else "a block"
            lines = [f"{name}: block cannot be proven: {exc}"] + [f"  {d}" for d in exc.details]
            raise Fail(EXIT_INVALID, "\n".join(lines)) from None
        except ProofSelfCheckFailure as exc:
            raise Fail(EXIT_XCHECK, f"{exc}; no proof written") from None
        except (ClusterError, TimeoutError) as exc:
            raise Fail(EXIT_INTERNAL, f"cluster: {exc}") from None
        finally:
            if timeline is not None:
                try:
                    timeline.write(args.timeline)
                except OSError as exc:
                    print(f"error: cannot write the timeline {args.timeline}: "
                          f"{exc.strerror or exc}", file=sys.stderr)
    return EXIT_OK


__all__ = ["run_cli"]
