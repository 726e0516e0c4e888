"""bench/mul_ports.py's own logic (issue #38 item 3's bound): every mix's LLVM IR is valid
(vector and scalar chains, alone and mixed), the scalar-beside bound's arithmetic, and --
on a host with AVX-512 -- one tiny timed mix of each family.  The timings themselves are
the bench's, never asserted."""
from __future__ import annotations

import pytest

from bench import mul_ports as mp


@pytest.mark.parametrize("ops", mp.MIXES, ids=lambda ops: "+".join(ops))
def test_every_mix_is_valid_ir(ops):
    import llvmlite.binding as llvm
    text = mp._mix_ir(list(ops), 8)
    m = llvm.parse_assembly(text)
    m.verify()
    # one stored result per chain and family, inside the 4 x chains output slots
    fams = {mp._FAMILY[o] for o in ops}
    assert text.count("store i64") == 8 * len(fams) <= 4 * 8


def test_the_mixes_cover_the_scalar_side():
    fams = [{mp._FAMILY[o] for o in ops} for ops in mp.MIXES]
    assert {"s"} in fams                           # the scalar multiplier alone
    assert any("s" in f and "q" in f for f in fams)  # ... and beside vpmuludq


def test_scalar_bound_arithmetic():
    from steadfast.kernels.poseidon2_constants import ROUNDS_F_HALF, ROUNDS_P
    from steadfast.kernels.poseidon2_lanes import W
    rows = [{"ops": ["imul"], "cycles": 1.0, "ns": 0.5},
            {"ops": ["mulq", "imul"], "cycles": 1.1, "ns": 0.55}]
    kc = {"ns_per_perm": 100.0}
    b = mp.scalar_bound(rows, kc)
    imuls = (2 * ROUNDS_F_HALF * 16 + ROUNDS_P) * 4 * 3
    assert b["imuls_per_perm"] == imuls == 1692
    assert b["ns_per_perm"] == pytest.approx(imuls * 0.5)
    assert b["perms_beside"] == pytest.approx(100.0 * W / (imuls * 0.5))
    assert b["gain"] == pytest.approx(b["perms_beside"] / W)
    assert b["imul_cycles"] == 1.0 and b["beside"] == 1.1
    assert mp.scalar_bound(rows[1:], kc) is None   # no scalar-alone mix: no bound


@pytest.mark.skipif("avx512f" not in mp.cpu_flags(), reason="the mixes are 512-bit code")
@pytest.mark.parametrize("ops", [["mulq"], ["imul"], ["mulq", "imul"], ["xor"]],
                         ids=lambda ops: "+".join(ops))
def test_a_tiny_mix_runs(ops):
    cyc = mp.mix_cycles(ops, 1.0, n=1000)
    assert cyc > 0


@pytest.mark.skipif("avx512f" not in mp.cpu_flags(), reason="the vector chain is 512-bit code")
def test_both_clocks_read_a_plausible_frequency():
    for ghz in (mp.clock_ghz(2_000_000), mp.vector_clock_ghz(2_000_000)):
        assert 0.3 < ghz < 8.0
