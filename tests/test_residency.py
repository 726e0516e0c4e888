"""Resident handles and the fault-injection plan."""
import numpy as np
import pytest

from kernels.backend import DeviceMemory
from prover.faults import FaultSpecError, SITES, parse_faults
from prover.residency import DataLost, ResidentHandle, Where


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
