"""Steadfast's prover: the multi-table STARK of SPEC §4-5 on the host path.

* :func:`prove` ``(tables, airs, public_values=None, params=None, *, stages=None,
  spans=None, check=True, logs=None) -> bytes``
* :class:`HostStages` -- the per-table stage backend (a device backend replaces it)
* :class:`Spans` -- per-round / per-table timings
* :class:`Params` -- protocol parameters (re-exported from the verifier's proof format)
"""
from ..verifier.proof_format import Params

from .core.prove import prove
from .common.spans import ProofStats, Spans
from .core.stages import Committed, HostStages

__all__ = ["prove", "Params", "HostStages", "Committed", "Spans", "ProofStats"]
