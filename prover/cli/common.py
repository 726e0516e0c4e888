"""What the command line's modules share -- ``prove`` for blocks (:mod:`prover.cli`) and
programs (:mod:`prover.cli.program`), ``prove --cluster`` (:mod:`prover.cli.cluster`) and
``verify`` (:mod:`prover.cli.verify`): the exit statuses, the failure that carries one out
and the one place it is turned into a message and a status (:func:`main`: never a
traceback), the parser whose help shows every default, warnings and the library's log
records on stderr, where a proof is written by default, the configuration the options
give, the checks of the outputs before any work and their all-or-nothing writing.
Imports nothing heavy: the command's start-up stays light.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile

DEFAULT_MIN_SECURITY_BITS = 100    # conjectured bits (docs/protocol.md section 7; = the library's)
FIRST_COMPILE = " (with the first compilation of the host kernels)"

# the exit statuses (docs/api.md "Exit status", ``--help``'s epilog)
EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_INTERNAL, EXIT_XCHECK, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130


class Fail(Exception):
    """Ends a command with exit status ``code`` and the one-line error ``message``."""

    def __init__(self, code: int, message: str):
        self.code = code
        super().__init__(message)


def default_output(path: str) -> str:
    """Where ``prove`` writes a proof without ``-o``: beside the block or program,
    ``.json`` / ``.elf`` replaced by ``.proof`` (any other name gets ``.proof`` added)."""
    root, ext = os.path.splitext(path)
    return (root if ext.lower() in (".json", ".elf") else path) + ".proof"


def prover_config(args, **fields):
    """The :class:`prover.engine.config.ProverConfig` of ``prove``'s parsed options (plus
    ``fields``): the ``--profile``'s parameter set (``default`` unless given), then the
    parameter options given (--log-blowup, --queries, --pow-bits; --fri-arity and
    --cap-height come in ``fields``) over it; a bad value is the library's
    :class:`prover.common.errors.ConfigError`."""
    from ..engine.config import ProverConfig
    given = {name: getattr(args, flag, None) for name, flag in
             (("log_blowup", "log_blowup"), ("num_queries", "queries"),
              ("pow_bits", "pow_bits"), ("slots", "slots"))}
    given = {k: v for k, v in given.items() if v is not None}
    return ProverConfig.for_profile(
        getattr(args, "profile", None) or "default", backend=args.backend,
        vram_budget=args.vram_budget, threads=args.threads, check=args.check,
        host_hold=getattr(args, "host_hold", None),
        **given, **fields, postmortem_dir=args.postmortem_dir,
        self_check=not args.no_self_check)


class Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """Defaults in every option's help: argparse's "(default: X)", or the help's own words
    where the default is not a value (None: the help says what happens)."""

    def _get_help_string(self, action):
        if action.default in (None, False) or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so every exit goes through one place;
    every option's help shows its default; ``--version``."""

    def __init__(self, **kw):
        super().__init__(formatter_class=Formatter, **kw)
        self.add_argument("--version", action="version", version=f"%(prog)s {version()}",
                          help="print the Steadfast version and exit")

    def error(self, message):
        raise Fail(EXIT_USAGE, f"{message} (see --help)")


def add_verbosity(ap: argparse.ArgumentParser) -> None:
    """``-q``/``--quiet`` and ``-v``/``--verbose``, one or the other (prove and verify)."""
    g = ap.add_mutually_exclusive_group()
    g.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    g.add_argument("-v", "--verbose", action="store_true", help="more detail")


def version() -> str:
    from steadfast import __version__
    return __version__


def err(msg: str) -> None:
    sys.stderr.write(f"error: {msg}\n")
    sys.stderr.flush()


QUIET = [False]                    # -q: errors only, no warnings


def warn(msg: str) -> None:
    if QUIET[0]:
        return
    sys.stderr.write(f"warning: {msg}\n")
    sys.stderr.flush()


# ProverConfig field (as ConfigError messages name it) -> the prove option that sets it
FLAG_OF = {"num_queries": "--queries", "log_blowup": "--log-blowup", "pow_bits": "--pow-bits",
            "log_cap": "--cap-height", "profile": "--profile",
            "threads": "--threads", "vram budget": "--vram-budget",
            "postmortem_dir": "--postmortem-dir", "slots": "--slots",
            "host_hold": "--host-hold"}


def flagify(message: str) -> str:
    """A ConfigError message in the command's words: field names become option names
    (``num_queries`` -> ``--queries``); a backend problem is prefixed ``--backend:``."""
    for name, flag in FLAG_OF.items():
        message = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w])", flag, message)
    if re.search(r"\bbackend '", message) and "--" not in message:
        message = f"--backend: {message}"
    return message


def fri_options(args) -> dict:
    """ProverConfig fields of --fri-arity / --cap-height (only those given)."""
    kw = {}
    if args.fri_arity is not None:
        a = args.fri_arity
        if a not in (2, 4, 8, 16):
            raise Fail(EXIT_USAGE, f"--fri-arity must be 2, 4, 8 or 16, got {a}")
        kw["log_fri_arity"] = a.bit_length() - 1
    if args.cap_height is not None:
        kw["log_cap"] = args.cap_height          # range: Params.validate -> ConfigError
    return kw


def write_all(files) -> None:
    """Write ``[(path, bytes), ...]`` all or nothing: every file goes to a temporary file
    beside its target first; only when all are written are they renamed into place
    (os.replace), so a failing output never leaves a half-written file or a proof without
    its statistics.  Failure: exit 2 naming the file."""
    tmps = []
    try:
        for path, data in files:
            d = os.path.dirname(os.path.abspath(path))
            try:
                fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{os.path.basename(path)}.",
                                           suffix=".tmp")
                tmps.append(tmp)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
            except OSError as exc:
                raise Fail(EXIT_USAGE, f"cannot write {path}: {exc.strerror or exc}; "
                                        "nothing was written") from None
        for (path, _), tmp in zip(files, tmps):
            os.replace(tmp, path)
        tmps = []
    finally:
        for tmp in tmps:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def check_outputs(args, out: str | None, inputs=None) -> None:
    """Before any work: every output's directory exists and is writable, and no output
    overwrites an input (``inputs``: ``[(what, path)]``, default the block).  Exit 2
    naming the option."""
    inputs = [("block", args.block)] if inputs is None else inputs
    protected = {os.path.realpath(p): what for what, p in inputs if p}
    paths = [("--output", out), ("--stats-json", args.stats_json), ("--timeline", args.timeline)]
    for flag, path in paths:
        if not path:
            continue
        what = protected.get(os.path.realpath(path))
        if what:
            raise Fail(EXIT_USAGE, f"{flag} {path} is the input {what}; refusing to overwrite it")
        if os.path.isdir(path):
            raise Fail(EXIT_USAGE, f"{flag} {path} is a directory")
        d = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(d):
            raise Fail(EXIT_USAGE, f"{flag} {path}: no directory {d}")
        if not os.access(d, os.W_OK | os.X_OK):
            raise Fail(EXIT_USAGE, f"{flag} {path}: directory {d} is not writable")
    pm = args.postmortem_dir        # created when a post-mortem is written: its parent must do
    if pm is not None:              # unset: the env / XDG default, created (or fallen back) later
        where = pm if os.path.exists(pm) else os.path.dirname(os.path.abspath(pm))
        if not os.path.isdir(where):
            raise Fail(EXIT_USAGE, f"--postmortem-dir {pm}: "
                       + ("not a directory" if where == pm else f"no directory {where}"))
        if not os.access(where, os.W_OK | os.X_OK):
            raise Fail(EXIT_USAGE, f"--postmortem-dir {pm}: directory {where} is not writable")
    outs = [os.path.realpath(p) for _, p in paths if p]
    if len(set(outs)) != len(outs):
        raise Fail(EXIT_USAGE, "--output, --stats-json and --timeline must be different files")


def device_name(backend: str) -> str:
    """The machine the proof ran on, in words (the stats' ``device``)."""
    if backend == "cuda":
        try:
            from numba import cuda
            name = cuda.get_current_device().name
            return name.decode() if isinstance(name, bytes) else str(name)
        except Exception as exc:        # the stats must not fail over a name
            return f"cuda (name unavailable: {type(exc).__name__})"
    cpu = ""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    if not cpu:
        import platform
        cpu = platform.processor() or platform.machine()
    return {"sim": f"numba CUDA simulator on {cpu}", "emu": f"device emulation on {cpu}"}.get(
        backend, cpu)


def host_kernels_cached() -> bool:
    """Whether numba's on-disk cache holds every host kernel a proof calls, as numba itself
    would look it up (:func:`prover.cli.compile_ahead.missing_kernels`: each kernel of
    ``prover/cli/compile_manifest.json`` under its signature, this machine's target and its
    bytecode, in the directory numba's cache locator chose -- ``NUMBA_CACHE_DIR``,
    ``__pycache__`` beside the source, or numba's user-wide cache).  False means this
    process compiles at least one first: a cold start (``prove`` says so and starts the
    compile-ahead helper); a second process in the same cache gets True."""
    from .compile_ahead import kernels_cached
    return kernels_cached()


def log_to_stderr(quiet: bool = False) -> None:
    """The library's warnings (development mode, diagnostics the host ignores) reach the
    terminal as ``warning: ...`` lines (one handler per process); -q keeps errors only."""
    import logging
    QUIET[0] = bool(quiet)
    lg = logging.getLogger("steadfast")
    for h in lg.handlers:
        if getattr(h, "_steadfast_cli", False):
            h.setLevel(logging.ERROR if quiet else logging.WARNING)
            return

    class _H(logging.StreamHandler):
        _steadfast_cli = True

        def emit(self, record):
            self.stream = sys.stderr        # the current stderr (tests capture it)
            super().emit(record)
    class _F(logging.Formatter):
        def format(self, record):
            return f"{record.levelname.lower()}: {record.getMessage()}"
    h = _H()
    h.setLevel(logging.ERROR if quiet else logging.WARNING)
    h.setFormatter(_F())
    lg.addHandler(h)


def skip_final_gc() -> None:
    """Just before a console command's process exits (``prove``/``verify`` run as
    commands, never a library caller): the interpreter's teardown would garbage-collect
    numba's and the proof's object graphs, a quarter of a second of a warm ``verify``'s
    second here; ``gc.freeze()`` leaves them to the process's end.  Everything else of a
    normal exit still happens: threads joined, atexit handlers (the compile-ahead helper
    stopped, logging flushed), stdout and stderr flushed."""
    import gc
    gc.disable()
    gc.freeze()


def main(run, argv) -> int:
    """Run a command's ``run(argv)`` -> its exit status; a :class:`Fail` is its one-line
    error, anything unexpected an internal error (exit 3), never a traceback."""
    try:
        from steadfast._numba_import import import_numba
        import_numba()                      # without its YAML reader where it reads nothing
        return run(sys.argv[1:] if argv is None else argv)
    except Fail as exc:
        err(str(exc))
        return exc.code
    except SystemExit as exc:               # --help / --version from argparse
        return int(exc.code or 0) if isinstance(exc.code, int) else EXIT_USAGE
    except BrokenPipeError:                 # the reader of our output went away (| head)
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return EXIT_OK
    except KeyboardInterrupt:
        err("interrupted")
        return EXIT_INTERRUPTED
    except MemoryError:
        err("out of memory")
        return EXIT_INTERNAL
    except BaseException as exc:            # never a traceback: a one-line internal error
        err(f"internal error: {type(exc).__name__}: {exc} (please report this)")
        return EXIT_INTERNAL


__all__ = ["EXIT_OK", "EXIT_INVALID", "EXIT_USAGE", "EXIT_INTERNAL", "EXIT_XCHECK",
           "EXIT_INTERRUPTED", "Fail", "default_output", "prover_config", "Parser",
           "Formatter", "version", "err", "warn", "flagify", "fri_options", "write_all",
           "check_outputs", "device_name", "host_kernels_cached", "log_to_stderr", "main",
           "skip_final_gc",
           "DEFAULT_MIN_SECURITY_BITS", "FIRST_COMPILE"]
