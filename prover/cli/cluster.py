"""``prove --cluster [ADDRESS] BLOCK...`` / ``PROGRAM.elf... [--input FILE]``: the command
line of cluster mode (:mod:`prover.cluster`), reached from :mod:`prover.cli`, which parses
the options.  Writes each block's or program's proof beside it, one progress line per
proof, the exit statuses of ``prove`` (:mod:`prover.cli.common`).  Programs (told from
blocks by the ELF magic; one kind per command) all run on ``--input`` with
``--max-cycles``.

The proof options are the workers' configuration, so that each proof is the bytes
``prove`` makes on one machine with the same options: ``--backend``, ``--vram-budget``,
``--log-blowup``, ``--queries``, ``--pow-bits``, ``--fri-arity``, ``--cap-height``,
``--threads``, ``--check``, ``--no-self-check``, ``--postmortem-dir``, ``--segment-cycles``
(the ``PROVER_*`` environment is forwarded too).  What cluster mode does not do is refused,
exit 2 (:data:`REFUSED`).
"""
from __future__ import annotations

import os
import sys
import time


from .common import (EXIT_INTERNAL, EXIT_INVALID, EXIT_OK, EXIT_USAGE, EXIT_XCHECK, Fail,
                     default_output, flagify, fri_options, prover_config)
from .program import segment_cycles_of
from ..cluster import ClusterProver
from ..common.errors import ClusterError, ConfigError, ProofSelfCheckFailure, UnprovableBlock
from ..common.timeline import Timeline

# prove's options that cluster mode does not take: (the option, whether it was given)
REFUSED = (("--precompile", lambda a: a.precompile),
           ("--execute-only", lambda a: getattr(a, "execute_only", False)),
           ("--json", lambda a: a.json),
           ("--stats-json", lambda a: a.stats_json is not None),
           ("--segment-cycles with --shard-tables (one STARK, its tables sharded)",
            lambda a: a.shard_tables and a.segment_cycles is not None))


def run_cli(args) -> int:
    """``prove --cluster [ADDRESS] BLOCK... [--shard-tables] [--workers N]`` (prover/cli/__init__.py
    parses; a :class:`prover.cli.common.Fail` ends the command).  Writes BLOCK.proof
    beside each block (``-o`` with one block), one progress line per block; the exit
    codes of ``prove``: 1 for a block that cannot be proven (naming it), 2 usage, 3 a
    cluster failure, 4 a self-check failure."""
    paths = list(args.block)
    address = args.cluster or None
    if address is not None and (os.path.exists(address) or address.lower().endswith((".json", ".elf"))):
        paths.insert(0, address)         # "--cluster BLOCK ...": no address, a local Ray
        address = None
    if not paths:
        raise Fail(EXIT_USAGE, "no block or program given (see --help)")
    refused = [flag for flag, given in REFUSED if given(args)]
    if refused:
        raise Fail(EXIT_USAGE, f"--cluster does not take {'; '.join(refused)} (docs/api.md "
                               f"'Command line')")
    if args.shard_tables and len(paths) != 1:
        raise Fail(EXIT_USAGE, f"--shard-tables proves one block or program, got {len(paths)}")
    if args.output and len(paths) != 1:
        raise Fail(EXIT_USAGE, "-o/--output needs exactly one block")
    blocks, programs = _read(args, paths)
    outs = [args.output] if args.output else [default_output(p) for p in paths]
    for out in outs:
        d = os.path.dirname(os.path.abspath(out))
        if not os.path.isdir(d):
            raise Fail(EXIT_USAGE, f"cannot write {out}: no directory {d}")
    seg = segment_cycles_of(args)           # validated before any work
    try:
        cfg = prover_config(args, **fri_options(args),
                            **({} if seg is None else {"segment_cycles": seg}))
    except ConfigError as exc:
        raise Fail(EXIT_USAGE, flagify(str(exc))) from None
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
        raise Fail(EXIT_USAGE, flagify(str(exc))) from None
    except ClusterError as exc:
        raise Fail(EXIT_INTERNAL, str(exc)) from None
    say(f"cluster: {workers} workers ({cp.gpus} GPUs), {len(paths)} "
        f"{'program' if programs else 'block'}(s)"
        + (", tables sharded" if args.shard_tables else ""))
    with cp:
        try:
            if programs:
                if args.shard_tables:
                    results = [(0, cp.prove_program_sharded(*programs[0]))]
                elif len(programs) == 1:
                    results = [(0, cp.prove_program_segmented(
                        *programs[0], segment_cycles=segment_cycles_of(args),
                        progress=_segment_lines(say, t0)))]
                else:
                    results = cp.prove_programs(programs)
            elif args.shard_tables:
                results = [(0, cp.prove_sharded(blocks[0]))]
            elif len(blocks) == 1:        # one block: in epochs across the workers if long
                results = [(0, cp.prove_block(blocks[0], progress=_part_lines(say, t0)))]
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
                segs = (f"; {c['segments']} segments, re-run "
                        + ", ".join(f"{k} {v}" for k, v in c["segment_retries"].items())
                        if c.get("mode") == "segments" else
                        f"; {c['parts']} parts, {c['segments']} segments"
                        if c.get("mode") == "block-epochs" else "")
                say(f"[{time.perf_counter() - t0:8.2f}s] {paths[i]}: wrote {outs[i]} "
                    f"({len(data):,} bytes; {proof.stats.cycles:,} cycles; "
                    f"{c.get('seconds', 0):.2f}s; retries {c.get('retries', 0)}{segs})")
                if args.verbose:
                    say("  cluster: " + ", ".join(f"{k} {v}" for k, v in c.items()
                                                  if not isinstance(v, (dict, list))))
        except UnprovableBlock as exc:
            i = getattr(exc, "cluster_piece", 0) if not args.shard_tables and len(paths) > 1 else 0
            what = "program" if programs else "block"
            name = paths[i] if isinstance(i, int) and 0 <= i < len(paths) else f"a {what}"
            lines = [f"{name}: {what} cannot be proven: {exc}"] + [f"  {d}" for d in exc.details]
            raise Fail(EXIT_INVALID, "\n".join(lines)) from None
        except ProofSelfCheckFailure as exc:
            raise Fail(EXIT_XCHECK, f"{exc}; no proof written") from None
        except ConfigError as exc:                # development mode with --shard-tables
            raise Fail(EXIT_USAGE, str(exc)) from None
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


def _part_lines(say, t0: float):
    """A line per proved part of a block in epochs."""
    def show(done: int, total: int, seconds: float, name: str) -> None:
        say(f"[{time.perf_counter() - t0:8.2f}s] part {done}/{total} proved: {name}")
    return show


def _segment_lines(say, t0: float):
    """The progress of a segmented proof: one line per proved segment, done / total and
    the time left at the average pace so far."""
    from .display import duration

    def show(done: int, total, cut: int, seconds: float) -> None:
        now = time.perf_counter() - t0
        of = f"{total:,}" if total is not None else f">={cut:,}"
        left = (f", ~{duration(now * (total - done) / done)} left"
                if total is not None and done else "")
        say(f"[{now:8.2f}s] segment {done:,}/{of} proved ({seconds:.2f}s){left}")
    return show


def _read(args, paths):
    """-> (blocks, program jobs): every path read and parsed (exit 2 naming a file that
    cannot be read or parsed, or a mix of blocks and programs)."""
    from ..programs.proof import ELF_MAGIC
    raws = []
    for path in paths:
        try:
            with open(path, "rb") as fh:
                raws.append(fh.read())
        except OSError as exc:
            raise Fail(EXIT_USAGE, f"cannot read {path}: {exc.strerror or exc}") from None
    elf = [r[:4] == ELF_MAGIC for r in raws]
    if any(elf) and not all(elf):
        raise Fail(EXIT_USAGE, "--cluster proves blocks or programs, not both in one command")
    if not any(elf):
        if args.input is not None or args.max_cycles is not None:
            raise Fail(EXIT_USAGE, "--input and --max-cycles apply to programs (ELF files)")
        from ...rv32.blockfile import BlockError, loads_block
        blocks = []
        for path, raw in zip(paths, raws):
            try:                            # relative paths from the block's folder
                blocks.append(loads_block(raw, os.path.dirname(os.path.abspath(path))))
            except BlockError as exc:
                raise Fail(EXIT_USAGE, f"{path}: {exc}") from None
        return blocks, []
    from ...rv32.elf import parse_elf
    from ...rv32.errors import ElfError
    from .program import max_cycles_of, read_input
    data, limit = read_input(args), max_cycles_of(args)
    jobs = []
    for path, raw in zip(paths, raws):
        try:
            jobs.append((parse_elf(raw), data, limit))
        except ElfError as exc:
            raise Fail(EXIT_USAGE, f"{path}: not a program the RV32IM machine runs: "
                                   f"{exc}") from None
    return [], jobs


__all__ = ["run_cli"]
