"""Steadfast: a STARK prover for BabyBear with CUDA kernels and resilient GPU residency.

Everything is imported under this one name -- ``steadfast.prover``, ``steadfast.verifier``,
``steadfast.kernels``, ``steadfast.air``, ``steadfast.rv32`` -- so that the packages
cannot collide with a node's own ``prover`` or ``air`` modules.  In the repository the packages
keep their top-level folders (``prover/``, ``kernels/``, ...); an installed wheel maps them
under ``steadfast/`` (pyproject's ``package-dir``), and in a source checkout run without
installing (``PYTHONPATH=. python3 bench/device_check.py``) this package's search path is
extended to the checkout's root so that ``steadfast.prover`` is the folder ``prover/``.
"""
from __future__ import annotations

import os as _os

__version__ = "0.1.0"

_here = _os.path.dirname(_os.path.abspath(__file__))
_root = _os.path.dirname(_here)
if (not _os.path.isdir(_os.path.join(_here, "prover"))
        and _os.path.isfile(_os.path.join(_root, "prover", "__init__.py"))
        and _os.path.isfile(_os.path.join(_root, "pyproject.toml"))):
    __path__.append(_root)          # source checkout: steadfast.X is the folder X/

from ._vector_width import configure as _configure_vector_width  # noqa: E402

_configure_vector_width()           # before any kernel compiles: 512-bit vectors on AVX-512

from .errors import SteadfastError  # noqa: E402  (the base of every error the API raises)
