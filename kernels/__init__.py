"""Steadfast kernels: BabyBear arithmetic, NTT/LDE, Poseidon2 and Merkle commitments.

The stable public host API (outside checks use it):

* ``P`` -- the BabyBear prime 2^31 - 2^27 + 1.
* ``poseidon2_permute(states)`` -- uint32[..., 16] -> same shape (SPEC §2).
* ``hash_rows(m)`` -- uint32[n, w] -> uint32[n, 8], the Merkle leaf sponge (SPEC §3).
* ``merkle_root(m)`` -- uint32[n, w], n a power of two -> uint32[8].
* ``ntt(a)`` / ``intt(a)`` -- along the last axis, natural order, omega_n = 31^((p-1)/n).
* ``coset_lde(evals, log_blowup, shift=31)`` -- uint32[n, w] evaluations on <omega_n> ->
  uint32[n*2^k, w] evaluations on shift*<omega_{n*2^k}>, natural order.

Every function validates dtype and shape and raises ``ValueError``/``TypeError`` with a
clear message; all values are canonical uint32 in [0, P), and an input holding a value
>= P is rejected with ``ValueError`` (one vectorised pass over the input).  The internal
kernels the prover calls (``kernels.ntt_host.lde_columns`` etc.) skip that pass: their
inputs are produced by the prover and canonical by construction.
"""
import numpy as np

from .field import P, GENERATOR, TWO_ADICITY, EXT_W, root_of_unity


def _check_canonical(a, name: str) -> None:
    """Reject values >= P in a uint32 array (other types are left to the kernel's own
    dtype/shape checks, which raise the TypeError/ValueError naming them)."""
    if isinstance(a, np.ndarray) and a.dtype == np.uint32 and a.size and int(a.max()) >= P:
        raise ValueError(f"{name}: values must be canonical field elements < p = {P} "
                         f"(found {int(a.max())})")


def ntt(a):
    """Forward NTT along the last axis, natural order: out[k] = sum_j a[j] omega_n^(jk).

    ``a``: canonical uint32, any leading batch shape, last axis n = 2^L <= 2^27.
    """
    from . import ntt_host
    _check_canonical(a, "ntt")
    return ntt_host.ntt(a)


def intt(a):
    """Inverse NTT along the last axis: out[j] = n^-1 sum_k a[k] omega_n^(-jk)."""
    from . import ntt_host
    _check_canonical(a, "intt")
    return ntt_host.intt(a)


def coset_lde(evals, log_blowup, shift=GENERATOR):
    """Coset LDE: uint32[n, w] evaluations on <omega_n> -> uint32[n 2^k, w] evaluations on
    shift * <omega_{n 2^k}>, natural order (k = ``log_blowup``)."""
    from . import ntt_host
    _check_canonical(evals, "coset_lde")
    return ntt_host.coset_lde(evals, log_blowup, shift)


# The kernel modules compile (or load from cache) numba code on first use; load them
# lazily so that importing one submodule does not pay for all of them.  (The NTT
# wrappers above import kernels.ntt_host on their first call.)
_LAZY = {"poseidon2_permute": "poseidon2",
         "hash_rows": "merkle", "merkle_root": "merkle"}


def __getattr__(name):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'kernels' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value


__all__ = ["P", "GENERATOR", "TWO_ADICITY", "EXT_W", "root_of_unity", "ntt", "intt",
           "coset_lde", "poseidon2_permute", "hash_rows", "merkle_root"]
