"""Issue #28's findings in the residency and recovery code, each reproduced as found.

1. A failed device attempt's allocations stayed booked (an upload before a commit that
   did not fit, an FRI input's DQ uploads): the retry started with less room than the
   first try, and a downgraded table kept device-resident ``trace`` handles.  The FRI
   fold's roll-in uploads were never released, even on success.
   Fixed: ``DeviceStages._attempt`` releases what a failed attempt created.
2. CudaEngine's commits leaked their outputs when a kernel raised (in no handle: neither
   release nor spill could reach them).  Fixed: ``EmuEngine._outputs`` in every engine call.
3. An exception from ``Admission.acquire`` in a worker (a spill that failed) disappeared:
   the phase "succeeded" with a table that never ran.  Fixed: every worker exception
   reaches the caller; a failed spill leaves admission's books as they were.
6. XCHECK's post-mortem turned fault injection off for every table (a shared flag).
   Fixed: per thread (``DeviceStages.no_injection``).
7. The post-mortem's R2 rerun bypassed the R2 lock.  Fixed: held when serialisation is on.
Then: a property test over random fault plans and budgets (ledger back to zero, no handle
left on the device, a retry never starts with more bytes in use than its first attempt),
and a long-lived node loop (one Prover, 50 proofs with faults, nothing booked at the end).
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as hs

from steadfast.air import examples as ex
from steadfast.kernels.backend import DeviceMemory
from steadfast.prover import Params, prove
from steadfast.prover.device import pipeline as pl
from steadfast.prover.device import xcheck as xc
from steadfast.prover.device.locks import R2_LOCK
from steadfast.prover.device.stages import DeviceStages
from steadfast.prover.device.engines import EmuEngine
from steadfast.prover.device.faults import SITES, parse_faults
from steadfast.prover.device.pipeline import Admission, PipelineConfig, device_memory, run_pipeline
from steadfast.prover.device.recovery import Recovery
from steadfast.prover.core.rounds import statement
from steadfast.verifier.protocol import table_shape

FAST = Params(num_queries=8, pow_bits=2)


@pytest.fixture(scope="module")
def block():
    airs, traces, pvs = ex.lookup_block(5, 6)
    return airs, traces, pvs, prove(traces, airs, pvs, FAST)


def _statement(airs, traces, pvs, params=FAST):
    shapes = [table_shape(a, t.shape[0].bit_length() - 1, params) for a, t in zip(airs, traces)]
    return statement(airs, traces, pvs, params, shapes)


@contextmanager
def observed():
    """Patch the recovery and the pipeline to observe a proof: every device attempt's
    (site, table, attempt, ledger bytes in use, the table's own device bytes) at its
    start, the stages object, and every table's on-device handles at its release."""
    rec = SimpleNamespace(attempts=[], stages=[], at_release={})
    run0, make0, release0 = Recovery.run, pl.make_stages, DeviceStages.release_table

    def run(self, site, table, device_fn, host_fn, inputs=()):
        n = [0]
        stages = rec.stages[-1] if rec.stages else None

        def dev():
            mine = stages.device_bytes(table) if stages is not None else 0
            rec.attempts.append((site, table, n[0], self.mem.ledger.in_use, mine))
            n[0] += 1
            return device_fn()
        return run0(self, site, table, dev, host_fn, inputs)

    def make(*a, **k):
        s = make0(*a, **k)
        rec.stages.append(s)
        return s

    def release(self, table):
        rec.at_release[table] = [h.stage for h in self.table(table).handles if h.on_device]
        return release0(self, table)

    Recovery.run, pl.make_stages, DeviceStages.release_table = run, make, release
    try:
        yield rec
    finally:
        Recovery.run, pl.make_stages, DeviceStages.release_table = run0, make0, release0


def _retries(rec):
    """(site, table) -> [(ledger, own bytes) of attempt 0, of attempt 1] where both ran."""
    by = {}
    for site, table, k, in_use, mine in rec.attempts:
        by.setdefault((site, table), {})[k] = (in_use, mine)
    return {key: (v[0], v[1]) for key, v in by.items() if 0 in v and 1 in v}


# ------------------------------------------------------------------ finding 1
def test_a_retry_starts_with_the_bytes_its_first_attempt_found(block):
    airs, traces, pvs, ref = block
    with observed() as rec:
        proof, stats = run_pipeline(_statement(airs, traces, pvs),
                                    PipelineConfig(backend="emu", budget=30_000, workers=1))
    assert proof == ref
    retried = _retries(rec)
    # at this budget RANGE's r1.main and the join's r4.fri retry (and downgrade)
    assert any(s == "r1.main" for s, _ in retried) and ("r4.fri", "<join>") in retried, retried
    for key, ((use0, mine0), (use1, mine1)) in retried.items():
        assert use1 <= use0, f"{key}: the retry started with {use1} B in use, the first try {use0}"
        assert mine1 <= mine0, key
    for table, stages in rec.at_release.items():
        # one buffer per stage: a failed attempt leaves no second copy behind
        assert len(stages) == len(set(stages)), (table, stages)
    for site, table in retried:
        if site == "r1.main":           # downgraded before anything of it was resident
            assert rec.at_release[table] == [], (table, rec.at_release[table])
    assert device_memory("emu", 30_000).ledger.in_use == 0


def test_fold_roll_in_uploads_are_released_after_the_fold():
    # a host roll-in (a combined input F_h computed on the host) folded into a device
    # layer: its upload is read once, by the fold
    from steadfast.prover.device.join import JOIN, Layer
    from steadfast.prover.core.stages import HostStages
    mem = DeviceMemory("emu", None)
    stages = DeviceStages(mem, EmuEngine())
    rng = np.random.default_rng(1)
    values = rng.integers(0, 2**31 - 2**27, (32, 4)).astype(np.uint32)
    roll = rng.integers(0, 2**31 - 2**27, (8, 4)).astype(np.uint32)
    beta = np.array([5, 6, 7, 8], np.uint32)
    layer = Layer(stages._put(JOIN, "fri_5", values, seal=False), 5)
    out = stages.fri_fold(layer, beta, 2, 5, roll)
    assert np.array_equal(out.h.host(), HostStages().fri_fold(values, beta, 2, 5, roll))
    left = [h.stage for h in stages.table(JOIN).handles if h.on_device]
    assert sorted(left) == ["fri_3", "fri_5"], left      # no roll_upload_3 left behind
    stages.release_table(JOIN)
    assert mem.ledger.in_use == 0


def test_a_failed_attempt_gives_back_the_spilled_inputs_it_uploaded():
    # a spilled table's buffer brought back by an attempt that then does not fit: the
    # retry must find the device as the first attempt did (the host copy stays)
    from steadfast.kernels.backend import DeviceOOM
    mem = DeviceMemory("emu", None)
    stages = DeviceStages(mem, EmuEngine())
    h = stages._put("T", "main_coeffs", np.arange(64, dtype=np.uint32).reshape(4, 16))
    stages.spill_table("T")
    assert not h.on_device and h.on_host and mem.ledger.in_use == 0
    seen = []

    def dev():
        seen.append(mem.ledger.in_use)
        h.device()
        raise DeviceOOM(1 << 20, mem.ledger.in_use, None, "T/parts_lde")
    assert stages._run("r3", "T", dev, lambda: "host", [h]) == "host"
    assert seen == [0, 0], seen
    assert not h.on_device and np.array_equal(h.host(), np.arange(64).reshape(4, 16))
    assert mem.ledger.in_use == 0


# ------------------------------------------------------------------ finding 2
def _boom(*a, **k):
    raise RuntimeError("injected kernel failure")


@pytest.mark.parametrize("call", ["lde_commit", "parts_lde_commit", "commit_rows"])
@pytest.mark.parametrize("backend", ["emu", "sim"])
def test_an_engine_commit_that_raises_frees_its_outputs(call, backend, monkeypatch):
    from steadfast.prover.device import engines
    mem = DeviceMemory(backend, None)
    if backend == "sim":
        eng = engines.CudaEngine("sim")
        # the first kernel of each call raises: nothing runs under the simulator
        eng._ntt = SimpleNamespace(intt_device=_boom)
        eng._layout = SimpleNamespace(pad_columns_device=_boom)
        eng._merkle = SimpleNamespace(commit_device=_boom)
    else:
        eng = EmuEngine()
        monkeypatch.setattr(engines, "lde_columns", _boom)
        monkeypatch.setattr(engines, "parts_lde", _boom)
        monkeypatch.setattr(engines.kmerkle, "commit", _boom)
    eng.mem = mem
    shape = SimpleNamespace(log_lde=4, log_blowup=1, num_parts=1, n=8)
    src = mem.to_device(np.zeros((4, 8), np.uint32), tag="input")
    before = mem.ledger.in_use
    with pytest.raises(RuntimeError, match="injected kernel failure"):
        if call == "lde_commit":
            eng.lde_commit(mem, src, shape, tag="t/main")
        elif call == "parts_lde_commit":
            eng.parts_lde_commit(mem, src, shape, tag="t/parts")
        else:
            eng.commit_rows(mem, src, 4, tag="t/fri")
    assert mem.ledger.in_use == before, f"{call} left {mem.ledger.in_use - before} B booked"
    assert len(mem._live) == 1          # the input only
    mem.free(src)
    assert mem.ledger.in_use == 0


# ------------------------------------------------------------------ finding 3
def test_a_failed_spill_leaves_admission_as_it_was():
    def spill(name):
        raise MemoryError("host memory exhausted while downloading")
    adm = Admission(150, spill)
    adm.held = {"A": 100, "B": 50}
    adm.reserved = 150
    with pytest.raises(MemoryError):
        adm.acquire("B", 200)              # alone and oversize: spills A first, which fails
    assert adm.held == {"A": 100, "B": 50} and adm.reserved == 150 and adm.running == 0


def test_an_exception_in_a_workers_admission_reaches_the_caller(block, monkeypatch):
    airs, traces, pvs, _ = block
    spilled = []

    def spill_fails(self, table):
        spilled.append((threading.current_thread().name, table))
        raise MemoryError(f"host memory exhausted while spilling {table}")
    monkeypatch.setattr(DeviceStages, "spill_table", spill_fails)
    with pytest.raises(MemoryError, match="while spilling"):
        run_pipeline(_statement(airs, traces, pvs),
                     PipelineConfig(backend="emu", budget=30_000, workers=1))
    assert spilled and spilled[0][0].startswith("table"), spilled    # in a worker
    assert device_memory("emu", 30_000).ledger.in_use == 0


def test_run_all_reraises_an_unrecorded_worker_exception():
    def fn(i):
        if i == 1:
            raise KeyError("not recorded")
    with pytest.raises(KeyError):
        pl._run_all(2, [0, 1, 2], fn, [])


# ------------------------------------------------------------------ findings 6 and 7
def _postmortem_rerun(stages, on_r2):
    """Run xcheck's device rerun of a stub table up to its R2 call (``on_r2()`` runs
    there, then the rerun stops)."""
    class Stop(Exception):
        pass

    def r2(*a, **k):
        on_r2()
        raise Stop
    stages.engine.quotient_decompose = r2
    lde = SimpleNamespace(device=lambda: None)
    stages.table("T").outputs["main"] = SimpleNamespace(lde_h=lde, coeffs_h=lde)
    st = SimpleNamespace(airs=[None], public_values=[()],
                         shapes=[SimpleNamespace(name="T", aux_cols=0)])
    try:
        xc._rerun_device_chain(stages, st, 0, SimpleNamespace(challenges={}), None, None,
                               resident=True)
    except Stop:
        pass


def _stub_stages(serialize_r2=True):
    return DeviceStages(DeviceMemory("emu", None), EmuEngine(), serialize_r2=serialize_r2)


def test_a_postmortem_turns_fault_injection_off_for_its_own_thread_only(monkeypatch):
    monkeypatch.setattr(xc, "HostStages", SimpleNamespace(prep_lde=lambda *a: None))
    stages = _stub_stages(serialize_r2=False)      # two reruns inside R2 at once
    inside, seen = threading.Barrier(3), {}
    leave_a, leave_b = threading.Event(), threading.Event()

    def postmortem(tag, leave):
        def on_r2():
            seen[tag] = stages.inject
            inside.wait(timeout=10)
            leave.wait(timeout=10)
            seen[tag + "_late"] = stages.inject
        _postmortem_rerun(stages, on_r2)

    a = threading.Thread(target=postmortem, args=("a", leave_a))
    b = threading.Thread(target=postmortem, args=("b", leave_b))
    a.start(), b.start()
    inside.wait(timeout=10)                 # both post-mortems are inside their rerun
    seen["other"] = stages.inject          # another table's worker meanwhile
    leave_a.set()
    a.join(timeout=10)                      # A's post-mortem ends while B's still runs
    leave_b.set()
    b.join(timeout=10)
    assert seen["other"] is True, "a post-mortem turned off the other tables' faults"
    assert seen == {"a": False, "b": False, "other": True, "a_late": False, "b_late": False}
    assert stages.inject is True


@pytest.mark.parametrize("serialize", [True, False])
def test_the_postmortem_rerun_of_r2_holds_the_r2_lock(serialize, monkeypatch):
    monkeypatch.setattr(xc, "HostStages", SimpleNamespace(prep_lde=lambda *a: None))
    held = []
    assert not R2_LOCK.locked()
    _postmortem_rerun(_stub_stages(serialize), lambda: held.append(R2_LOCK.locked()))
    assert held == [serialize]
    assert not R2_LOCK.locked()


# ------------------------------------------------------------------ the property
BUDGETS = [None, 12_000, 20_000, 30_000, 60_000]


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(budget=hs.sampled_from(BUDGETS),
       sites=hs.lists(hs.sampled_from(SITES + ("*",)), min_size=0, max_size=3, unique=True),
       rate=hs.sampled_from([0.3, 0.5, 1.0]), seed=hs.integers(0, 1000),
       workers=hs.sampled_from([1, 3]),
       crash=hs.sampled_from([None, "ood", "deep_quotient", "fold_layer"]))
def test_every_proof_leaves_nothing_booked_and_no_retry_starts_fuller(
        block, budget, sites, rate, seed, workers, crash):
    airs, traces, pvs, ref = block
    plan = parse_faults(",".join(f"oom@{s}:{rate}" for s in sites) + f",seed={seed}")
    orig = getattr(EmuEngine, crash) if crash else None
    if crash:                               # a worker (or the join) fails: the rest cancel
        def crashing(self, *a, **k):
            raise RuntimeError(f"injected failure in {crash}")
        setattr(EmuEngine, crash, crashing)
    try:
        with observed() as rec:
            try:
                proof, _ = run_pipeline(_statement(airs, traces, pvs),
                                        PipelineConfig(backend="emu", budget=budget,
                                                       workers=workers, faults=plan))
                error = None
            except Exception as exc:     # noqa: BLE001 -- checked below
                proof, error = None, exc
    finally:
        if crash:
            setattr(EmuEngine, crash, orig)
    if error is None:
        assert proof == ref
    else:                                   # only the injected failure may fail a proof
        assert crash and f"injected failure in {crash}" in str(error), repr(error)
    mem = device_memory("emu", budget)
    assert mem.ledger.in_use == 0
    assert not mem._live
    for stages in rec.stages:
        for name, tstate in stages._tables.items():
            assert not [h for h in tstate.handles if h.on_device], name
    for key, ((use0, mine0), (use1, mine1)) in _retries(rec).items():
        assert mine1 <= mine0, key          # the table's own bytes, whatever runs beside
        if workers == 1:                    # nothing else runs between the two attempts
            assert use1 <= use0, key


# ------------------------------------------------------------------ a long-lived node
@pytest.mark.timeout(300)
def test_a_node_proving_50_proofs_with_faults_ends_with_nothing_booked(monkeypatch):
    from steadfast.prover.api import Prover, ProverConfig
    airs, traces, pvs = ex.lookup_block(4, 5)
    budget = 20_000
    monkeypatch.setenv("PROVER_FAULTS", "oom@*:0.3,seed=5")
    prover = Prover(ProverConfig(backend="emu", vram_budget=budget, num_queries=8, pow_bits=2))
    mem = device_memory("emu", budget)
    first = None
    for k in range(50):
        proof = prover.prove_airs(airs, traces, pvs).proof
        first = first or proof
        assert proof == first
        assert mem.ledger.in_use == 0 and not mem._live, f"after proof {k}"
    assert mem.stale_frees_dropped == 0
