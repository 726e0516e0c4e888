"""Issue #27, item 4: every kernel launch matches a signature the kernel declares.

``devicelib.kernel(signatures)`` records the signatures ``Prover.precompile`` (and the PTX
check) compile.  numba-cuda's dispatcher reuses a compiled kernel only for an *exact*
match of the launch's argument types (while it can still compile, it compiles a new
specialisation for anything else -- a C-contiguous array against a declared ``[:]``
layout, a Python int (int64) against a declared ``uint32``).  A launch that matches no
declared signature therefore JIT-compiles on the GPU during the proof, and precompile
compiled a variant that is never used.

Under the simulator every launch of every wrapper below is recorded as
``numba.typeof`` of its arguments (the dispatcher's own typing, ``Purpose.argument``)
and its block size, then compared with the kernel's declared signatures, and the block
size with the largest block the kernel declares (``devicelib.LAUNCH_BLOCKS``, which
``bench/ptxas_report.py --gate`` multiplies by the registers).
"""
from __future__ import annotations

import numpy as np
import pytest
from numba import cuda
from numba.core import sigutils
from numba.core.typing.typeof import Purpose, typeof

from steadfast.air import examples as ex
from steadfast.kernels import devicelib
from steadfast.kernels.field import P

#: kernels allowed to launch with a signature they do not declare (each would JIT-compile
#: a second variant at its first launch on a GPU); none now -- layout_device's kernels
#: declare ``uint32[:, ::1]`` / ``int64[::1]``, the layout their wrappers pass.  The test
#: fails when one listed here is fixed (remove it then).
OTHERS: set = set()


def rnd(rng, *shape):
    return rng.integers(0, P, shape, dtype=np.uint64).astype(np.uint32)


@pytest.fixture
def launches(monkeypatch):
    from numba.cuda.simulator import kernel as simkernel
    log: list = []
    orig = simkernel.FakeCUDAKernel.__call__

    def call(self, *args):
        if not self._device and not simkernel._kernel_context:
            bd = self.block_dim
            threads = int(np.prod([getattr(bd, a, 1) for a in ("x", "y", "z")])) \
                if hasattr(bd, "x") else int(np.prod(bd))
            log.append((id(self), tuple(typeof(a, Purpose.argument) for a in args), threads))
        return orig(self, *args)
    monkeypatch.setattr(simkernel.FakeCUDAKernel, "__call__", call)
    return log


def _declared():
    out = {}
    for name, _, sigs in devicelib.KERNELS:
        out[name] = [tuple(sigutils.normalize_signature(s)[0]) for s in sigs]
    return out


def _exercise(rng):
    """One call of every device wrapper, tiny sizes."""
    from steadfast.kernels import constraint_device as CD
    from steadfast.kernels import field_device as FD
    from steadfast.kernels import fri_device as FR
    from steadfast.kernels import layout_device as LD
    from steadfast.kernels import merkle_device as MD
    from steadfast.kernels import ntt_device as ND
    from steadfast.kernels import poseidon2_device as PD
    from steadfast.kernels import stage_device as SD
    from steadfast.prover.core.stages import HostStages
    from steadfast.verifier.proof_format import Params
    from steadfast.verifier.protocol import deep_groups, table_shape

    d = cuda.to_device
    a, b = d(rnd(rng, 17)), d(rnd(rng, 17))
    FD.add(a, b), FD.sub(a, b), FD.mul(a, b), FD.batch_inverse(a, chunk=4)
    e, f = d(rnd(rng, 5, 4)), d(rnd(rng, 5, 4))
    FD.ef_mul(e, f), FD.ef_inverse(e)
    x = d(rnd(rng, 2, 16))
    ND.ntt_device(x), ND.intt_device(x), ND.coset_ntt_device(x), ND.coset_intt_device(x)
    ND.coset_lde_device(x, 1)
    st = d(rnd(rng, 3, 16))
    PD.permute_device(st, block=1), PD.compress_pairs_device(st, block=1)
    PD.hash_rows_device(d(rnd(rng, 3, 5)), block=1)
    m = d(rnd(rng, 8, 4))
    MD.commit_device(m, block=1)
    LD.bitrev_rows_device(d(rnd(rng, 4, 8)))
    LD.checksum_device(d(rnd(rng, 4, 8)), max_blocks=1, block=8)
    q = d(rnd(rng, 4, 16))
    blocks = cuda.device_array((8, 8), dtype=np.uint32)
    LD.split_parts_device(q, blocks, 8)
    LD.pad_columns_device(d(rnd(rng, 4, 8)), cuda.device_array((4, 16), dtype=np.uint32))
    LD.gather_columns_device(d(rnd(rng, 3, 16)), np.array([1, 5, 7], np.int64))
    SD.ef_batch_inverse_device(e), SD.ef_prefix_sum_device(d(rnd(rng, 9, 4)), block=4)
    SD.ood_device(d(rnd(rng, 2, 16)), rnd(rng, 4), block=8)
    SD.bit_reverse_device(d(rnd(rng, 8, 4)))
    acc = d(rnd(rng, 8, 4))
    FR.ef_axpy_device(acc, d(rnd(rng, 8, 4)), rnd(rng, 4))
    FR.mu_combine_device([d(rnd(rng, 8, 4)), d(rnd(rng, 8, 4))], rnd(rng, 4))
    FR.fri_fold_arity_device(d(rnd(rng, 16, 4)), rnd(rng, 4), 2, roll=d(rnd(rng, 4, 4)))
    nodes = MD.commit_device(d(rnd(rng, 8, 4)), block=1)
    FR.gather_node_rows_device(d(rnd(rng, 15, 8)), np.array([0, 3, 3], np.int64))
    # R1's LogUp aux and R2's quotient (generated kernels), a DEEP quotient
    air = ex.adder_air()
    params = Params(log_blowup=1, num_queries=2, pow_bits=0)
    shape = table_shape(air, 4, params)
    main = rnd(rng, 1 << 4, air.main_width)
    chal = {"logup_beta": rnd(rng, 4), "logup_gamma": rnd(rng, 4)}
    aux, term = CD.aux_build_device(air, shape, d(np.ascontiguousarray(main.T)), [], chal,
                                    block=8, scan_block=4)
    N = 1 << shape.log_lde
    sels = CD.quotient_selectors_device(shape.log_n, shape.log_quotient, block=8)
    CD.quotient_device(air, shape, d(rnd(rng, air.main_width, N)), None,
                       d(rnd(rng, 4 * air.aux_width, N)), [], chal, rnd(rng, 4), term,
                       selectors=sels, block=32)
    mats = {"main": d(rnd(rng, air.main_width, N)), "aux": d(rnd(rng, 4 * air.aux_width, N)),
            "parts": d(rnd(rng, 4 * shape.num_parts, N))}
    groups = [(mats[g], rnd(rng, mats[g].shape[0], 4), nx) for g, nx in deep_groups(shape)]
    SD.deep_quotient_device(shape, groups, rnd(rng, 4), rnd(rng, 4), block=16)
    del nodes, HostStages


@pytest.mark.timeout(600)
def test_every_launch_matches_a_declared_signature_and_block(launches):
    _exercise(np.random.default_rng(3))
    by_id = {id(disp): name for name, disp in devicelib.DISPATCHERS.items()}
    declared = _declared()
    seen, bad, others, too_big = set(), [], [], []
    for kid, types, threads in launches:
        name = by_id.get(kid, f"<unregistered kernel {kid:x}>")
        seen.add(name)
        if types not in declared.get(name, []):
            (others if name in OTHERS else bad).append(
                f"{name}: launched with {types}; declared {declared.get(name)}")
        if threads > devicelib.launch_block(name):
            too_big.append((name, threads, devicelib.launch_block(name)))
    assert not bad, "launches that match no declared signature:\n" + "\n".join(sorted(set(bad)))
    assert not too_big, too_big
    # every registered kernel was launched here but the slotted AIRs' accumulation
    # (constraint_device._ef_axpy_kernel: a VM table with slots, too slow to generate
    # under the simulator in this test), the generated quotient and LogUp kernels included
    static = {n for n, _, _ in devicelib.KERNELS if ".generated." not in n}
    missed = static - seen - {"steadfast.kernels.constraint_device._ef_axpy_kernel"}
    assert not missed, missed
    assert any(".generated.quotient_" in n for n in seen) and \
        any(".generated.logup_" in n for n in seen), sorted(seen)
    stale = {n for n in OTHERS if n in seen and not any(o.startswith(n + ":") for o in others)}
    assert not stale, f"fixed since: remove from OTHERS: {stale}"
