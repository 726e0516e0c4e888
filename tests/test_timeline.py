"""prover/common/timeline.py's public merge (cluster mode: a worker's events onto the
coordinator's trace, through public methods only)."""
from __future__ import annotations

import time

from steadfast.prover.common.timeline import Timeline


def test_merge_shifts_names_once_and_tags():
    worker = Timeline()
    with worker.span("r2", "cpu"):
        pass
    worker.instant("retry", "cpu", site="r2")
    events = worker.to_json()["traceEvents"]
    coord = Timeline()
    start = time.perf_counter()
    coord.merge(events, pid=3, start=start, process="worker 1", piece="prove:0")
    coord.merge(events, pid=3, start=start, process="worker 1", piece="prove:1")
    coord.merge([], pid=4, start=start, process="worker 2")       # nothing: no name either
    out = coord.to_json()["traceEvents"]
    names = [e for e in out if e.get("name") == "process_name"]
    assert names == [{"ph": "M", "name": "process_name", "pid": 3, "args": {"name": "worker 1"}}]
    timed = [e for e in out if "ts" in e]
    assert len(timed) == 4 and all(e["pid"] == 3 for e in timed)
    shift = coord._us(start)
    src = [e for e in events if "ts" in e]
    assert [e["ts"] for e in timed[:2]] == [round(e["ts"] + shift, 1) for e in src]
    assert [e["args"]["piece"] for e in timed] == ["prove:0", "prove:0", "prove:1", "prove:1"]
    assert timed[0]["args"]["table"] == "cpu" and timed[1]["args"]["site"] == "r2"
    assert all("piece" not in e.get("args", {}) for e in events)   # the source is untouched
    off = Timeline(enabled=False)
    off.merge(events, pid=3, start=start, process="worker 1")
    assert off.to_json()["traceEvents"] == []
