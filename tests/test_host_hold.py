"""Host LDEs held within a budget (prover/core/stages.py HostStages(hold_bytes=),
ProverConfig.host_hold, docs/design.md "Host LDEs held within a budget"): the same proof
bytes at every budget; a held LDE is what R2 and the openings read (nothing recomputed
from the coefficients when everything is held); the budget is never exceeded; the
counters say what was held; a malformed budget is refused by name."""
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from steadfast.air import examples as ex
from steadfast.prover import HostStages, Params, prove
from steadfast.prover.api import ConfigError, Prover, ProverConfig
from steadfast.prover.core import stages as stages_mod
from steadfast.prover.core.scratch import HoldBudget

ROOT = Path(__file__).resolve().parents[1]
HELLO = ROOT / "guests" / "bin" / "hello.elf"
# blowup 4 and a degree-3 table: its quotient domain (2n) is a strict sub-coset of the
# LDE domain (4n), so R2 reads a held LDE through a stride as well as whole
PARAMS = Params(log_blowup=2, num_queries=6, pow_bits=1)


def _statement():
    airs, traces, pvs = ex.lookup_block(4, 8)
    return (airs + [ex.cubic_air()], traces + [ex.cubic_trace(5)[0]], pvs + [[]])


def _prove(hold: int, monkeypatch=None, forbid_recompute: bool = False):
    airs, traces, pvs = _statement()
    hs = HostStages(table_roots=False, hold_bytes=hold)
    if forbid_recompute:
        def refuse(*a, **k):
            raise AssertionError("recomputed from the coefficients while held")
        # R2's quotient domain and the openings' row groups of a released LDE
        monkeypatch.setattr(stages_mod._LdeSource, "group_rows", refuse)
        orig_on = stages_mod._LdeSource.on

        def on(self, *a, **k):
            assert self.lde is not None, "R2 evaluated a released LDE"
            return orig_on(self, *a, **k)
        monkeypatch.setattr(stages_mod._LdeSource, "on", on)
    return prove(traces, airs, pvs, PARAMS, stages=hs), hs


def test_same_bytes_at_every_budget_and_the_budget_is_kept(monkeypatch):
    none, hs0 = _prove(0)
    assert hs0.held == {"budget_bytes": 0, "held_bytes": 0, "held_matrices": 0}
    every, hs_all = _prove(1 << 40, monkeypatch, forbid_recompute=True)
    monkeypatch.undo()
    total = hs_all.held["held_bytes"]
    # main + aux + parts of every table: 4 bytes a cell on the LDE domain
    airs, traces, _ = _statement()
    assert hs_all.held["held_matrices"] >= 2 * len(airs)
    assert total > 0 and every == none
    for budget in (total // 3, total // 2, total - 1):
        got, hs = _prove(budget)
        assert got == none
        assert 0 < hs.held["held_bytes"] <= budget and hs.held["held_matrices"] < hs_all.held["held_matrices"]
        assert hs.hold_pool.left == budget - hs.held["held_bytes"]


def test_released_when_nothing_is_held(monkeypatch):
    """Budget 0: the recompute paths are the ones taken (the spy above would fail them)."""
    calls = []
    orig = stages_mod._LdeSource.group_rows

    def spy(self, *a, **k):
        calls.append(1)
        return orig(self, *a, **k)
    monkeypatch.setattr(stages_mod._LdeSource, "group_rows", spy)
    _prove(0)
    assert calls


def test_config_parses_and_refuses_by_name(monkeypatch):
    monkeypatch.delenv("PROVER_HOST_HOLD", raising=False)
    from steadfast.prover.engine.config import HOST_HOLD_DEFAULT
    assert ProverConfig().host_hold_bytes() == HOST_HOLD_DEFAULT == 1 << 30
    assert ProverConfig(host_hold="256MiB").host_hold_bytes() == 256 << 20
    assert ProverConfig(host_hold=0).host_hold_bytes() == 0
    monkeypatch.setenv("PROVER_HOST_HOLD", "0")
    assert ProverConfig().host_hold_bytes() == 0
    assert ProverConfig(host_hold=4096).host_hold_bytes() == 4096     # the field wins
    monkeypatch.setenv("PROVER_HOST_HOLD", "lots")
    with pytest.raises(ConfigError, match="PROVER_HOST_HOLD.*lots"):
        ProverConfig(backend="host").resolve()
    monkeypatch.delenv("PROVER_HOST_HOLD")
    with pytest.raises(ConfigError, match="host_hold.*-5|host_hold.*non-negative"):
        ProverConfig(backend="host", host_hold=-5).resolve()
    with pytest.raises(ConfigError, match="host_hold"):
        ProverConfig(host_hold=1.5)


def test_program_counters_and_bytes(monkeypatch):
    monkeypatch.delenv("PROVER_HOST_HOLD", raising=False)
    cfg = ProverConfig(backend="host", num_queries=6, pow_bits=1)
    held = Prover(cfg).prove_program(HELLO, b"hold")
    released = Prover(dataclasses.replace(cfg, host_hold=0)).prove_program(HELLO, b"hold")
    assert held.proof == released.proof
    h, r = held.stats.counters["host_hold"], released.stats.counters["host_hold"]
    assert h["budget_bytes"] == 1 << 30 and 0 < h["held_bytes"] <= 1 << 30
    # every table's main and parts at least (aux where it has interactions): all fit
    assert h["held_matrices"] >= 2 * len(held.stats.tables)
    assert r == {"budget_bytes": 0, "held_bytes": 0, "held_matrices": 0}
    assert np.isfinite(held.stats.phases["prove"])


def test_a_shared_budget_is_taken_and_given_back():
    """Stages on one HoldBudget (a cluster worker's tables) draw on it together and give
    their bytes back; the proof bytes do not depend on what another holder left."""
    none, _ = _prove(0)
    _, hs_all = _prove(1 << 40)
    total = hs_all.held["held_bytes"]
    pool = HoldBudget(total + total // 2)
    airs, traces, pvs = _statement()
    first = HostStages(table_roots=False, hold_pool=pool)
    assert prove(traces, airs, pvs, PARAMS, stages=first) == none
    assert first.held["held_bytes"] == total and pool.left == total // 2
    assert first.held["budget_bytes"] == pool.budget
    second = HostStages(table_roots=False, hold_pool=pool)
    assert prove(traces, airs, pvs, PARAMS, stages=second) == none
    assert 0 < second.held["held_bytes"] <= total // 2
    assert pool.left == total // 2 - second.held["held_bytes"]
    first.give_back()
    first.give_back()                                   # once only
    assert first.held["held_bytes"] == 0 and first.held["held_matrices"] == 0
    assert pool.left == total + total // 2 - second.held["held_bytes"]
    second.give_back()
    assert pool.left == pool.budget
    pool.give(1 << 40)                                  # never beyond the budget
    assert pool.left == pool.budget


def test_a_cluster_workers_tables_hold_within_its_budget():
    """prover/cluster/worker.py: a sharded table's host stages draw on the worker's one
    budget (ProverConfig.host_hold) and give it back when the table's state is dropped."""
    from steadfast.prover.cluster.worker import _Worker
    from steadfast.verifier.protocol import table_shape
    airs, traces, _ = _statement()
    shapes = [table_shape(a, int(t.shape[0]).bit_length() - 1, PARAMS)
              for a, t in zip(airs, traces)]
    one = 4 * shapes[0].main_width << shapes[0].log_lde          # table 0's main LDE
    w = _Worker(ProverConfig(backend="host", host_hold=one + one // 2))
    assert w.hold.budget == one + one // 2
    t0, _ = w._commit(0, airs, traces[0], PARAMS, shapes)
    assert t0.stages.hold_pool is w.hold and t0.com.pinned
    assert w.hold.left == one // 2
    t1, _ = w._commit(0, airs, traces[0], PARAMS, shapes)       # no room left: released
    assert not t1.com.pinned and w.hold.left == one // 2
    w.state[("job", 0)], w.state[("job", 1)] = t0, t1
    w.drop("job")
    assert w.hold.left == w.hold.budget and not w.state
    none = _Worker(ProverConfig(backend="host", host_hold=0))
    t, _ = none._commit(0, airs, traces[0], PARAMS, shapes)
    assert not t.com.pinned and none.hold.budget == 0


def test_a_workers_whole_proofs_share_its_budget(monkeypatch):
    """A cluster worker's whole proofs draw on the budget its sharded tables hold from
    (Prover.hold_pool): what the worker holds stays within host_hold whatever it runs,
    the proof gives its bytes back at its end, and the bytes are the same whatever a
    table left of the budget."""
    monkeypatch.delenv("PROVER_HOST_HOLD", raising=False)
    from steadfast.prover.cluster.worker import _Worker
    from steadfast.verifier.protocol import table_shape
    cfg = ProverConfig(backend="host", num_queries=6, pow_bits=1, host_hold=8 << 20)
    w = _Worker(cfg)
    assert w.prover.hold_pool is w.hold
    alone, stats, _ = w.prove_program(HELLO, b"hold", 1 << 16, "k")
    h = stats.counters["host_hold"]
    assert h["budget_bytes"] == 8 << 20 and 0 < h["held_bytes"] <= 8 << 20
    assert w.hold.left == w.hold.budget                 # given back with the proof
    # a sharded table holds most of the budget: the whole proof holds less, same bytes
    airs, traces, _ = _statement()
    shapes = [table_shape(a, int(t.shape[0]).bit_length() - 1, PARAMS)
              for a, t in zip(airs, traces)]
    t0, _ = w._commit(0, airs, traces[0], PARAMS, shapes)
    assert t0.com.pinned
    assert w.hold.take(w.hold.left - h["held_bytes"] // 2)  # something else the rest
    left = w.hold.left
    again, stats2, _ = w.prove_program(HELLO, b"hold", 1 << 16, "k")
    h2 = stats2.counters["host_hold"]
    assert again == alone and h2["held_bytes"] <= left < h["held_bytes"]
    assert w.hold.left == left
    # a plain Prover keeps a budget of its own for each proof
    assert Prover(cfg).hold_pool is None
