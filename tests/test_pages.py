"""A proof's buffers on ordinary pages (prover/core/pages.py): numpy's huge-page advice is
paused while a proof runs and the caller's setting comes back afterwards; nested and
concurrent proofs count their entries; ``STEADFAST_HUGEPAGES=numpy`` leaves the advice
alone; any other value is refused by name; the bytes do not depend on it."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from contextlib import contextmanager

import pytest

from steadfast.air import examples as ex
from steadfast.prover import Params, Spans, prove
from steadfast.prover.api import ConfigError, Prover, ProverConfig
from steadfast.prover.core import pages

FAST = Params(log_blowup=1, num_queries=8, pow_bits=2)
get, put = pages._switch()


@pytest.fixture(autouse=True)
def _restore(monkeypatch):
    monkeypatch.delenv("STEADFAST_HUGEPAGES", raising=False)
    before = get()
    yield
    put(before)
    assert pages._depth == 0


class _Seen(Spans):
    """Spans that record numpy's advice at every stage of the proof."""

    def __init__(self):
        super().__init__()
        self.seen = set()

    @contextmanager
    def span(self, name, table=None):
        self.seen.add(bool(get()))
        with super().span(name, table):
            yield


@pytest.mark.parametrize("caller", [True, False])
def test_paused_within_restored_after(caller):
    put(caller)
    with pages.small_pages():
        assert not get()
        with pages.small_pages():                 # nested: still off, one restore
            assert not get()
        assert not get()
    assert bool(get()) is caller


def test_a_proof_runs_without_the_advice_and_bytes_agree(monkeypatch):
    put(True)
    t, pv = ex.fibonacci_trace(4, 3, 4)
    spans = _Seen()
    off = prove([t], [ex.fibonacci_air()], [pv], FAST, spans=spans)
    assert spans.seen == {False}
    assert get()                                   # the caller's setting back
    monkeypatch.setenv("STEADFAST_HUGEPAGES", "numpy")
    spans = _Seen()
    kept = prove([t], [ex.fibonacci_air()], [pv], FAST, spans=spans)
    assert spans.seen == {True}                    # left alone
    assert kept == off


def test_concurrent_entries_restore_once():
    put(True)
    inside, release = threading.Barrier(3), threading.Event()

    def worker():
        with pages.small_pages():
            inside.wait()
            release.wait()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for th in threads:
        th.start()
    inside.wait()
    assert not get() and pages._depth == 2
    release.set()
    for th in threads:
        th.join()
    assert get() and pages._depth == 0


def test_a_bad_value_is_refused_by_name(monkeypatch):
    monkeypatch.setenv("STEADFAST_HUGEPAGES", "always")
    with pytest.raises(ConfigError, match="STEADFAST_HUGEPAGES must be 'off' or 'numpy'"):
        Prover(ProverConfig())
    with pytest.raises(ConfigError, match="STEADFAST_HUGEPAGES"):
        with pages.small_pages():
            pass


def test_the_command_line_refuses_a_bad_value(tmp_path):
    env = dict(os.environ, STEADFAST_HUGEPAGES="bad")
    out = subprocess.run([sys.executable, "-m", "steadfast.prover", "prove", "examples/block.json",
                          "-o", str(tmp_path / "x.proof"), "-q"],
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr
    assert "STEADFAST_HUGEPAGES must be 'off' or 'numpy', got 'bad'" in out.stderr
    assert "Traceback" not in out.stderr and "internal error" not in out.stderr
    assert not (tmp_path / "x.proof").exists()
