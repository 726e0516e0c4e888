"""Resident handles and the fault-injection plan."""
import numpy as np
import pytest

from steadfast.kernels.backend import DeviceMemory
from steadfast.prover.device.faults import FaultSpecError, SITES, parse_faults
from steadfast.prover.device.residency import DataLost, ResidentHandle, Where


def test_handle_moves_between_sides():
    mem = DeviceMemory("emu", budget=1 << 20)
    data = np.arange(32, dtype=np.uint32).reshape(4, 8)
    h = ResidentHandle("cpu", "main_lde", mem, host=data)
    assert h.where == Where.HOST and h.nbytes == 128
    d = h.device()
    assert h.where == Where.BOTH and h.stats.h2d_bytes == 128
    h.drop_host()                                   # device-only mode
    assert h.where == Where.DEVICE
    assert np.array_equal(h.host(), data)           # materialise only the missing side
    assert h.stats.host_materialisations == 1 and h.stats.d2h_bytes == 128
    assert h.device() is d                          # no second upload
    h.release()
    assert h.where == Where.NONE and mem.ledger.in_use == 0


def test_lost_data_is_an_error_not_a_wrong_answer():
    mem = DeviceMemory("emu", budget=None)
    mem.begin_epoch()
    h = ResidentHandle("mem", "aux_lde", mem, device=mem.to_device(np.ones(4, np.uint32)))
    mem.end_epoch()                                 # the proof's memory reclaimed wholesale
    with pytest.raises(DataLost, match="mem/aux_lde"):
        h.host()
    with pytest.raises(DataLost):
        h.device()
    h2 = ResidentHandle("x", "y", mem, host=np.ones(2, np.uint32))
    with pytest.raises(DataLost, match="only copy"):
        h2.drop_host()


def test_fault_plan_parsing_and_determinism():
    plan = parse_faults("oom@r2:0.3, corrupt@*:0.05,corrupt-input@r1.aux:1,race@r2:0.5,seed=7")
    assert plan.active and plan.seed == 7
    assert plan.rate("oom", "r2") == 0.3 and plan.rate("oom", "r3") == 0.0
    assert all(plan.rate("corrupt", s) == 0.05 for s in SITES)
    assert plan.fires("corrupt-input", "r1.aux", "cpu", 0)
    draws = [plan.fires("oom", "r2", f"t{i}", 0) for i in range(400)]
    assert draws == [plan.fires("oom", "r2", f"t{i}", 0) for i in range(400)]
    assert 60 < sum(draws) < 180                    # about 30 %
    assert not parse_faults("").active and not parse_faults(None).active


@pytest.mark.parametrize("bad,match", [
    ("oom@r9:0.1", "unknown site"), ("boom@r2:0.1", "unknown fault kind"),
    ("oom@r2:1.5", r"rate must be in \[0, 1\]"), ("oom@r2", "KIND@SITE:RATE"),
    ("race@r3:0.1", "only at r2"), ("seed=x", "bad seed"), ("oom@r2:abc", "bad rate")])
def test_fault_plan_rejects_bad_terms(bad, match):
    with pytest.raises(FaultSpecError, match=match):
        parse_faults(bad)


def _recovery(**kw):
    from steadfast.prover.device.faults import FaultPlan
    from steadfast.prover.device.recovery import Recovery, RecoveryCounters
    mem = DeviceMemory("emu", budget=1 << 20)
    counters = RecoveryCounters()
    return Recovery(mem, kw.pop("faults", FaultPlan()), counters, **kw), counters, mem


def test_recovery_happy_path_counts_nothing():
    rec, counters, _ = _recovery()
    assert rec.run("r2", "cpu", lambda: "dev", lambda: "host") == "dev"
    assert counters.total() == 0


def test_recovery_retry_then_downgrade_materialises_only_missing_side():
    from steadfast.kernels.backend import DeviceOOM
    rec, counters, mem = _recovery()
    on_dev = ResidentHandle("cpu", "main", mem, device=mem.to_device(np.ones(4, np.uint32)))
    on_host = ResidentHandle("cpu", "aux", mem, host=np.ones(4, np.uint32))
    calls = []

    def dev():
        calls.append(1)
        raise DeviceOOM(1, 0, 0, "test")
    assert rec.run("r2", "cpu", dev, lambda: "host", inputs=[on_dev, on_host]) == "host"
    assert len(calls) == 2
    c = counters.sites["r2"]
    assert (c.retries, c.downgrades, c.host_materialisations) == (1, 1, 1)
    assert on_dev.where == Where.BOTH


def test_recovery_transient_oom_recovers_on_retry():
    from steadfast.kernels.backend import DeviceOOM
    rec, counters, _ = _recovery()
    state = {"n": 0}

    def dev():
        state["n"] += 1
        if state["n"] == 1:
            raise DeviceOOM(1, 0, 0, "transient")
        return "dev"
    assert rec.run("r4.fri", "mem", dev, lambda: "host") == "dev"
    assert counters.sites["r4.fri"].retries == 1 and counters.sites["r4.fri"].downgrades == 0


class OutOfMemoryError(Exception):
    """Stands in for cupy.cuda.memory.OutOfMemoryError (matched by name, as on a GPU)."""


@pytest.mark.parametrize("raw", [OutOfMemoryError("out of memory allocating 4096 bytes"),
                                 RuntimeError("[2] Call to cuMemAlloc results in CUDA_ERROR_OUT_OF_MEMORY")])
def test_recovery_maps_real_cuda_ooms_from_kernel_temporaries(raw):
    # a kernel's own temporaries (outside DeviceMemory.empty) hit real OOM: it declines
    # like a budget refusal -- retried, then downgraded -- instead of aborting the proof
    rec, counters, _ = _recovery()

    def dev():
        raise raw
    assert rec.run("r2", "cpu", dev, lambda: "host") == "host"
    c = counters.sites["r2"]
    assert (c.retries, c.downgrades) == (1, 1)


def test_recovery_does_not_swallow_other_errors():
    rec, counters, _ = _recovery()

    def dev():
        raise ValueError("a bug, not a decline")
    with pytest.raises(ValueError, match="a bug"):
        rec.run("r2", "cpu", dev, lambda: "host")
    assert counters.total() == 0


def test_force_downgrade_takes_recovery_path_everywhere():
    from steadfast.prover.device.faults import SITES
    rec, counters, _ = _recovery(force_downgrade=True)
    for s in SITES:
        assert rec.run(s, "t", lambda: "dev", lambda: "host") == "host"
    assert all(counters.sites[s].downgrades == 1 for s in SITES)


def test_tree_integrity_by_rebuild_catches_any_changed_node():
    # Merkle trees carry no integrity tag: a post-mortem rebuilds their inner nodes from
    # the resident leaves (prover.device.xcheck.tree_consistent)
    from steadfast.kernels.merkle import commit
    from steadfast.prover.device.xcheck import tree_consistent as _tree_consistent
    rng = np.random.default_rng(5)
    nodes = commit(rng.integers(0, 2013265921, (16, 3), dtype=np.uint32)).nodes.copy()
    assert _tree_consistent(nodes)
    for row in (0, 7, 15, 16, 29, 30):         # leaves, an inner node, the root
        bad = nodes.copy()
        bad[row, 3] = (int(bad[row, 3]) + 1) % 2013265921
        assert not _tree_consistent(bad), row
    poisoned = nodes.copy()
    poisoned[2] = 0xFFFFFFFF
    assert not _tree_consistent(poisoned)


def test_lde_integrity_against_its_tree_leaves():
    # LDE buffers carry no integrity tag: a post-mortem rehashes the LDE's committed
    # (bit-reversed) rows and compares them with its tree's leaves
    from steadfast.kernels.merkle import commit
    from steadfast.prover.device.xcheck import lde_matches_leaves as _lde_matches_leaves
    from steadfast.prover.core.stages import _bitrev_rows
    rng = np.random.default_rng(6)
    lde_T = rng.integers(0, 2013265921, (3, 16), dtype=np.uint32)     # (columns, N)
    nodes = commit(_bitrev_rows(lde_T)).nodes.copy()
    assert _lde_matches_leaves(lde_T, nodes)
    for col in (0, 5, 15):
        bad = lde_T.copy()
        bad[1, col] = (int(bad[1, col]) + 1) % 2013265921
        assert not _lde_matches_leaves(bad, nodes), col
    poisoned = lde_T.copy()
    poisoned[0, 3] = 0xFFFFFFFF
    assert not _lde_matches_leaves(poisoned, nodes)
    assert not _lde_matches_leaves(lde_T[:, :8], nodes)          # wrong size
