"""Steadfast's prover: the multi-table STARK of SPEC §4-5 on the host path.

* :func:`prove` ``(tables, airs, public_values=None, params=None, *, stages=None,
  spans=None, check=True, logs=None) -> bytes``
* :class:`HostStages` -- the per-table stage backend (a device backend replaces it)
* :class:`Spans` -- per-round / per-table timings
* :class:`Params` -- protocol parameters (re-exported from the verifier's proof format)

The names are loaded on first use (PEP 562): ``verify`` and the command line's other
paths that never prove do not pay for the protocol rounds' imports.
"""
import importlib

__all__ = ["prove", "Params", "HostStages", "Committed", "Spans", "ProofStats"]

_LAZY = {
    "prove": ".core.prove",
    "Params": "..verifier.proof_format",
    "HostStages": ".core.stages",
    "Committed": ".core.stages",
    "Spans": ".common.spans",
    "ProofStats": ".common.spans",
}


def __getattr__(name):
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
