"""Vector width of the host kernels' code generation (issue #12).

LLVM's tuning for AVX-512 Intel cores (Ice Lake and later, Rocket Lake, Sapphire Rapids)
sets ``prefer-256-bit``: loops are vectorised with 256-bit ``ymm`` registers even though
the core executes 512-bit ``zmm`` instructions.  The lane-major Poseidon2 kernel
(kernels/poseidon2.py) is bound by 64-bit multiplies across states and runs about twice
as fast per core with 512-bit vectors (docs/benchmarks.md, "Throughput and footprint");
the NTT kernels are unaffected.  numba fixes its target features when its CPU codegen is
first created (the first ``@njit`` of the process), so this runs from
``steadfast/__init__.py``, before any kernel module is imported.

The 512-bit choice also leaves AVX-512 DQ out of code generation (see ``_drop``): its
``vpmullq`` made the Montgomery reductions slower than AVX2's ``vpmuludq`` forms.

``STEADFAST_VECTOR_WIDTH``: ``auto`` (default: 512 where the host has AVX-512 F/DQ/VL),
``numba`` or ``256`` (leave numba's default alone), ``512`` (require AVX-512; a clear
error otherwise).  An explicit ``NUMBA_CPU_FEATURES`` always wins.  The arithmetic is
integer and exact: the width changes speed, never a result (the proofs are bit-identical
either way).

This is process-wide: numba has one CPU code generator per process, so a host
application that imports steadfast gets the same features for its own ``@njit``
functions (and a fresh entry in numba's on-disk cache for them, whose key holds the
features).  It is therefore logged once (logger ``steadfast``, level INFO, naming the
opt-out), readable back with :func:`applied`, and avoidable: ``STEADFAST_VECTOR_WIDTH=numba``
before the first ``import steadfast`` keeps numba's default for the whole process (the
cost for steadfast's own Poseidon2 on AVX-512: about 2x per core; docs/diagnostics.md has
what the default costs a host application's own kernels).
"""
from __future__ import annotations

import logging
import os
import sys

_AVX512 = ("avx512f", "avx512dq", "avx512vl")
CHOICES = ("auto", "256", "512", "numba")
#: the feature string this process applied (None: numba's default) -- see applied()
_APPLIED: list = []


def features_for(width: str, host: dict) -> str | None:
    """The numba feature string for ``width`` on a host with features ``host``
    (name -> bool, llvmlite's ``get_host_cpu_features()``), or None for numba's default."""
    if width not in CHOICES:
        raise ValueError(f"STEADFAST_VECTOR_WIDTH must be one of {', '.join(CHOICES)}, "
                         f"got {width!r}")
    if width in ("256", "numba"):
        return None
    has512 = all(host.get(f, False) for f in _AVX512)
    if not has512:
        if width == "512":
            raise ValueError("STEADFAST_VECTOR_WIDTH=512 needs AVX-512 F, DQ and VL, which "
                             "this CPU lacks")
        return None
    flat = ",".join(("+" if on and not _drop(name) else "-") + name
                    for name, on in sorted(host.items()))
    return flat + ",-prefer-256-bit"


def _drop(name: str) -> bool:
    """Features left out of the 512-bit code generation: AVX-512 DQ and the features that
    imply it (FP16, AVX10).  With DQ, LLVM lowers the Montgomery reductions' low 64-bit
    product (``int32(t * p^-1)``) to ``vpmullq``, three uops; without it, to ``vpmuludq``
    forms, as on AVX2: the batched Poseidon2 runs 2.2-2.4x faster per core that way, the
    NTT and LDE unchanged (docs/benchmarks.md, "Poseidon2 host kernel: one pass per round")."""
    return name in ("avx512dq", "avx512fp16") or name.startswith("avx10")


def applied() -> str | None:
    """The CPU feature string steadfast set for numba in this process, or None (numba's
    default: opted out, an explicit ``NUMBA_CPU_FEATURES``, or no AVX-512)."""
    return _APPLIED[0] if _APPLIED else None


def configure() -> str | None:
    """Apply the choice to numba (env and, if numba is already imported, its config).
    Returns the feature string applied, or None.  Logged once per process."""
    if _APPLIED:
        return _APPLIED[0]
    flat = _choose()
    _APPLIED.append(flat)
    if flat is not None:
        os.environ["NUMBA_CPU_FEATURES"] = flat
        if "numba.core.config" in sys.modules:     # read at codegen creation
            sys.modules["numba.core.config"].CPU_FEATURES = flat
        logging.getLogger("steadfast").info(
            "steadfast: numba's CPU code generation for this whole process set to 512-bit "
            "vectors without AVX-512 DQ (STEADFAST_VECTOR_WIDTH=%s; every @njit of the "
            "process gets it); STEADFAST_VECTOR_WIDTH=numba before importing steadfast "
            "keeps numba's default", os.environ.get("STEADFAST_VECTOR_WIDTH", "auto"))
    return flat


def _choose() -> str | None:
    if os.environ.get("NUMBA_CPU_FEATURES"):
        return None
    width = os.environ.get("STEADFAST_VECTOR_WIDTH", "auto").strip().lower()
    if width in ("256", "numba"):
        return None
    try:
        import llvmlite.binding as ll
        host = dict(ll.get_host_cpu_features())
    except Exception:           # pragma: no cover - no llvmlite / unknown host: defaults
        if width == "512":
            raise
        return None
    return features_for(width, host)
