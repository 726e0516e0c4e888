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
clear message; all values are canonical uint32 in [0, P).
"""
from .field import P, GENERATOR, TWO_ADICITY, EXT_W, root_of_unity

# The kernel modules compile (or load from cache) numba code on first use; load them
# lazily so that importing one submodule does not pay for all of them.
_LAZY = {"ntt": "ntt_host", "intt": "ntt_host", "coset_lde": "ntt_host",
         "poseidon2_permute": "poseidon2",
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
