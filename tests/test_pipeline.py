"""The device pipeline on CI backends (emu, sim): identical bytes, admission, recovery,
R2 serialisation, XCHECK post-mortems, cancellation, epochs."""
import json
import threading

import numpy as np
import pytest

from steadfast.air import examples as ex
from steadfast.prover import Params, prove
from steadfast.prover.device.faults import SITES, parse_faults
from steadfast.prover.device.pipeline import PipelineConfig, estimate_bytes, run_pipeline
from steadfast.prover.core.rounds import statement
from steadfast.prover.device.xcheck import XcheckFailure
from steadfast.verifier.protocol import table_shape

FAST = Params(num_queries=8, pow_bits=2)


def _statement(airs, traces, pvs, params=FAST):
    shapes = [table_shape(a, t.shape[0].bit_length() - 1, params) for a, t in zip(airs, traces)]
    return statement(airs, traces, pvs, params, shapes)


@pytest.fixture(scope="module")
def block():
    airs, traces, pvs = ex.lookup_block(5, 6)
    return airs, traces, pvs, prove(traces, airs, pvs, FAST)


def _run(block, **kw):
    airs, traces, pvs, _ = block
    return run_pipeline(_statement(airs, traces, pvs), PipelineConfig(**kw))


def tiny_lookup_block():
    """adder (8 rows) + range4 (16) + pairs (16): the LogUp example small enough for the
    CUDA simulator, which runs every device thread as a Python thread."""
    rng = np.random.default_rng(3)
    n, side = 8, 4
    a, b = rng.integers(0, side, n), rng.integers(0, side, n)
    on = (rng.random(n) < 0.8).astype(np.int64)
    c = np.where(on == 1, a + b, rng.integers(0, 1000, n))
    adder = np.stack([a, b, c, on], axis=1).astype(np.uint32)
    rng_t = np.zeros((16, 2), dtype=np.uint32)
    rng_t[:, 0] = np.arange(16)
    for col in (a, b, c):
        np.add.at(rng_t[:, 1], col[on == 1], 1)
    pairs = np.zeros((16, 1), dtype=np.uint32)
    np.add.at(pairs[:, 0], (a + side * b)[on == 1], 1)
    airs = [ex.adder_air(), ex.range_air(4), ex.pairs_air(4)]
    traces = [adder, rng_t, pairs]
    pvs = [[], [], []]
    return airs, traces, pvs, prove(traces, airs, pvs, FAST)


def _assert_happy_path(stats):
    assert stats.counters.total() == 0
    assert all(c == {"retries": 0, "downgrades": 0, "host_materialisations": 0}
               for c in stats.counters.as_dict().values())
    assert stats.peak_device_bytes > 0 and stats.stale_frees_dropped == 0
    assert not any(t.downgraded for t in stats.tables.values())
    for ts in stats.tables.values():            # time per stage, per table
        assert {"r1_main", "r1_aux", "r2_quotient", "r3_ood", "r4_deep"} <= set(ts.stage_s), \
            ts.stage_s
        assert all(v > 0 for v in ts.stage_s.values())
        assert ts.device_stage_ms == {}         # CUDA events only on backend cuda
    # the join (one FRI for all tables): its own stages, never downgraded on a happy path
    assert {"r4_fri", "r4_open"} <= set(stats.join.stage_s), stats.join.stage_s
    assert not stats.join.downgraded and stats.join.est_bytes > 0
    assert 0 < stats.join.peak_device_bytes <= stats.join.est_bytes


@pytest.mark.timeout(900)
@pytest.mark.parametrize("backend", ["emu"])
def test_device_backends_match_host_bytes_and_happy_path_counts_nothing(block, backend):
    # (backend sim: test_sim_kernel_temporaries_stay_within_their_booked_scratch, one
    # simulator proof for both checks)
    proof, stats = _run(block, backend=backend)
    assert proof == block[3]
    _assert_happy_path(stats)


def test_tiny_budget_tables_wait_for_admission_still_identical(block):
    airs, traces, pvs, ref = block
    shapes = _statement(airs, traces, pvs).shapes
    budget = max(estimate_bytes(s) for s in shapes) + 1000      # one table at a time
    proof, stats = _run(block, backend="emu", budget=budget)
    assert proof == ref
    assert sum(t.admission_wait_s for t in stats.tables.values()) > 0
    assert stats.peak_device_bytes <= budget


def test_budget_below_a_table_recovers_by_downgrade(block):
    proof, stats = _run(block, backend="emu", budget=30_000)
    assert proof == block[3]
    c = stats.counters.as_dict()
    assert sum(v["downgrades"] for v in c.values()) >= 1
    assert all(v["retries"] >= v["downgrades"] for v in c.values())


@pytest.mark.parametrize("workers", [1, 2, 5])
def test_many_tables_several_worker_counts_repeated(workers):
    airs, traces, pvs = [], [], []
    for k in range(3):
        a, t, p = ex.lookup_block(4 + k % 2, 5)
        airs += a
        traces += t
        pvs += p
    # rename nothing: same AIR names repeat across blocks, the pipeline keys by index order
    ref = prove(traces, airs, pvs, FAST)
    st = _statement(airs, traces, pvs)
    for _ in range(2):
        proof, _stats = run_pipeline(st, PipelineConfig(backend="emu", workers=workers,
                                                        serialize_r2=False))
        assert proof == ref


def test_force_downgrade_takes_every_site_and_stays_identical(block):
    proof, stats = _run(block, backend="emu", force_downgrade=True)
    assert proof == block[3]
    c = stats.counters.as_dict()
    for site in SITES:
        assert c[site]["downgrades"] >= 1, site


def test_injected_ooms_everywhere_recover_identically(block):
    for seed in range(3):
        proof, stats = _run(block, backend="emu", faults=parse_faults(f"oom@*:0.3,seed={seed}"))
        assert proof == block[3]
        assert stats.counters.total() > 0


def test_r2_windows_overlap_only_without_serialisation(block):
    overlaps = {}
    for ser in (True, False):
        _, stats = _run(block, backend="emu", serialize_r2=ser, workers=3)
        w = stats.r2_windows
        overlaps[ser] = any(a[1] < b[2] and b[1] < a[2]
                            for i, a in enumerate(w) for b in w[i + 1:])
        assert len(w) == 3
    assert overlaps[True] is False


@pytest.mark.parametrize("spec,verdict", [
    ("corrupt@r2:1", "transient race"),
    ("corrupt@r1.main:1", "transient race"),
    # a wrong LDE committed as produced still matches its tree: not a resident corruption
    ("corrupt@r1.aux:1", "transient race"),
    ("corrupt@r2.tree:1", "transient race"),
    # the uploaded trace is checked against the prover's input (it carries no tag)
    ("corrupt-input@r1.main:1", "corrupted resident input"),
    ("corrupt-input@r2:1", "corrupted resident input"),
    ("corrupt-input@r3:1", "corrupted resident input"),
    # R4 results are checked per table after r4.open, while the buffers are resident
    ("corrupt@r4.deep:1", "transient race"),
    ("corrupt@r4.fri:1", "transient race"),
    ("corrupt-input@r4.deep:1", "corrupted resident input"),
    ("corrupt-input@r4.open:1", "corrupted resident input"),
    ("corrupt@r4.open:1", "transient race"),
])
def test_xcheck_catches_corruption_with_the_right_verdict(block, tmp_path, spec, verdict):
    with pytest.raises(XcheckFailure) as err:
        _run(block, backend="emu", xcheck=True, faults=parse_faults(spec + ",seed=1"),
             postmortem_dir=str(tmp_path))
    rep = json.loads(open(err.value.postmortem).read())
    assert rep["verdict"] == verdict
    assert str(tmp_path) in str(err.value)
    assert rep["diverged_stage"]
    if "@r4" in spec:                   # caught by the section check, not at z
        assert rep["check"].startswith("self-verification of R4")
    if rep["check"].startswith("self-verification of R4"):
        # a corrupted LDE row off the quotient domain (a subset of the LDE's rows when
        # the blowup exceeds the parts) leaves R2/R3 intact; R4 reads it and is caught
        assert rep["diverged_stage"].startswith("r4 (")
        return
    assert rep["check"] == "composition at z (R3)" and rep["stages"]
    if spec.startswith("corrupt@r2"):
        assert rep["diverged_stage"] == "constraints"
        assert rep["stages"]["lde"]["matches_host"]
    if spec.startswith("corrupt@r1.main"):
        assert rep["diverged_stage"] == "lde"


def test_race_fault_needs_overlap(block, tmp_path):
    # serialised: windows never overlap, the race never fires, the proof is right
    proof, _ = _run(block, backend="emu", xcheck=True, faults=parse_faults("race@r2:1"),
                    serialize_r2=True, workers=3, postmortem_dir=str(tmp_path))
    assert proof == block[3]


def test_xcheck_happy_path_passes(block, monkeypatch):
    # and on the happy path no resident buffer looks corrupted: the tags taken in the
    # writes' copy (emu), the LDEs against their trees, the trace against the input
    from steadfast.prover.device.stages import DeviceStages
    orig, checked = DeviceStages.release_table, []

    def release(self, table):
        assert self.integrity(table) == [], table
        checked.append(table)
        return orig(self, table)
    monkeypatch.setattr(DeviceStages, "release_table", release)
    proof, stats = _run(block, backend="emu", xcheck=True)
    assert proof == block[3] and stats.counters.total() == 0
    assert checked == ["adder", "range8", "pairs6", "<join>"]     # every table, then the join


@pytest.mark.timeout(60)
def test_failure_in_one_table_cancels_the_rest(block, monkeypatch):
    from steadfast.prover.device.stages import DeviceStages
    orig = DeviceStages.quotient

    def boom(self, air, shape, *a, **k):
        if shape.name == "adder":
            raise RuntimeError("kernel exploded")
        return orig(self, air, shape, *a, **k)
    monkeypatch.setattr(DeviceStages, "quotient", boom)
    with pytest.raises(RuntimeError, match="kernel exploded"):
        _run(block, backend="emu", workers=3)
    from steadfast.prover.device.pipeline import device_memory
    assert device_memory("emu", None).ledger.in_use == 0


def test_late_free_from_previous_proof_does_not_corrupt_the_next(block):
    from steadfast.prover.device.pipeline import device_memory
    import steadfast.prover.device.stages as ds
    kept = []
    orig = ds.DeviceStages._handle

    def spy(self, *a, **k):
        h = orig(self, *a, **k)
        kept.append(h._dev)              # the raw buffer a finaliser would free
        return h
    ds.DeviceStages._handle = spy
    try:
        _run(block, backend="emu")
    finally:
        ds.DeviceStages._handle = orig
    mem = device_memory("emu", None)
    before = mem.stale_frees_dropped
    stop = threading.Event()

    def late_finaliser():            # frees proof 1's buffers while proof 2 runs
        for dev in kept:
            mem.free(dev)
        stop.set()
    t = threading.Timer(0.01, late_finaliser)
    t.start()
    proof, _ = _run(block, backend="emu")
    t.join()
    assert proof == block[3]
    assert stop.is_set() and mem.stale_frees_dropped > before


@pytest.mark.timeout(900)
def test_sim_recovers_from_injected_ooms_identically():
    blk = tiny_lookup_block()
    proof, stats = _run(blk, backend="sim", faults=parse_faults("oom@*:0.5,seed=4"))
    assert proof == blk[3] and stats.counters.total() > 0


def test_gate_implies_every_dispatch_check():
    from hypothesis import given, strategies as st
    from steadfast.prover.device.stages import DISPATCH_CHECKS, device_gate, dispatch_ok
    from steadfast.verifier.protocol import TableShape

    @given(st.integers(1, 26), st.integers(0, 4), st.integers(1, 300), st.integers(0, 8),
           st.integers(0, 3), st.integers(1, 5),
           st.one_of(st.none(), st.integers(0, 1 << 40)))
    def check(log_n, log_blowup, width, prep, aux_cols, num_parts, budget):
        shape = TableShape("t", log_n, log_blowup, width, prep, aux_cols, num_parts, 0,
                           True, False)
        est = estimate_bytes(shape)
        if device_gate(shape, budget, est):
            assert all(dispatch_ok(site, shape) for site in DISPATCH_CHECKS)
            assert budget is None or est <= budget
    check()


def test_a_table_the_dispatch_refuses_still_recovers(block, monkeypatch):
    import steadfast.prover.device.stages as ds
    monkeypatch.setitem(ds.DISPATCH_CHECKS, "r2", lambda s: False)
    proof, stats = _run(block, backend="emu")
    assert proof == block[3]
    assert stats.counters.sites["r2"].downgrades == 3


@pytest.mark.timeout(600)
def test_sim_kernel_temporaries_stay_within_their_booked_scratch(monkeypatch):
    """Every CudaEngine call books its kernels' own temporaries against the budget
    (DeviceMemory.scratch); under the simulator, count what the kernels really allocate
    outside the allocator during each call and compare with what was booked.

    The same simulator proof checks the per-table streams: every kernel a table worker
    launches goes to the stream its worker holds (DeviceMemory.stream_scope), never to
    the default stream, and concurrent tables hold different streams."""
    import threading
    from contextlib import contextmanager
    from numba import cuda
    from numba.cuda.simulator.api import stream as sim_stream
    from numba.cuda.simulator.kernel import FakeCUDAKernel
    import steadfast.kernels.backend as kb

    launches = []                       # (thread name, launch stream, stream held)
    mems = []
    getitem = FakeCUDAKernel.__getitem__

    def recording(self, configuration):
        held = mems[0].stream() if mems else None
        launches.append((threading.current_thread().name,
                         configuration[2] if len(configuration) > 2 else None, held))
        return getitem(self, configuration)
    monkeypatch.setattr(FakeCUDAKernel, "__getitem__", recording)
    init = kb.DeviceMemory.__init__

    def remembered(self, *a, **k):
        init(self, *a, **k)
        mems.append(self)
    monkeypatch.setattr(kb.DeviceMemory, "__init__", remembered)
    import steadfast.prover.device.pipeline as pl
    monkeypatch.setattr(pl, "_MEMORIES", {})        # a fresh DeviceMemory for this proof
    # the NTT's process-wide twiddle tables (at least 2^8 words, grown on demand) are
    # uploaded inside whichever call first needs them, which depends on the tests run
    # before: measure the steady state of a long-lived process, with them in place
    import steadfast.kernels.ntt_device as nd
    for inverse in (False, True):
        nd._twiddles(9, inverse)

    tl = threading.local()
    calls = []

    def nbytes(shape, dtype=np.float64, *a, **k):
        return int(np.prod(np.atleast_1d(shape), dtype=np.int64)) * np.dtype(dtype).itemsize

    def hook(name, size):
        orig = getattr(cuda, name)

        def counted(*a, **k):
            if getattr(tl, "booked", None) is not None and not getattr(tl, "managed", False):
                tl.used += size(*a, **k)
            return orig(*a, **k)
        monkeypatch.setattr(cuda, name, counted)

    hook("device_array", nbytes)
    hook("device_array_like", lambda ary, *a, **k: ary.nbytes)
    hook("to_device", lambda ary, *a, **k: np.asarray(ary).nbytes)
    raw = kb.DeviceMemory._raw_empty

    def managed(self, *a, **k):
        tl.managed = True
        try:
            return raw(self, *a, **k)
        finally:
            tl.managed = False
    monkeypatch.setattr(kb.DeviceMemory, "_raw_empty", managed)
    scratch = kb.DeviceMemory.scratch

    @contextmanager
    def measured(self, n, tag=""):
        with scratch(self, n, tag):
            tl.booked, tl.used = n, 0
            try:
                yield
            finally:
                calls.append((tag, tl.used, n))
                tl.booked = None
    monkeypatch.setattr(kb.DeviceMemory, "scratch", measured)

    airs, traces, pvs, ref = tiny_lookup_block()
    proof, stats = run_pipeline(_statement(airs, traces, pvs),
                                PipelineConfig(backend="sim", workers=2))
    assert proof == ref                         # sim bytes == host bytes
    _assert_happy_path(stats)
    worker = [(st, held) for name, st, held in launches if name.startswith("table")]
    assert len(worker) > 50
    assert all(isinstance(st, sim_stream) and st is held for st, held in worker), \
        [(st, held) for st, held in worker if not (isinstance(st, sim_stream) and st is held)][:5]
    assert len({id(st) for st, _ in worker}) == 2 == mems[0].streams_created   # one per worker
    # the join runs on the calling thread, on a stream of the same pool
    join = [(st, held) for name, st, held in launches
            if not name.startswith("table") and held is not None]
    assert len(join) > 10 and all(st is held for st, held in join)
    seen = {tag for tag, _, _ in calls}
    assert {"aux_build", "quotient_decompose", "ood", "deep_quotient", "lde_commit",
            "parts_lde_commit", "gather_columns", "gather_rows", "fri_input", "fold_layer"} \
        <= seen, seen
    # the bounds' size-proportional part must cover what was allocated (the production
    # slack is not counted; 1 KiB of fixed per-call overhead is allowed at these sizes)
    from steadfast.prover.device.engines import _SLACK
    over = [(tag, used, booked) for tag, used, booked in calls if used > booked - _SLACK + 1024]
    assert not over, over
    assert sum(used for _, used, _ in calls) > 0            # the hooks did see the kernels


def test_host_paths_never_touch_device_memory(block, monkeypatch):
    """After a downgrade a table's host stages read host copies only: the openings of a
    downgraded table must not gather on the device (a DeviceOOM there escaped every
    recovery site and failed the proof).  Every table is downgraded at r4.deep, and the
    device has no room for any gather."""
    from steadfast.kernels.backend import DeviceOOM
    from steadfast.prover.device.engines import EmuEngine

    def no_room(self, *a, **k):
        raise DeviceOOM(64, 0, None, "scratch gather (no room)")
    for name in ("gather_columns", "gather_rows"):
        monkeypatch.setattr(EmuEngine, name, no_room)
    # (and the join at its first r4.fri site: then nothing is opened on the device)
    proof, stats = _run(block, backend="emu", faults=parse_faults("oom@r4.deep:1,oom@r4.fri:1"))
    assert proof == block[3]
    c = stats.counters.as_dict()
    assert c["r4.deep"]["downgrades"] == len(stats.tables)
    assert c["r4.fri"]["downgrades"] == 1 and stats.join.downgraded
    # the downgraded tables' openings downloaded what they read, counted at r4.open
    assert c["r4.open"]["host_materialisations"] > 0
    assert c["r4.open"]["retries"] == c["r4.open"]["downgrades"] == 0


@pytest.mark.parametrize("case", ["fib-6-b1", "fib-8-b2", "cubic5-7-b1", "cubic3-9-b3"])
def test_estimate_bounds_one_tables_booked_peak_on_emu(case, monkeypatch):
    """Admission's per-table estimate (estimate_bytes) bounds what the ledger books for
    that table at its peak: a one-table statement on emu (every buffer booked, no other
    table), for a few heights, widths and blowups.  The pool-accurate counterpart on the
    cuda stand-in (numba's allocations, 512-byte units, shared tables) is in
    tests/test_cuda_paths.py."""
    import dataclasses

    import steadfast.prover.device.pipeline as pl
    kind, log_n, blow = case.split("-")
    log_n, log_blowup = int(log_n), int(blow[1:])
    if kind == "fib":
        air, (trace, pv) = ex.fibonacci_air(), ex.fibonacci_trace(log_n)
    else:
        width = int(kind[len("cubic"):])
        air, (trace, pv) = ex.cubic_air(width), ex.cubic_trace(log_n, width)
    params = dataclasses.replace(FAST, log_blowup=log_blowup)
    st = _statement([air], [trace], [pv], params)
    monkeypatch.setattr(pl, "_MEMORIES", {})            # a fresh ledger for this proof
    proof, stats = run_pipeline(st, PipelineConfig(backend="emu", workers=1))
    assert proof == prove([trace], [air], [pv], params)
    est = estimate_bytes(st.shapes[0], params.num_queries)
    assert stats.tables[st.shapes[0].name].est_bytes == est        # what admission used
    assert est <= estimate_bytes(st.shapes[0])
    # the table's chain and openings, plus the join (booked separately, estimate_join_bytes)
    assert 0 < stats.peak_device_bytes <= est + stats.join.est_bytes
    assert stats.join.est_bytes == pl.estimate_join_bytes(st.shapes, params)


# ------------------------------------------------------------------ the join (format 3)

def test_join_oom_downgrades_the_rest_of_the_fri_once_and_stays_identical(block):
    """oom@r4.fri: the join (pseudo-table <join>) retries once, then moves the rest of the
    FRI to the host -- counted once at r4.fri; the tables' chains are untouched."""
    proof, stats = _run(block, backend="emu", faults=parse_faults("oom@r4.fri:1"))
    assert proof == block[3]
    c = stats.counters.as_dict()
    assert c["r4.fri"]["retries"] == 1 and c["r4.fri"]["downgrades"] == 1
    assert stats.join.downgraded and not any(t.downgraded for t in stats.tables.values())
    assert all(c[s]["downgrades"] == 0 for s in SITES if s not in ("r4.fri", "r4.open"))


def test_join_with_host_dqs_uploads_them_and_stays_on_the_device(block):
    # every table downgraded at its DQ: the join combines host DQs on the device
    proof, stats = _run(block, backend="emu", faults=parse_faults("oom@r4.deep:1"))
    assert proof == block[3]
    c = stats.counters.as_dict()
    assert c["r4.deep"]["downgrades"] == 3
    assert c["r4.fri"]["retries"] == c["r4.fri"]["downgrades"] == 0 and not stats.join.downgraded


def test_openings_oom_everywhere_recovers_identically(block):
    proof, stats = _run(block, backend="emu", faults=parse_faults("oom@r4.open:1"))
    assert proof == block[3]
    c = stats.counters.as_dict()
    assert c["r4.open"]["downgrades"] >= 3            # each table (and the join) once


def test_join_admission_spills_idle_tables_under_a_tight_budget(block):
    """Every chain keeps its trees and DQ resident; a budget that holds one table's
    estimate but not the join on top of the resident tables spills idle tables to the
    host, and the openings read the spilled copies: same bytes, no recovery."""
    from steadfast.prover.device.pipeline import estimate_join_bytes
    airs, traces, pvs, ref = block
    st = _statement(airs, traces, pvs)
    budget = max(max(estimate_bytes(s, FAST.num_queries) for s in st.shapes),
                 estimate_join_bytes(st.shapes, FAST)) + 1000
    proof, stats = run_pipeline(st, PipelineConfig(backend="emu", budget=budget))
    assert proof == ref
    assert stats.spilled_bytes > 0
    assert stats.counters.total() == 0 or all(
        v["downgrades"] == 0 for v in stats.counters.as_dict().values())


def test_join_corruption_never_ends_in_a_wrong_proof(block):
    """corrupt@r4.fri without XCHECK: a wrong F_h or layer makes the final polynomial's
    degree check refuse it (typed DeviceResultError), never a proof; corrupt@r4.open
    changes an opened row: the proof's bytes differ and the verifier rejects them (the
    self-check's job, tests/test_cli_device.py)."""
    from steadfast.prover.device.stages import DeviceResultError
    from steadfast.verifier.errors import VerificationError
    from steadfast.verifier.verify import verify
    from steadfast import SteadfastError
    with pytest.raises(DeviceResultError) as err:
        _run(block, backend="emu", faults=parse_faults("corrupt@r4.fri:1,seed=2"))
    assert isinstance(err.value, SteadfastError) and err.value.check == "final polynomial"
    proof, _ = _run(block, backend="emu", faults=parse_faults("corrupt@r4.open:1,seed=2"))
    assert proof != block[3]
    airs, _, pvs, _ = block
    with pytest.raises(VerificationError):
        verify(proof, airs, pvs, min_security_bits=0)


@pytest.mark.parametrize("log_fri_arity,log_cap,log_blowup", [(1, 0, 1), (3, 3, 1), (4, 8, 2),
                                                              (2, 1, 3)])
def test_join_parameters_identical_on_emu(block, log_fri_arity, log_cap, log_blowup,
                                         monkeypatch):
    """Arity 2..16, caps from the root to whole levels, blowups 2..8 (mixed table
    heights: roll-ins): the device stages' layer widths, caps and multiproofs give the
    host's bytes."""
    import dataclasses
    import steadfast.prover.device.pipeline as pl
    monkeypatch.setattr(pl, "_MEMORIES", {})     # a fresh memory: no earlier stale frees
    airs, traces, pvs, _ = block
    params = dataclasses.replace(FAST, log_fri_arity=log_fri_arity, log_cap=log_cap,
                                 log_blowup=log_blowup)
    ref = prove(traces, airs, pvs, params)
    proof, stats = run_pipeline(_statement(airs, traces, pvs, params), PipelineConfig(backend="emu"))
    assert proof == ref
    _assert_happy_path(stats)


@pytest.mark.timeout(900)
def test_sim_join_arity8_with_caps_identical():
    """The join's kernels (mu-combine, arity-8 fold with roll-in, node gathers, caps)
    under the simulator: the tiny block (heights 2^4 and 2^5) at arity 8, cap height 1."""
    import dataclasses
    airs, traces, pvs, _ = tiny_lookup_block()
    params = dataclasses.replace(FAST, log_fri_arity=3, log_cap=1)
    ref = prove(traces, airs, pvs, params)
    proof, stats = run_pipeline(_statement(airs, traces, pvs, params), PipelineConfig(backend="sim"))
    assert proof == ref
    _assert_happy_path(stats)


def test_tables_downgraded_at_r1_do_not_downgrade_the_join(block):
    """A table downgraded at its first commit has host trees; the join opens them on the
    host without charging a recovery event to the join, which stays on the device."""
    proof, stats = _run(block, backend="emu", faults=parse_faults("oom@r1.main:1"))
    assert proof == block[3]
    c = stats.counters.as_dict()
    assert c["r1.main"]["downgrades"] == 3
    assert c["r4.fri"] == {"retries": 0, "downgrades": 0, "host_materialisations": 0}
    assert c["r4.open"]["retries"] == c["r4.open"]["downgrades"] == 0
    assert not stats.join.downgraded
