"""The library a VM node calls: prove blocks one after another in one long-lived process.

    from steadfast.prover.api import Prover, ProverConfig, verify
    prover = Prover(ProverConfig(num_queries=100))
    for block in blocks:                      # Block, dict, JSON text or a path
        proof = prover.prove_block(block)     # -> BlockProof (bytes via .to_bytes())
        print(proof.stats.summary())
    result = verify(proof, block=block, min_security_bits=100)  # VerificationError subclasses

* :class:`ProverConfig` -- backend, VRAM budget, protocol parameters, threads, check mode.
* :class:`Prover` -- reusable across blocks: ``prove_block(block)`` runs the VM, builds the
  five tables and proves them; ``prove_tables(tables, public_values, rom)`` proves traces a
  node built itself.  Both return a :class:`BlockProof` carrying a :class:`ProofStats`.
* :func:`verify` -- checks a :class:`BlockProof` (or its bytes) and, given the block, that
  the proof's public values are the block's; ``min_security_bits`` refuses proofs made
  with weak parameters (opt-in: None accepts the proof's own parameters).
* Errors: :class:`UnprovableBlock` (execution fails, claims are false, a trace violates a
  constraint), :class:`ConfigError` (bad configuration), and on the verifier side
  :class:`verifier.errors.VerificationError` and its subclasses.

Thread safety: a :class:`Prover` may be shared between threads; its proofs run one at a
time per process (a process-wide lock: the host kernels use numba's parallel pool, which
is not re-entrant), so concurrent calls queue.  :func:`verify` holds no shared state and
may run concurrently with anything.  A :class:`BlockProof` is immutable.
"""
from __future__ import annotations

import os
import struct
import logging
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, Union

import numpy as np

from steadfast.errors import SteadfastError
from steadfast.air import ConstraintViolation, LookupImbalance, check_constraints, check_traces
from steadfast.verifier import verify as _verify_proof
from steadfast.verifier.errors import PublicValuesError, ShapeError, VerificationError
from steadfast.verifier.proof_format import Params, decode
from steadfast.verifier.security import SecurityReport
from steadfast.verifier.verify import (DEFAULT_MIN_SECURITY_BITS, check_security,
                                       validate_min_security_bits)

from . import spans as _spans
from .prove import prove as _prove
from .timeline import Timeline

from steadfast.vm import isa
from steadfast.vm.airs import CPU_LAYOUT, SELECTORS, SLOTTED, TABLES, block_airs, slot_menu, \
    slots_from_widths, table_air
from steadfast.vm.block import MAX_CYCLES, MAX_LOG_CYCLES, Block, load_block, loads_block, parse_block
from steadfast.vm.interpreter import ExecutionError, claim_mismatches, execute
from steadfast.vm.rom import build_rom
from steadfast.vm.statement import (NUM_PUBLIC_VALUES, PV_FINAL, PV_MAX_CYCLES, PV_PROGRAMS,
                                    block_public_values, describe_mismatch, program_digest)
from steadfast.vm.traces import build_traces

#: What a block argument may be: a parsed Block, its JSON object as a dict, JSON text
#: (str starting with "{", or bytes), or a path to a JSON file.
BlockLike = Union[Block, dict, str, bytes, os.PathLike[str]]
#: ``progress(table, stage, event, seconds)``: table None for whole-proof stages,
#: event "start" or "end" (seconds 0.0 at the start).
ProgressCallback = Callable[[Union[str, None], str, str, float], None]

log = logging.getLogger("steadfast.prover")
_PROVE_LOCK = threading.Lock()      # one proof at a time per process (see module docstring)


def _available_backends() -> tuple:
    """host always; the device backends when the device pipeline is part of this build."""
    import importlib
    try:
        importlib.import_module(f"{__package__}.pipeline")
    except ImportError:         # pragma: no cover - builds without the device path
        return ("host",)
    return ("host", "emu", "sim", "cuda")


BACKENDS_AVAILABLE = _available_backends()
MAX_ROM_ROWS = 1 << 20


class ConfigError(SteadfastError, ValueError):
    """A configuration value the prover cannot use (the message says which and why;
    ``field`` names the :class:`ProverConfig` field when there is one)."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


class DevProofRefused(VerificationError):
    """A development-mode proof (``PROVER_DEV_MODE=1`` / ``ProverConfig(dev_mode=True)``)
    was offered to :func:`verify` without ``accept_dev=True``: it proves nothing."""


_FIELD_TYPES = {"log_blowup": int, "num_queries": int, "pow_bits": int, "logup_pow_bits": int,
                "deep_pow_bits": int, "commit_pow_bits": int, "log_fri_arity": int,
                "log_cap": int, "threads": (int, type(None)),
                "check": bool, "self_check": bool, "dev_mode": (bool, type(None)),
                "backend": str, "postmortem_dir": (str, os.PathLike),
                "vram_budget": (int, str, type(None))}


class ConfigTypeError(ConfigError, TypeError):
    """A :class:`ProverConfig` field of the wrong type: a :class:`ConfigError` that is also
    a :class:`TypeError` (``except TypeError`` catches it, as Python's own would)."""


def _check_types(cfg) -> None:
    """Every field of a :class:`ProverConfig` has its declared type (bool is not an int;
    a numpy integer is, and is stored as a Python int so the parameters stay plain)."""
    for name, want in _FIELD_TYPES.items():
        v = getattr(cfg, name)
        kinds = want if isinstance(want, tuple) else (want,)
        if int in kinds and isinstance(v, np.integer):
            v = int(v)
            object.__setattr__(cfg, name, v)        # frozen dataclass: normalise in place
        bad = isinstance(v, bool) and bool not in kinds
        if bad or not isinstance(v, kinds):
            names = " or ".join("None" if k is type(None) else k.__name__ for k in kinds)
            raise ConfigTypeError(f"{name} must be {names}, got {type(v).__name__} {v!r}", name)


class ProofSelfCheckFailure(SteadfastError, RuntimeError):
    """The finished proof did not verify (the prover's self-check), so it was not emitted:
    a device or prover fault, never the block's.  ``postmortem`` is the report's path,
    ``report`` its content (docs/diagnostics.md).  The CLI exits with status 4."""

    def __init__(self, message: str, postmortem: str | None, report: dict):
        super().__init__(message)
        self.postmortem = postmortem
        self.report = report


class UnprovableBlock(SteadfastError):
    """The block has no proof: execution fails, its claims are false, or its traces break
    a constraint.  ``reason`` is the one-line cause; ``constraint``/``table`` name the
    failing constraint when the trace check found it; ``details`` lists specifics."""

    def __init__(self, reason: str, table: str | None = None, constraint: str | None = None,
                 details: Sequence[str] = ()):
        self.reason = reason
        self.table = table
        self.constraint = constraint
        self.details = list(details)
        msg = reason
        if constraint:
            msg += f" (table {table!r}, constraint {constraint!r})"
        super().__init__(msg)


# --------------------------------------------------------------------------- configuration

@dataclass(frozen=True)
class ProverConfig:
    """How to prove.  ``backend``: host | cuda | sim | emu | auto (auto: cuda when usable,
    else host); the device backends run the device pipeline (:mod:`prover.pipeline`) and
    produce the same bytes.  ``vram_budget``: bytes or a size such as "6GiB" (device
    backends; default ``PROVER_VRAM_BUDGET``).  ``log_blowup``/``num_queries``/``pow_bits``: the
    protocol parameters (SPEC §5 defaults).  ``threads``: numba threads for host kernels
    (None: numba's default).  ``check``: run the AIR check mode on every table before
    proving (names table, constraint and row of any violation; off by default: it costs
    about a quarter of the proving time on large blocks -- false claims and execution
    failures are reported without it).  ``logup_pow_bits``/``deep_pow_bits``/
    ``commit_pow_bits``: grinding before the LogUp, DEEP and z / FRI-fold challenges
    (docs/protocol.md section 7).  ``log_fri_arity``: FRI folds by up to 2^log_fri_arity
    per layer (1..4); ``log_cap``: every Merkle commitment is a cap of up to 2^log_cap
    nodes (0..8) -- both trade proof size against prove time (docs/protocol.md section 7,
    proof format 3).  ``self_check``: verify every proof with the verifier's
    own code before returning it (on by default: a proof that fails is never returned --
    :class:`ProofSelfCheckFailure` and a post-mortem instead).  Turning it off saves a
    few percent of the proving time and removes the last guard against a device fault
    that XCHECK is not enabled to catch: a wrong proof could then leave the prover."""
    backend: str = "auto"
    vram_budget: int | str | None = None
    log_blowup: int = Params.log_blowup
    num_queries: int = Params.num_queries
    pow_bits: int = Params.pow_bits
    threads: int | None = None
    check: bool = False
    postmortem_dir: str | os.PathLike[str] = "."
    logup_pow_bits: int = Params.logup_pow_bits
    deep_pow_bits: int = Params.deep_pow_bits
    commit_pow_bits: int = Params.commit_pow_bits
    log_fri_arity: int = Params.log_fri_arity
    log_cap: int = Params.log_cap
    self_check: bool = True
    dev_mode: bool | None = None

    def __post_init__(self):
        _check_types(self)

    def dev(self) -> bool:
        """Development mode: this config's ``dev_mode``, else ``PROVER_DEV_MODE`` (0 or 1)."""
        if self.dev_mode is not None:
            return bool(self.dev_mode)
        raw = os.environ.get("PROVER_DEV_MODE", "")
        if raw not in ("", "0", "1"):
            raise ConfigError(f"PROVER_DEV_MODE must be 0 or 1, got {raw!r}")
        return raw == "1"

    def params(self) -> Params:
        return Params(log_blowup=self.log_blowup, num_queries=self.num_queries,
                      pow_bits=self.pow_bits, logup_pow_bits=self.logup_pow_bits,
                      deep_pow_bits=self.deep_pow_bits, commit_pow_bits=self.commit_pow_bits,
                      log_fri_arity=self.log_fri_arity, log_cap=self.log_cap)

    def resolve(self) -> tuple[str, int | None]:
        """Validate everything; return (backend, vram budget in bytes or None)."""
        from steadfast.kernels.backend import BACKEND_NAMES, BackendError, parse_bytes, resolve_backend
        name = str(self.backend).strip().lower()
        if name not in BACKEND_NAMES + ("auto",):
            raise ConfigError(f"unknown backend {self.backend!r}; choose one of "
                              f"{', '.join(BACKEND_NAMES + ('auto',))}")
        if name not in BACKENDS_AVAILABLE + ("auto",):
            raise ConfigError(f"backend {name!r} is not available in this build; use "
                              f"{' or '.join(BACKENDS_AVAILABLE)}")
        try:
            name = resolve_backend(name)    # auto -> cuda if usable else host; checks cuda/sim
        except BackendError as exc:
            raise ConfigError(str(exc)) from None
        if name == "sim":
            _use_simulator()
        if name not in BACKENDS_AVAILABLE:  # pragma: no cover - auto found a GPU, no pipeline
            name = "host"
        budget = None
        if self.vram_budget is not None:
            try:
                budget = parse_bytes(self.vram_budget)
            except ValueError as exc:
                raise ConfigError(f"vram budget: {exc}") from None
        if self.threads is not None:
            import numba
            most = numba.config.NUMBA_NUM_THREADS  # type: ignore[attr-defined]  # set at import
            if not isinstance(self.threads, int) or not 1 <= self.threads <= most:
                raise ConfigError(f"threads must be in [1, {most}], "
                                  f"got {self.threads!r}")
        try:
            self.params().validate()
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        return name, budget


_DEVICE_SWITCHES = ("PROVER_GPU_XCHECK", "PROVER_GPU_SERIALIZE_R2", "PROVER_GPU_FORCE_DOWNGRADE",
                    "PROVER_GPU_STREAMS", "PROVER_FAULTS", "PROVER_ARENA_POISON")
_WARNED: set = set()


def _host_diagnostics(timeline: bool) -> None:
    """On the host backend the device diagnostics do nothing: refuse malformed values the
    way a device backend does (:class:`ConfigError`), and warn once per process that the
    ones set apply to device backends only."""
    from .pipeline import PipelineConfig
    try:
        PipelineConfig.from_env("emu")       # the same parsing a device backend does
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    raw = os.environ.get("PROVER_GPU_STREAMS")
    if raw not in (None, "", "0", "1"):
        raise ConfigError(f"PROVER_GPU_STREAMS must be 0 or 1, got {raw!r}")
    unused = [n for n in _DEVICE_SWITCHES if os.environ.get(n)]
    unused += [k for k in sorted(os.environ) if k.startswith("PROVER_GPU_") and k not in unused
               and os.environ[k]]
    if timeline:
        unused.append("the timeline")
    key = tuple(unused)
    if unused and key not in _WARNED:
        _WARNED.add(key)
        log.warning("%s: device-backend diagnostics (cuda, sim, emu); the host backend "
                    "ignores %s", ", ".join(unused), "it" if len(unused) == 1 else "them")


def _use_simulator() -> None:
    """Backend ``sim``: numba reads NUMBA_ENABLE_CUDASIM into ``numba.core.config`` when
    numba itself is imported (steadfast's host kernels import it long before a backend is
    chosen), and numba.cuda picks the simulator or the driver from that config on its first
    import.  ``resolve_backend('sim')`` has set the variable; re-read numba's config so
    numba.cuda, imported later, is the simulator.  Too late once numba.cuda is the driver."""
    import sys
    if "numba" not in sys.modules:
        return                      # numba will read the variable itself
    from numba.core import config as numba_config
    if numba_config.ENABLE_CUDASIM:  # type: ignore[attr-defined]  # numba sets it at import
        return
    if "numba.cuda" in sys.modules and "numba.cuda.simulator_init" not in sys.modules:
        raise ConfigError("backend 'sim' must be chosen before numba.cuda is imported "
                          "(set PROVER_BACKEND=sim or NUMBA_ENABLE_CUDASIM=1 at start-up)",
                          "backend")
    numba_config.reload_config()


# --------------------------------------------------------------------------- statistics

@dataclass(frozen=True)
class TableStats:
    """One table of a proof: its shape and the seconds each round spent on it."""
    name: str
    rows: int
    main_width: int
    aux_width: int                   # EF columns (LogUp)
    parts: int
    seconds: dict[str, float]        # round -> seconds

    @property
    def total(self) -> float:
        return sum(self.seconds.values())


@dataclass
class ProofStats(_spans.ProofStats):
    """The record of one proof: the raw spans (``records``, ``counters`` -- device work adds
    its counters there: retries, downgrades, bytes moved), plus per-phase and per-table
    figures.  ``phases``: execute / traces / check / prove / total seconds.
    ``lock_wait_s``: seconds this proof waited for the process lock while another proof
    ran (in ``phases["total"]``, never in ``phases["prove"]``)."""
    backend: str = "host"
    cycles: int = 0
    tables: list[TableStats] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    proof_bytes: int = 0
    peak_rss_bytes: int = 0
    lock_wait_s: float = 0.0         # waiting for the process lock (another proof ran)

    def rounds(self) -> dict[str, float]:
        """Wall seconds per protocol round (a round's whole-proof span when there is one,
        else the sum over tables)."""
        out: dict[str, float] = {}
        for name in self.names():
            if name == "table":
                continue
            whole = [s for n, t, s in self.records if n == name and t is None]
            out[name] = sum(whole) if whole else self.total(name)
        return out

    def to_json(self) -> dict[str, Any]:
        return {"backend": self.backend, "cycles": self.cycles, "proof_bytes": self.proof_bytes,
                "peak_rss_bytes": self.peak_rss_bytes, "phases": dict(self.phases),
                "lock_wait_s": self.lock_wait_s,
                "rounds": self.rounds(), "counters": dict(self.counters),
                "tables": [{"name": t.name, "rows": t.rows, "main_width": t.main_width,
                            "aux_width": t.aux_width, "parts": t.parts, "seconds": dict(t.seconds)}
                           for t in self.tables]}

    def summary(self) -> str:
        """A few lines for humans: tables, time per round, size, throughput."""
        lines = [f"{'table':<10} {'rows':>9} {'cols':>5} {'parts':>5} {'seconds':>8}"]
        for t in self.tables:
            lines.append(f"{t.name:<10} {t.rows:>9} {t.main_width:>5} {t.parts:>5} {t.total:>8.2f}")
        r = self.rounds()
        lines.append("rounds: " + ", ".join(f"{k} {v:.2f}s" for k, v in r.items()))
        total = self.phases.get("total", 0.0)
        rate = f", {self.cycles / total:,.0f} cycles/s" if total and self.cycles else ""
        lines.append(f"protocol proof {self.proof_bytes:,} bytes; {total:.2f}s total{rate}; "
                     f"backend {self.backend}")
        return "\n".join(lines)


class ProofAborted(SteadfastError):
    """The proof was stopped -- ``reason`` "cancelled" (the caller's ``cancel`` event was
    set) or "timeout" (``timeout`` seconds passed) -- at the next stage boundary or while
    waiting for the process lock.  No proof is returned; the prover stays usable."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


class _Abort:
    """A call's deadline and cancel event, checked at every protocol stage boundary."""

    def __init__(self, timeout: float | None, cancel, t0: float):
        if timeout is not None and (isinstance(timeout, bool)
                                    or not isinstance(timeout, (int, float)) or timeout <= 0):
            raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}",
                              "timeout")
        if cancel is not None and not callable(getattr(cancel, "is_set", None)):
            raise ConfigError("cancel must be a threading.Event (or have is_set())", "cancel")
        self.deadline = None if timeout is None else t0 + timeout
        self.timeout = timeout
        self.cancel = cancel

    def remaining(self) -> float:
        return -1 if self.deadline is None else self.deadline - time.perf_counter()

    def check(self, stage: str = "", table: str | None = None) -> None:
        where = f" before {stage}" + (f" of table {table}" if table else "") if stage else ""
        if self.cancel is not None and self.cancel.is_set():
            raise ProofAborted(f"proof cancelled{where}", "cancelled")
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            raise ProofAborted(f"proof ran past its timeout of {self.timeout}s{where}", "timeout")


_CALL = threading.local()           # the running prove_block call's _Abort, per thread


@contextmanager
def _locked(abort: "_Abort | None"):
    """The process lock; with a deadline or a cancel event, waited for in slices so that
    either stops the wait (:class:`ProofAborted`)."""
    if abort is None or (abort.deadline is None and abort.cancel is None):
        with _PROVE_LOCK:
            yield
        return
    while True:
        abort.check("waiting for the process lock")
        left = abort.remaining()
        if _PROVE_LOCK.acquire(timeout=0.05 if left < 0 else max(0.0, min(0.05, left))):
            break
    try:
        yield
    finally:
        _PROVE_LOCK.release()


class _ProgressSpans(_spans.Spans):
    """Spans that also report each stage's start and end to a callback
    ``progress(table, stage, event, seconds)`` (event "start" or "end"), and check a call's
    :class:`_Abort` as each stage starts."""

    def __init__(self, progress, abort: "_Abort | None" = None):
        super().__init__()
        self._progress = progress
        self._abort = abort

    def span(self, name: str, table: str | None = None):
        if self._abort is not None:
            self._abort.check(name, table)
        inner = super().span(name, table)
        progress = self._progress
        if progress is None:
            return inner

        class _Ctx:
            def __enter__(self_):
                self_.t0 = time.perf_counter()
                progress(table, name, "start", 0.0)
                return inner.__enter__()

            def __exit__(self_, *exc):
                r = inner.__exit__(*exc)
                progress(table, name, "end", time.perf_counter() - self_.t0)
                return r
        return _Ctx()


# --------------------------------------------------------------------------- proofs

_MAGIC = b"STBP"
_VERSION = 1
# Development mode (PROVER_DEV_MODE=1): same layout, another magic, and in place of the
# STARK this notice followed by the 42 public values as u32 -- nothing is proven.
DEV_MAGIC = b"STDV"
DEV_NOTICE = (b"STEADFAST DEVELOPMENT-MODE PROOF: execution and constraint check only; "
              b"NOT A STARK, PROVES NOTHING\n")


@dataclass(frozen=True, eq=False)
class BlockProof:
    """A block proof: the ROM (the statement's program, needed to rebuild the PROGRAM
    table's AIR) and the protocol proof (public values inside).  File layout, all
    little-endian: b"STBP", u16 version, u16 0, u32 ROM rows, u32[rows*4] ROM,
    u32 length, the protocol proof bytes (docs/api.md)."""
    rom: np.ndarray
    proof: bytes
    stats: ProofStats | None = field(default=None, compare=False, repr=False)
    dev: bool = False               # a development-mode fake (b"STDV"): proves nothing

    def __eq__(self, other) -> bool:
        return (isinstance(other, BlockProof) and self.proof == other.proof
                and self.dev == other.dev and np.array_equal(self.rom, other.rom))

    __hash__ = None  # type: ignore[assignment]

    @property
    def public_values(self) -> list[int]:
        """The 42 block public values (the CPU table's; vm/statement.py)."""
        if self.dev:
            return [int(v) for v in np.frombuffer(self.proof, "<u4", offset=len(DEV_NOTICE))]
        return [int(v) for v in decode(self.proof).tables[0].public_values]

    @property
    def final_digest(self) -> list[int]:
        return self.public_values[PV_FINAL]

    def to_bytes(self) -> bytes:
        rom = np.ascontiguousarray(self.rom, dtype="<u4")
        magic = DEV_MAGIC if self.dev else _MAGIC
        return b"".join([magic, struct.pack("<HHI", _VERSION, 0, rom.shape[0]), rom.tobytes(),
                         struct.pack("<I", len(self.proof)), self.proof])

    @classmethod
    def from_bytes(cls, data: bytes) -> "BlockProof":
        """Parse; any malformation is a :class:`verifier.errors.ShapeError`."""
        data = bytes(data)
        if len(data) < 12 or data[:4] not in (_MAGIC, DEV_MAGIC):
            raise ShapeError("not a Steadfast block proof (bad magic)")
        dev = data[:4] == DEV_MAGIC
        version, reserved, rows = struct.unpack_from("<HHI", data, 4)
        if version != _VERSION or reserved:
            raise ShapeError(f"unsupported block-proof version {version}")
        if not 1 <= rows <= MAX_ROM_ROWS:
            raise ShapeError(f"ROM of {rows} rows (limit {MAX_ROM_ROWS})")
        end = 12 + 16 * rows
        if len(data) < end + 4:
            raise ShapeError("truncated block proof (ROM)")
        rom = np.frombuffer(data, dtype="<u4", count=rows * 4, offset=12).reshape(rows, 4)
        if np.any(rom >= isa.P) or np.any(rom[:, 0] >= isa.NUM_OPCODES):
            raise ShapeError("ROM holds values that are not field elements / opcodes")
        (n,) = struct.unpack_from("<I", data, end)
        if len(data) != end + 4 + n:
            raise ShapeError(f"block proof length {len(data)} does not match its header")
        body = data[end + 4:]
        if dev and (len(body) != len(DEV_NOTICE) + 4 * NUM_PUBLIC_VALUES
                    or not body.startswith(DEV_NOTICE)):
            raise ShapeError("malformed development-mode proof")
        return cls(rom.astype(np.int64), body, dev=dev)

    def save(self, path: str | os.PathLike) -> None:
        with open(path, "wb") as fh:
            fh.write(self.to_bytes())

    @classmethod
    def load(cls, path: str | os.PathLike) -> "BlockProof":
        with open(path, "rb") as fh:
            return cls.from_bytes(fh.read())


def _as_block(block: BlockLike) -> Block:
    if isinstance(block, Block):
        return block
    if isinstance(block, dict):
        return parse_block(block)
    if isinstance(block, (str, bytes)) and (isinstance(block, bytes) or block.lstrip().startswith("{")):
        return loads_block(block)
    if isinstance(block, (str, os.PathLike)):
        return load_block(block)
    raise TypeError(f"a block is a Block, a dict, JSON text or a path, not {type(block).__name__}")


def _release_memory() -> None:
    """Between proofs: collect garbage and hand freed heap pages back to the OS (glibc's
    malloc_trim), so that a long-lived node's RSS reflects what it still holds rather than
    the high-water mark of the last proof's buffers."""
    import gc
    gc.collect()
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):   # not glibc: nothing to trim
        pass


def _rss_bytes() -> int:
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# --------------------------------------------------------------------------- execute only

@dataclass(frozen=True)
class TableEstimate:
    """One table of a proof that has not been made: its height and what committing it costs.
    ``rows``: rows the execution fills; ``padded_rows``: the committed height (a power of
    two, or the table's fixed height); ``committed_cells``: padded_rows * 2^log_blowup *
    (main_width + 4 * aux_width + 4 * parts) -- base-field cells on the LDE domain;
    ``device_bytes``: the device pipeline's estimate of the table's peak residency
    (:func:`prover.pipeline.estimate_bytes`, the figure admission uses)."""
    name: str
    rows: int
    padded_rows: int
    main_width: int
    aux_width: int                   # EF columns (LogUp)
    parts: int
    committed_cells: int
    device_bytes: int


@dataclass(frozen=True)
class ExecutionReport:
    """What :meth:`Prover.execute` finds without proving: the cycles, every table's height
    and commitment size, the memory a proof would need and whether the block's claimed
    outputs are what execution writes.

    ``host_bytes``: the tables' buffers a host proof holds at once (every table's LDEs,
    trees, quotient and first FRI layers: the sum of ``device_bytes``, plus the traces),
    on top of the process's own footprint; ``device_bytes``: the device bytes to hold
    every table at once (no spilling); ``device_bytes_min``: the largest single table, the
    smallest budget under which no table runs oversize.  Estimates from the shapes, not
    measurements.  ``security_bits``: the conjectured security the configured parameters
    give these shapes (docs/protocol.md section 7)."""
    cycles: int
    tables: tuple[TableEstimate, ...]
    claims_ok: bool
    mismatches: tuple[str, ...]
    final_digest: tuple[int, ...]
    log_blowup: int
    committed_cells: int
    host_bytes: int
    device_bytes: int
    device_bytes_min: int
    security_bits: int
    seconds: float

    def to_json(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("cycles", "claims_ok", "log_blowup",
                                           "committed_cells", "host_bytes", "device_bytes",
                                           "device_bytes_min", "security_bits", "seconds")}
        d["mismatches"] = list(self.mismatches)
        d["final_digest"] = digest_hex(self.final_digest)
        d["tables"] = [dict(vars(t)) for t in self.tables]
        return d

    def summary(self) -> str:
        """A few lines for humans."""
        lines = [f"{self.cycles:,} cycles; claimed outputs "
                 + ("match execution" if self.claims_ok else
                    "DO NOT match execution: " + ", ".join(self.mismatches)),
                 f"{'table':<10} {'rows':>9} {'padded':>9} {'cols':>5} {'aux':>4} "
                 f"{'parts':>5} {'committed cells':>16} {'device MiB':>10}"]
        for t in self.tables:
            lines.append(f"{t.name:<10} {t.rows:>9,} {t.padded_rows:>9,} {t.main_width:>5} "
                         f"{t.aux_width:>4} {t.parts:>5} {t.committed_cells:>16,} "
                         f"{t.device_bytes / 2**20:>10.1f}")
        lines.append(f"committed cells {self.committed_cells:,} (log_blowup {self.log_blowup}); "
                     f"host ~{self.host_bytes / 2**20:,.0f} MiB for the tables; device "
                     f"~{self.device_bytes / 2**20:,.0f} MiB all tables resident, "
                     f"~{self.device_bytes_min / 2**20:,.0f} MiB the largest alone")
        lines.append(f"final state digest {digest_hex(self.final_digest)}; parameters give "
                     f"{self.security_bits} conjectured security bits; {self.seconds:.2f}s")
        return "\n".join(lines)


def digest_hex(words: Sequence[int] | np.ndarray) -> str:
    """The one digest notation of the CLI, the stats and the reports: the 8 u32 words of a
    state digest, each as 8 lowercase hex digits, in order (word 0 first)."""
    return "".join(f"{int(x):08x}" for x in words)


class Prover:
    """Proves blocks, one after another, with one configuration.

    ``progress(table, stage, event, seconds)`` is called as protocol stages start and end
    (``table`` is None for whole-proof stages).  Construction validates the configuration
    (:class:`ConfigError`) and builds the block-independent AIRs once."""

    def __init__(self, config: ProverConfig | None = None,
                 progress: ProgressCallback | None = None,
                 timeline: Timeline | None = None) -> None:
        self.config = config or ProverConfig()
        self.backend, self.vram_budget = self.config.resolve()
        self.dev_mode = self.config.dev()
        if self.dev_mode:
            log.warning("DEVELOPMENT MODE (PROVER_DEV_MODE / dev_mode=True): proofs are fakes "
                        "-- execution and constraint check only, no STARK; verify refuses "
                        "them unless told accept_dev=True")
        self.progress = progress
        self.timeline = timeline        # a prover.timeline.Timeline, or None
        self.self_check_failures = 0    # proofs this prover refused to emit (self-check)
        if self.backend != "host":
            self._device_config()            # the env switches, validated up front
        else:
            _host_diagnostics(timeline is not None)
        # build and cache the static AIRs (of this configuration's log_blowup)
        block_airs(np.zeros((2, 4), dtype=np.int64), log_blowup=self.config.params().log_blowup)

    def _device_config(self):
        """The device pipeline's configuration: this config plus the SPEC §7 switches."""
        from .pipeline import PipelineConfig
        try:
            return PipelineConfig.from_env(self.backend, budget=self.vram_budget,
                                           timeline=self.timeline,
                                           postmortem_dir=self.config.postmortem_dir,
                                           precheck=bool(self.config.self_check))
        except ValueError as exc:           # a bad PROVER_* switch or PROVER_FAULTS term
            raise ConfigError(str(exc)) from None

    # -- public API ----------------------------------------------------------------
    def prove_block(self, block: BlockLike, *, timeout: float | None = None,
                    cancel: threading.Event | None = None) -> BlockProof:
        """Execute and prove ``block`` (see :meth:`_prove_block`).  ``timeout`` (seconds)
        and ``cancel`` (a :class:`threading.Event` another thread may set) stop the proof
        with :class:`ProofAborted` at the next protocol stage boundary, or while it waits
        for the process lock; stages are short (a fraction of the proof), so the stop is
        prompt, not instantaneous."""
        abort = None
        if timeout is not None or cancel is not None:
            abort = _Abort(timeout, cancel, time.perf_counter())
        _CALL.abort = abort
        try:
            return self._prove_block(block)
        finally:
            _CALL.abort = None

    def _prove_block(self, block: BlockLike) -> BlockProof:
        """Execute ``block`` (a :class:`vm.block.Block`, dict, JSON text or path) and prove
        it.  Raises :class:`vm.block.BlockError` for a malformed block and
        :class:`UnprovableBlock` when it cannot be proven.  In development mode
        (:attr:`dev_mode`) the result is a marked fake (``dev=True``), see :meth:`_dev_proof`."""
        t0 = time.perf_counter()
        if self.dev_mode:
            return self._dev_proof(block, t0)
        phases: dict = {}
        rec, bt = self._build(block, phases)
        return self._prove(bt.airs, bt.traces, bt.table_public_values, rec.rom.rows,
                           rec.cycles, phases, t0)

    def _build(self, block, phases: dict):
        """Execute ``block`` and build its tables -> (execution record, block traces);
        :class:`UnprovableBlock` when execution fails or the claims are false (shared with
        the cluster mode, :mod:`prover.cluster`, which proves the tables elsewhere)."""
        block = _as_block(block)
        with self._phase("execute", phases):
            try:
                rec = execute(block)
            except ExecutionError as exc:
                raise UnprovableBlock(f"execution failed: {exc}") from None
        with self._phase("traces", phases):
            bt = build_traces(rec, log_blowup=self.config.params().log_blowup)
        wrong = claim_mismatches(rec)
        if wrong:
            # name the constraint that the false claim breaks (the trace check would)
            try:
                check_constraints(bt.airs[0], bt.traces[0], bt.table_public_values[0])
                table = constraint = None
            except ConstraintViolation as exc:
                table, constraint = exc.table, exc.constraint
            raise UnprovableBlock("the claimed outputs are not what execution writes",
                                  table, constraint, wrong)
        return rec, bt

    def _check_tables(self, airs, tables, table_pv, phases: dict) -> None:
        """The AIR check mode on every table (phase ``check``): a violation is an
        :class:`UnprovableBlock` naming table, constraint and row."""
        with self._phase("check", phases):
            try:
                check_traces(airs, tables, table_pv)
            except ConstraintViolation as exc:
                raise UnprovableBlock(f"trace check failed: {exc}", exc.table,
                                      exc.constraint) from None
            except LookupImbalance as exc:
                raise UnprovableBlock(f"trace check failed: {exc}") from None

    def prove_tables(self, tables: Sequence[np.ndarray], public_values: Sequence[int],
                     rom: np.ndarray) -> BlockProof:
        """Prove traces built by the caller: ``tables`` = (CPU, PROGRAM, MEMORY, RANGE,
        POSEIDON2) main traces (uint32[n, w]) in that order, ``public_values`` the 42 block
        values (vm/statement.py), ``rom`` the int[rows, 4] ROM (opcode, a, b, c).  A
        slotted table's k (vm/airs.py SLOTTED: POSEIDON2 packs k permutations per row) is
        read off its width, which must be that of a k in its menu (ValueError otherwise)."""
        t0 = time.perf_counter()
        tables = list(tables)
        if len(tables) != len(TABLES):
            raise ValueError(f"expected {len(TABLES)} tables ({', '.join(TABLES)}), got {len(tables)}")
        pv = [int(v) for v in public_values]
        if len(pv) != NUM_PUBLIC_VALUES:
            raise ValueError(f"expected {NUM_PUBLIC_VALUES} public values, got {len(pv)}")
        rom = np.asarray(rom)
        if rom.ndim != 2 or rom.shape[1] != 4 or rom.shape[0] < 1:
            raise ValueError(f"rom must have shape (rows, 4), got {rom.shape}")
        shapes = [np.shape(t) for t in tables]
        bad = [name for name, sh in zip(TABLES, shapes) if len(sh) != 2]
        if bad:
            raise ValueError(f"table {bad[0]} is not a 2-d trace (uint32[n, w])")
        airs = block_airs(rom.astype(np.int64), slots_from_widths([sh[1] for sh in shapes]),
                          self.config.params().log_blowup)
        table_pv = [pv, [], [pv[0]], [], []]
        sel = [CPU_LAYOUT.idx[f"is_{n.lower()}"] for n in SELECTORS]
        cycles = int(np.count_nonzero(np.asarray(tables[0])[:, sel].sum(axis=1)))
        return self._prove(airs, tables, table_pv, rom.astype(np.int64), cycles, {}, t0)

    def execute(self, block: BlockLike) -> ExecutionReport:
        """Run the VM on ``block`` and size its proof without proving it: cycles, every
        table's rows, padded height and committed cells, the host and device bytes a proof
        would need, the conjectured security of this configuration for those heights, and
        whether the claimed outputs are what execution writes (``claims_ok``; a false
        claim is reported, not raised).  :class:`UnprovableBlock` when execution fails or
        a table is taller than the protocol supports; :class:`vm.block.BlockError` for a
        malformed block."""
        from steadfast.verifier.protocol import table_shape
        from steadfast.verifier.security import proof_security
        from steadfast.vm.traces import memory_accesses
        from .pipeline import estimate_bytes
        t0 = time.perf_counter()
        block = _as_block(block)
        try:
            rec = execute(block)
        except ExecutionError as exc:
            raise UnprovableBlock(f"execution failed: {exc}") from None
        wrong = claim_mismatches(rec)
        params = self.config.params()
        bt = build_traces(rec, log_blowup=params.log_blowup)
        used = {"cpu": rec.cycles, "program": int(rec.rom.rows.shape[0]),
                "memory": int(memory_accesses(bt.traces[0]).shape[0]),
                "poseidon2": int(rec.hash_in.shape[0])}
        for name, k in bt.slots.items():       # a slotted table fills ceil(items / k) rows
            used[name] = -(-used[name] // k)
        rows, log_ns = [], []
        for air, t in zip(bt.airs, bt.traces):
            n = int(t.shape[0])
            log_n = n.bit_length() - 1
            try:
                shape = table_shape(air, log_n, params)
            except ValueError as exc:
                raise UnprovableBlock(f"cannot be proven with these parameters: {exc}") from None
            cells = (n << params.log_blowup) * (air.main_width + 4 * air.aux_width
                                                + 4 * air.num_parts)
            rows.append(TableEstimate(air.name, used.get(air.name, n), n, air.main_width,
                                      air.aux_width, air.num_parts, cells,
                                      estimate_bytes(shape)))
            log_ns.append(log_n)
        sec = proof_security(params, bt.airs, log_ns)
        dev = [r.device_bytes for r in rows]
        return ExecutionReport(
            cycles=int(rec.cycles), tables=tuple(rows), claims_ok=not wrong,
            mismatches=tuple(wrong), final_digest=tuple(int(x) for x in rec.final_digest),
            log_blowup=params.log_blowup, committed_cells=sum(r.committed_cells for r in rows),
            host_bytes=sum(dev) + sum(int(t.nbytes) for t in bt.traces),
            device_bytes=sum(dev), device_bytes_min=max(dev), security_bits=int(sec.bits),
            seconds=time.perf_counter() - t0)

    def _dev_proof(self, block, t0: float) -> BlockProof:
        """Development mode: execute, build the tables, check the claims and every
        constraint and bus (the AIR check mode), and return a :class:`BlockProof` marked
        ``dev`` that carries the ROM and the public values -- and no STARK."""
        phases: dict = {}
        rec, bt = self._build(block, phases)
        with _PROVE_LOCK:
            self._check_tables(bt.airs, bt.traces, bt.table_public_values, phases)
        body = DEV_NOTICE + np.asarray(bt.public_values, dtype="<u4").tobytes()
        phases["total"] = time.perf_counter() - t0
        stats = ProofStats(counters={"dev_mode": True}, backend=self.backend,
                           cycles=int(rec.cycles), phases=phases, proof_bytes=len(body),
                           peak_rss_bytes=_rss_bytes())
        return BlockProof(np.asarray(rec.rom.rows, dtype=np.int64), body, stats, dev=True)

    def precompile(self, block: BlockLike | None = None,
                   progress: Callable[[dict], None] | None = None) -> list[dict]:
        """Compile the device kernels ``block`` needs (its five AIRs' generated kernels and
        the stage kernels) for this prover's backend ahead of proving, through the on-disk
        kernel cache (``PROVER_KERNEL_CACHE``, :mod:`kernels.kernel_cache`): a later process
        starts warm.  ``block``: as for :meth:`prove_block` (with the slots its traces
        would get); None: the block-independent AIRs at every k of their slot menus and an
        empty ROM (the PROGRAM kernel does not depend on the ROM's values).
        -> one dict per step (name, seconds, how: generated | cache | compiled | in memory);
        ``sim`` generates the sources only (the simulator compiles nothing); ``host`` and
        ``emu`` run host kernels, which numba caches itself: nothing to do, []."""
        if self.backend not in ("cuda", "sim"):
            return []
        from steadfast.vm.traces import block_slots
        lb = self.config.params().log_blowup        # the AIRs' LogUp degree depends on it
        if block is None:       # every slotted table at every k of its menu
            airs = block_airs(np.zeros((1, 4), dtype=np.int64), log_blowup=lb)
            airs += [table_air(name, k, lb) for name in SLOTTED for k in slot_menu(name) if k != 1]
        else:
            try:
                rec = execute(_as_block(block))
            except ExecutionError as exc:
                raise UnprovableBlock(f"execution failed: {exc}") from None
            airs = block_airs(rec.rom.rows, block_slots(rec, log_blowup=lb), lb)
        from steadfast.kernels.constraint_device import precompile
        return precompile(airs, compile=self.backend == "cuda", progress=progress)

    # -- the proof itself -----------------------------------------------------------
    def _self_check(self, proof: bytes, airs, table_pv, device_stats) -> int:
        """Verify ``proof`` with the verifier (its own code: parsing, transcript, every
        check); on failure write a post-mortem and raise :class:`ProofSelfCheckFailure`.
        On device backends the per-table checks already ran as each table finished,
        overlapped with the other tables' device work (pipeline ``precheck``); the
        verifier skips a table only when its recomputed check key -- fork state, AIR,
        section bytes, parameters, challenges -- matches one of those passes.  Returns
        the number of tables so skipped.
        No security minimum here: the parameters are the caller's choice (``prove`` warns
        about weak ones); this checks that the bytes are a valid proof of the statement."""
        keys = device_stats[0].precheck_keys if device_stats else ()
        try:
            res = _verify_proof(proof, airs, table_pv, min_security_bits=0, verified_tables=keys)
            return res.tables_prechecked
        except VerificationError as exc:
            err = exc
        self.self_check_failures += 1
        from .xcheck import write_postmortem
        report = {"table": err.table or "block", "check": "self_check",
                  "backend": self.backend, "error": type(err).__name__, "message": str(err),
                  "faults": os.environ.get("PROVER_FAULTS", ""),
                  "xcheck": os.environ.get("PROVER_GPU_XCHECK", ""),
                  "params": dict(vars(self.config.params())), "proof_bytes": len(proof),
                  "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        if device_stats:
            report["device"] = device_stats[0].as_dict()
        path = write_postmortem(report, os.fspath(self.config.postmortem_dir))
        log.error("self-check: the proof does not verify (%s: %s); not emitted; post-mortem %s",
                  type(err).__name__, err, path)
        raise ProofSelfCheckFailure(f"self-check: the finished proof does not verify "
                                    f"({type(err).__name__}: {err}); no proof emitted; "
                                    f"post-mortem {path}", path, report)

    def _refuse_device_result(self, err) -> None:
        """The self-check's refusal of a proof the device pipeline could not finish
        because one of its results failed the prover's own check
        (:class:`prover.device_stages.DeviceResultError`): post-mortem, then
        :class:`ProofSelfCheckFailure`."""
        self.self_check_failures += 1
        from .xcheck import write_postmortem
        report = {"table": "join", "check": "self_check", "backend": self.backend,
                  "error": type(err).__name__, "message": str(err),
                  "faults": os.environ.get("PROVER_FAULTS", ""),
                  "xcheck": os.environ.get("PROVER_GPU_XCHECK", ""),
                  "params": dict(vars(self.config.params())),
                  "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        path = write_postmortem(report, self.config.postmortem_dir)
        log.error("self-check: a device result failed the prover's check (%s); no proof "
                  "emitted; post-mortem %s", err, path)
        raise ProofSelfCheckFailure(f"self-check: the device proof failed the prover's own "
                                    f"check ({err}); no proof emitted; post-mortem {path}",
                                    path, report) from err

    @contextmanager
    def _phase(self, name: str, phases: dict):
        """Time a phase outside the protocol (execute, traces, check) and report it."""
        if self.progress:
            self.progress(None, name, "start", 0.0)
        t = time.perf_counter()
        yield
        phases[name] = time.perf_counter() - t
        if self.progress:
            self.progress(None, name, "end", phases[name])

    def _prove(self, airs, tables, table_pv, rom, cycles, phases, t0) -> BlockProof:
        cfg = self.config
        abort = getattr(_CALL, "abort", None)
        spans = (_ProgressSpans(self.progress, abort) if (self.progress or abort)
                 else _spans.Spans())
        t_wait = time.perf_counter()
        with _locked(abort):
            lock_wait = time.perf_counter() - t_wait
            from .xcheck import POSTMORTEM_CONTEXT
            POSTMORTEM_CONTEXT.update(params=dict(vars(cfg.params())))
            if cfg.threads is not None:
                import numba
                numba.set_num_threads(cfg.threads)
            if cfg.check:
                self._check_tables(airs, tables, table_pv, phases)
            t1 = time.perf_counter()
            device, device_stats = None, []  # type: Any, list[Any]
            if self.backend != "host":
                device = self._device_config()
            try:
                proof = _prove(tables, airs, table_pv, cfg.params(), spans=spans, check=False,
                               device=device, device_stats=device_stats)
            except Exception as exc:
                # a device result the join's own check refused (v3: the final
                # polynomial's degree) is the self-check's failure: no proof emitted
                from .device_stages import DeviceResultError
                if isinstance(exc, DeviceResultError) and cfg.self_check:
                    self._refuse_device_result(exc)
                raise
            finally:
                _release_memory()
            phases["prove"] = time.perf_counter() - t1
        # Never a wrong proof: the verifier's own code checks the bytes before they are
        # returned.  Outside the process lock, on the CPU: another thread's proof can
        # already use the device.
        self_check = {"enabled": bool(cfg.self_check), "checked": 0, "failed": 0, "seconds": 0.0}
        if cfg.self_check:
            with self._phase("self_check", phases):
                pre = self._self_check(proof, airs, table_pv, device_stats)
            self_check.update(checked=1, seconds=round(phases["self_check"], 4),
                              tables_prechecked=pre)
            if device_stats:        # CPU time of the per-table checks overlapped with the device
                self_check["precheck_s"] = round(device_stats[0].precheck_s, 4)
        phases["total"] = time.perf_counter() - t0
        raw = spans.stats
        counters = dict(raw.counters)
        counters["self_check"] = self_check
        if device_stats:                    # the device pipeline's record: bytes, recoveries
            counters["device"] = device_stats[0].as_dict()
        stats = ProofStats(records=list(raw.records), counters=counters,
                           backend=self.backend, cycles=cycles, phases=phases,
                           proof_bytes=len(proof), peak_rss_bytes=_rss_bytes(),
                           lock_wait_s=lock_wait)
        for air, t in zip(airs, tables):
            per: dict[str, float] = {}
            for n, tab, s in raw.records:
                if tab == air.name and n != "table":
                    per[n] = per.get(n, 0.0) + s
            stats.tables.append(TableStats(air.name, int(t.shape[0]), air.main_width,
                                           air.aux_width, air.num_parts, per))
        log.info("proof: backend %s, %d cycles, %d tables, %d bytes, %.2fs (proving %.2fs, "
                 "waiting for the process lock %.2fs, self-check %.2fs)", self.backend, cycles,
                 len(tables), len(proof), phases["total"], phases.get("prove", 0.0), lock_wait,
                 phases.get("self_check", 0.0))
        return BlockProof(np.asarray(rom, dtype=np.int64), proof, stats)


# --------------------------------------------------------------------------- verification

@dataclass(frozen=True)
class VerifiedBlock:
    """What a successful :func:`verify` establishes, and the parameters it rests on."""
    public_values: list[int]
    seconds: float
    params: Params = field(default_factory=Params)
    security: SecurityReport | None = None
    dev: bool = False               # a development-mode fake accepted with accept_dev=True

    @property
    def memory_size(self) -> int:
        return self.public_values[0]

    @property
    def final_digest(self) -> list[int]:
        return self.public_values[PV_FINAL]

    @property
    def security_bits(self) -> int:
        """Conjectured security of the proof: its parameters for its table shapes, the sum
        of every soundness term (docs/protocol.md section 7)."""
        return self.security.bits if self.security is not None else 0


def verify(proof: BlockProof | bytes | str | os.PathLike[str], block: BlockLike | None = None, *,
           min_security_bits: int | None = DEFAULT_MIN_SECURITY_BITS,
           accept_dev: bool = False) -> VerifiedBlock:
    """Verify a block proof (a :class:`BlockProof`, its bytes, or a path); with ``block``
    also check that its public values are that block's (everything but the final-state
    digest, which the proof establishes).  Raises a
    :class:`verifier.errors.VerificationError` subclass on rejection (ShapeError for a
    malformed proof, PublicValuesError for a statement mismatch, ...).

    ``min_security_bits``: refuse a proof whose parameters give fewer conjectured security
    bits for its tables (:class:`verifier.errors.ParameterError`, raised after parsing,
    before any hashing; the figure is :attr:`VerifiedBlock.security`, docs/protocol.md
    section 7).  Default 100, like the ``verify`` command; 0 accepts any parameters --
    never do that for proofs from others.

    ``accept_dev``: a development-mode proof (``PROVER_DEV_MODE=1``; no STARK, proves
    nothing) raises :class:`DevProofRefused` unless this is True; accepted, only its ROM's
    program digest and (with ``block``) its public values are checked, and the result has
    ``dev=True`` and no security figure."""
    t0 = time.perf_counter()
    min_security_bits = validate_min_security_bits(min_security_bits)
    if isinstance(proof, (str, os.PathLike)):
        proof = BlockProof.load(proof)
    elif isinstance(proof, (bytes, bytearray, memoryview)):
        proof = BlockProof.from_bytes(bytes(proof))
    if not isinstance(proof, BlockProof):
        raise TypeError(f"a proof is a BlockProof, bytes or a path, not {type(proof).__name__}")
    if proof.dev:
        return _verify_dev(proof, block, accept_dev, t0)
    try:
        decoded = decode(proof.proof)
        pv = [int(v) for v in decoded.tables[0].public_values] if decoded.tables else []
    except ShapeError:
        raise
    except Exception as exc:        # decode raises ShapeError; anything else is malformed too
        raise ShapeError(f"malformed proof: {exc}") from None
    if len(pv) != NUM_PUBLIC_VALUES:
        raise ShapeError(f"the CPU table carries {len(pv)} public values, expected {NUM_PUBLIC_VALUES}")
    msize = pv[0]
    if not (8 <= msize <= 1 << 16 and msize % 8 == 0):
        raise PublicValuesError(f"memory_size {msize} is not a valid block memory size")
    if not 1 <= pv[PV_MAX_CYCLES] <= MAX_CYCLES:
        raise PublicValuesError(f"max_cycles {pv[PV_MAX_CYCLES]} is outside the block format's "
                                f"[1, 2^{MAX_LOG_CYCLES}]")
    # one ceiling with the block format: no block runs more than 2^21 cycles, so no CPU
    # table is taller (the protocol alone admits 2^24 rows)
    if decoded.tables[0].log_n > MAX_LOG_CYCLES:
        raise ShapeError(f"CPU table of 2^{decoded.tables[0].log_n} rows exceeds the block "
                         f"ceiling of 2^{MAX_LOG_CYCLES} cycles")
    if len(decoded.tables) != len(TABLES):
        raise ShapeError(f"proof has {len(decoded.tables)} tables, a block proof {len(TABLES)}")
    # a slotted table's k (POSEIDON2: permutations per row) is the prover's choice, read
    # off its main width; each k's AIR is sound on its own (docs/vm.md "Slots")
    try:
        slots = slots_from_widths([len(t.ood_main) for t in decoded.tables])
    except ValueError as exc:
        raise ShapeError(f"table shapes: {exc}") from None
    # the AIRs of the proof's log_blowup (their LogUp batching degree depends on it,
    # air/builder.py choose_logup_degree): a proof whose aux / quotient shapes were made for
    # other AIRs fails the shape checks (and the AIR fingerprints in the transcript)
    airs = block_airs(proof.rom, slots, decoded.params.log_blowup)
    check_security(decoded.params, min_security_bits, airs, [t.log_n for t in decoded.tables])
    if program_digest(proof.rom) != pv[PV_PROGRAMS]:
        raise PublicValuesError("the program digest does not match the proof's ROM")
    res = _verify_proof(decoded, airs, [pv, [], [msize], [], []],    # (decoded once)
                        min_security_bits=min_security_bits)
    if block is not None:
        blk = _as_block(block)
        expected = block_public_values(blk, build_rom(blk))
        bad = describe_mismatch(expected, pv)
        if bad:
            raise PublicValuesError("the proof is not for this block: " + ", ".join(bad)
                                    + " differ")
    return VerifiedBlock(pv, time.perf_counter() - t0, decoded.params, res.security)


def _verify_dev(proof: BlockProof, block, accept_dev: bool, t0: float) -> VerifiedBlock:
    if not accept_dev:
        raise DevProofRefused("this is a development-mode proof (made with PROVER_DEV_MODE=1 "
                              "/ dev_mode=True): execution and constraint check only, no "
                              "STARK, it proves nothing; accept it only in development with "
                              "--accept-dev (verify) / accept_dev=True (library)")
    pv = proof.public_values
    if program_digest(proof.rom) != pv[PV_PROGRAMS]:
        raise PublicValuesError("the program digest does not match the proof's ROM")
    if block is not None:
        blk = _as_block(block)
        bad = describe_mismatch(block_public_values(blk, build_rom(blk)), pv)
        if bad:
            raise PublicValuesError("the proof is not for this block: " + ", ".join(bad)
                                    + " differ")
    log.warning("accepted a development-mode proof: it proves nothing")
    return VerifiedBlock(pv, time.perf_counter() - t0, Params(), None, dev=True)


__all__ = ["Prover", "ProverConfig", "ProofStats", "TableStats", "BlockProof", "VerifiedBlock",
           "verify", "UnprovableBlock", "ConfigError", "ProofSelfCheckFailure",
           "DevProofRefused", "ExecutionReport", "TableEstimate", "digest_hex", "SteadfastError",
           "ProofAborted", "ConfigTypeError", "BlockLike", "ProgressCallback"]
