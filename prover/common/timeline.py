"""A Chrome/Perfetto trace of a proof (``prove --timeline FILE``).

Every table's stages become complete events ("ph": "X") on the thread of the worker that
ran them; retries, downgrades and XCHECK verdicts are instant events ("ph": "i"); waits
for the R2 lock and for admission are complete events named ``wait:...``.  The file is the
JSON object format ``{"traceEvents": [...], "displayTimeUnit": "ms"}`` that
chrome://tracing and ui.perfetto.dev open directly.  :meth:`Timeline.merge` adds another
process's events (cluster mode: each worker's, as process "worker W").
"""
from __future__ import annotations

import json
import os
import threading
import time
from contextlib import contextmanager


class Timeline:
    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self._t0 = time.perf_counter()
        self._lock = threading.Lock()
        self.events: list[dict] = []
        self._tids: dict[int, int] = {}
        self._named: set[int] = set()       # pids named by merge()

    def _tid(self) -> int:
        ident = threading.get_ident()
        with self._lock:
            if ident not in self._tids:
                self._tids[ident] = len(self._tids)
                self.events.append({"ph": "M", "name": "thread_name", "pid": 1,
                                    "tid": self._tids[ident],
                                    "args": {"name": threading.current_thread().name}})
            return self._tids[ident]

    def _us(self, t: float) -> float:
        return round((t - self._t0) * 1e6, 1)

    @contextmanager
    def span(self, name: str, table: str | None = None, cat: str = "stage", **args):
        if not self.enabled:
            yield
            return
        start = time.perf_counter()
        try:
            yield
        finally:
            end = time.perf_counter()
            ev = {"ph": "X", "name": name, "cat": cat, "pid": 1, "tid": self._tid(),
                  "ts": self._us(start), "dur": round((end - start) * 1e6, 1),
                  "args": dict(args, **({"table": table} if table else {}))}
            with self._lock:
                self.events.append(ev)

    def complete(self, name: str, start: float, end: float, table: str | None = None,
                 cat: str = "stage", **args) -> None:
        if not self.enabled:
            return
        ev = {"ph": "X", "name": name, "cat": cat, "pid": 1, "tid": self._tid(),
              "ts": self._us(start), "dur": round((end - start) * 1e6, 1),
              "args": dict(args, **({"table": table} if table else {}))}
        with self._lock:
            self.events.append(ev)

    def instant(self, name: str, table: str | None = None, cat: str = "recovery", **args):
        if not self.enabled:
            return
        ev = {"ph": "i", "s": "t", "name": name, "cat": cat, "pid": 1, "tid": self._tid(),
              "ts": self._us(time.perf_counter()),
              "args": dict(args, **({"table": table} if table else {}))}
        with self._lock:
            self.events.append(ev)

    def merge(self, events, *, pid: int, start: float, process: str | None = None,
              **args) -> None:
        """Add events another process recorded (its Timeline's ``to_json()["traceEvents"]``)
        as process ``pid`` of this trace: their clock shifted so that their zero is
        ``start`` (a ``time.perf_counter()`` of this process), ``args`` added to each
        event's args, and -- the first time ``pid`` comes with events -- a ``process_name``
        event calling it ``process``."""
        if not self.enabled or not events:
            return
        base = self._us(start)
        out = []
        with self._lock:
            if process is not None and pid not in self._named:
                self._named.add(pid)
                out.append({"ph": "M", "name": "process_name", "pid": pid,
                            "args": {"name": process}})
            for ev in events:
                ev = dict(ev, pid=pid)
                if "ts" in ev:
                    ev["ts"] = round(ev["ts"] + base, 1)
                ev["args"] = dict(ev.get("args", {}), **args)
                out.append(ev)
            self.events.extend(out)

    def to_json(self) -> dict:
        with self._lock:
            return {"traceEvents": list(self.events), "displayTimeUnit": "ms"}

    def write(self, path: str) -> None:
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(self.to_json(), f)
        os.replace(tmp, path)
