"""How to prove: :class:`ProverConfig` (backend, VRAM budget, protocol parameters, threads,
check mode, self-check, development mode), every field type-checked at construction and
everything else -- ranges, the backend's availability, the device switches -- by
:meth:`ProverConfig.resolve` (``Prover(config)`` calls it).  The table in docs/api.md
("ProverConfig") documents the fields and their defaults (a test holds it to this
dataclass)."""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import numpy as np

from ...verifier.proof_format import Params

from ..common.errors import ConfigError, ConfigTypeError

log = logging.getLogger("steadfast.prover")


def _available_backends() -> tuple:
    """host always; the device backends when the device pipeline is part of this build."""
    try:
        from ..device import pipeline  # noqa: F401
    except ImportError:         # pragma: no cover - builds without the device path
        return ("host",)
    return ("host", "emu", "sim", "cuda")


BACKENDS_AVAILABLE = _available_backends()

_FIELD_TYPES = {"log_blowup": int, "num_queries": int, "pow_bits": int, "logup_pow_bits": int,
                "deep_pow_bits": int, "commit_pow_bits": int, "log_fri_arity": int,
                "log_cap": int, "threads": (int, type(None)),
                "check": bool, "self_check": bool, "dev_mode": (bool, type(None)),
                "backend": str, "postmortem_dir": (str, os.PathLike, type(None)),
                "vram_budget": (int, str, type(None)),
                "host_hold": (int, str, type(None)),
                "segment_cycles": (int, type(None)), "slots": str}

# How the RV32 prover chooses a slotted table's k (rv32/tables.py ``choose_slots``):
# "size", the k of the smallest proof (in practice 1), or "cells", the k committing the
# fewest cells -- the faster prove, wider opened rows (docs/rv32.md "Slots") -- or
# "split", the smallest proof's k with a chip whose items fill at most half of the power
# of two past its full one put in two tables (docs/rv32.md "Split chips"; a one-segment
# program's proof, rv32/tables.py ``choose_split``): fewer cells for a few more opened rows.
SLOT_OBJECTIVES = ("size", "cells", "split", "cells-split")


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


# Named parameter sets (``ProverConfig.for_profile``, ``prove --profile``): the trade of
# proof size and verify time against prove time, measured by bench/params_trade.py
# (docs/benchmarks.md "Proof size and verify time: the trades (issue #38 item 2)").  Every
# one gives >= 100 conjectured bits (verifier/security.py) for the 2^20-cycle program and
# the 2^18-cycle block of issue #38; the parameters travel in the proof, so any verifier
# takes a proof of any profile.
#   default  the protocol's defaults (Params) with slots="split" (a program's chips split
#            over two tables where that saves cells, docs/rv32.md "Split chips"): the
#            proof bytes of earlier releases wherever nothing splits (small programs
#            and blocks); slots="size" gives them for any proof
#   fast     log_blowup 1: the smallest LDE, the fastest prove, the largest proof
#   small    log_blowup 3 with fewer queries and 2^22 grinding, slots="size": a 2^20-cycle
#            program's proof under 300 KB, for a longer prove
#   smallest log_blowup 5, 17 queries, slots="size": a 2^18-cycle block's proof under
#            500 KB, for 4.5-5 times the prove time and 2-3 times the memory
#   fastest  fast's parameters with slots="cells-split": the wide chips hold up to 4
#            items a row and split over two tables where that saves cells, the fastest
#            prove (a block 1.19x fast's speed, a program fast's) for the largest proofs
#            (1.7-1.8x fast's; docs/benchmarks.md "fastest: cells, then split")
PROFILES = {
    "default": {"log_blowup": Params.log_blowup, "num_queries": Params.num_queries,
                "pow_bits": Params.pow_bits, "log_fri_arity": Params.log_fri_arity,
                "log_cap": Params.log_cap},
    "fast": {"log_blowup": 1, "num_queries": 83, "pow_bits": 20, "log_fri_arity": 3,
             "log_cap": 0},
    "small": {"log_blowup": 3, "num_queries": 27, "pow_bits": 22, "log_fri_arity": 3,
              "log_cap": 0, "slots": "size"},
    "smallest": {"log_blowup": 5, "num_queries": 17, "pow_bits": 20, "log_fri_arity": 3,
                 "log_cap": 0, "slots": "size"},
    "fastest": {"log_blowup": 1, "num_queries": 83, "pow_bits": 20, "log_fri_arity": 3,
                "log_cap": 0, "slots": "cells-split"},
}


@dataclass(frozen=True)
class ProverConfig:
    """How to prove.  ``backend``: host | cuda | sim | emu | auto (auto: cuda when usable,
    else host); the device backends run the device pipeline (:mod:`prover.device.pipeline`) and
    produce the same bytes.  ``vram_budget``: bytes or a size such as "6GiB" (device
    backends; default ``PROVER_VRAM_BUDGET``).  ``log_blowup``/``num_queries``/``pow_bits``:
    the protocol parameters (defaults: :class:`verifier.proof_format.Params`'s, 2, 50 and
    16).  ``threads``: numba threads for host kernels (None: numba's default).  ``check``: run the AIR check mode on every table before
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
    that XCHECK is not enabled to catch: a wrong proof could then leave the prover.
    ``segment_cycles``: a program run longer than this many cycles is proved as linked
    segments of this size (a power of two in [2^10, 2^22]; default 2^20, docs/rv32.md
    "Long programs: segments"); None: one proof only (at most 2^24 cycles).
    ``slots``: how an RV32 proof lays out its instruction chips -- "split" (default: one
    item a row, and a chip whose rows would leave its power of two at most half full in
    two tables, docs/rv32.md "Split chips": about a third fewer committed cells for a
    2^20-cycle program, a larger proof; a program's proof, each segment's and each
    block transaction's), "size" (one item a row, one table a chip: the smallest proof, the bytes
    of earlier releases), "cells" (up to 4 items a row, the fewest committed cells: a
    fast prove, a large proof) or "cells-split" ("cells"' rows, then "split"'s rule with
    the piece at its own fewest-cells k: the fastest prove, the largest proof; the
    ``fastest`` profile's); the choice is read back off the proof (widths,
    the pieces' labels), so verifiers need nothing.
    ``host_hold``: bytes (or a size such as "1GiB") of a host proof's main, LogUp and
    parts LDEs kept from their commit to the openings instead of released and
    recomputed (R2's quotient domain, the opened rows' cosets; docs/design.md "Host
    LDEs held within a budget"): default ``PROVER_HOST_HOLD``, else
    :data:`HOST_HOLD_DEFAULT` (1 GiB); 0 releases every LDE after its round (the
    smallest footprint).  The same bytes either way.
    :meth:`for_profile` gives the named parameter sets of :data:`PROFILES` (``prove
    --profile``; docs/api.md "Profiles")."""
    backend: str = "auto"
    vram_budget: int | str | None = None
    log_blowup: int = Params.log_blowup
    num_queries: int = Params.num_queries
    pow_bits: int = Params.pow_bits
    threads: int | None = None
    check: bool = False
    postmortem_dir: str | os.PathLike[str] | None = None
    logup_pow_bits: int = Params.logup_pow_bits
    deep_pow_bits: int = Params.deep_pow_bits
    commit_pow_bits: int = Params.commit_pow_bits
    log_fri_arity: int = Params.log_fri_arity
    log_cap: int = Params.log_cap
    self_check: bool = True
    dev_mode: bool | None = None
    segment_cycles: int | None = 1 << 20
    slots: str = "split"
    host_hold: int | str | None = None

    def __post_init__(self):
        _check_types(self)
        if self.slots not in SLOT_OBJECTIVES:
            raise ConfigError(f"slots must be one of {', '.join(SLOT_OBJECTIVES)}, got "
                              f"{self.slots!r}", "slots")
        n = self.segment_cycles
        if n is not None and (n & (n - 1) or not 1 << 10 <= n <= 1 << 22):
            raise ConfigError(f"segment_cycles must be a power of two in [2^10, 2^22] "
                              f"(1,024 .. 4,194,304), got {n!r}")

    @classmethod
    def for_profile(cls, profile: str, **fields) -> "ProverConfig":
        """The configuration of a named parameter set of :data:`PROFILES` (``default``,
        ``fast``, ``small``, ``smallest``; docs/api.md "Profiles"), ``fields`` on top of it
        (an explicit field wins over the profile's).  An unknown name is a
        :class:`ConfigError` naming the profiles."""
        if not isinstance(profile, str) or profile not in PROFILES:
            raise ConfigError(f"unknown profile {profile!r}; choose one of "
                              f"{', '.join(PROFILES)}", "profile")
        return cls(**{**PROFILES[profile], **fields})

    def dev(self) -> bool:
        """Development mode: this config's ``dev_mode``, else ``PROVER_DEV_MODE`` (0 or 1)."""
        if self.dev_mode is not None:
            return bool(self.dev_mode)
        raw = os.environ.get("PROVER_DEV_MODE", "")
        if raw not in ("", "0", "1"):
            raise ConfigError(f"PROVER_DEV_MODE must be 0 or 1, got {raw!r}")
        return raw == "1"

    def trace_options(self) -> dict:
        """What every RV32 trace builder (``rv32.traces.build_traces``,
        ``rv32.block.build_block_traces``) takes from this configuration, so the AIRs a
        proof is built on and the ones its kernels are precompiled for agree: the LogUp
        batching's ``log_blowup`` and the slotted tables' ``slot_objective``."""
        return {"log_blowup": self.log_blowup, "slot_objective": self.slots}

    def params(self) -> Params:
        return Params(log_blowup=self.log_blowup, num_queries=self.num_queries,
                      pow_bits=self.pow_bits, logup_pow_bits=self.logup_pow_bits,
                      deep_pow_bits=self.deep_pow_bits, commit_pow_bits=self.commit_pow_bits,
                      log_fri_arity=self.log_fri_arity, log_cap=self.log_cap)

    def resolve(self) -> tuple[str, int | None]:
        """Validate everything; return (backend, vram budget in bytes or None)."""
        from ...kernels.backend import BACKEND_NAMES, BackendError, parse_bytes, resolve_backend
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
        from ..core.pages import mode as _pages_mode
        _pages_mode()                       # STEADFAST_HUGEPAGES: refused here, by name
        self.host_hold_bytes()
        return name, budget

    def host_hold_bytes(self) -> int:
        """``host_hold`` in bytes (else ``PROVER_HOST_HOLD``, else
        :data:`HOST_HOLD_DEFAULT`); a malformed size is a :class:`ConfigError` naming it."""
        from ...kernels.backend import parse_bytes
        raw, where = self.host_hold, "host_hold"
        if raw is None:
            raw, where = os.environ.get("PROVER_HOST_HOLD"), "PROVER_HOST_HOLD"
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            return HOST_HOLD_DEFAULT
        try:
            return parse_bytes(raw)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}", "host_hold") from None


#: bytes of host LDEs a proof holds between rounds unless told otherwise (ProverConfig's
#: ``host_hold``): a 2^18-cycle block's main and LogUp LDEs are about 0.42 GiB
HOST_HOLD_DEFAULT = 1 << 30


_DEVICE_SWITCHES = ("PROVER_GPU_XCHECK", "PROVER_GPU_SERIALIZE_R2", "PROVER_GPU_FORCE_DOWNGRADE",
                    "PROVER_GPU_STREAMS", "PROVER_FAULTS", "PROVER_ARENA_POISON")
_WARNED: set = set()


def _host_diagnostics(timeline: bool) -> None:
    """On the host backend the device diagnostics do nothing: refuse malformed values the
    way a device backend does (:class:`ConfigError`), and warn once per process that the
    ones set apply to device backends only."""
    from ..device.pipeline import PipelineConfig
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


__all__ = ["ProverConfig", "BACKENDS_AVAILABLE", "PROFILES", "SLOT_OBJECTIVES"]
