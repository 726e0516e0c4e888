"""Progress of a running proof, for ``prove`` (prover/cli/__init__.py).

Two renderers of the same callback ``progress(table, stage, event, seconds)`` (the
``Prover(progress=...)`` hook; ``table`` is None for the stages of the whole proof, such as
execute: shown on a row named for what is proved, ``block`` or ``program``):

* :class:`LineProgress` -- one plain line per finished stage, for logs, CI, pipes:
  ``[   1.23s] cpu        r2_quotient     0.41s   12/40`` (elapsed since start, table,
  stage, its seconds, table-rounds done of tables x rounds).  No escape codes, no redraw.
* :class:`LiveProgress` -- a live terminal display drawn with ``rich`` (only on a TTY):
  one row per table with a bar of its rounds and the stage running now, a ``block`` (or
  ``program``) row for the whole proof's stages, and a last ``overall`` row: table-rounds
  done of tables x rounds, the elapsed time and an estimate of the time left (80 columns
  suffice).
  rich does the drawing, terminal width, redraw in place, and keeps lines written to
  stderr while the display is up (warnings, log records) above it; stdout is left alone
  (it may be a pipe).  A ``TERM=dumb`` terminal gets the plain lines.

The time-left estimate is ours, not rich's ``TimeRemainingColumn``: rich's speed is taken
between the first and the last completion and so freezes while a long round runs; here
the rounds left are charged at the average pace since the first round started, up to now,
so the estimate grows while a round stalls (``Board.time_left``).
"""
from __future__ import annotations

import sys
import threading
import time
from typing import Callable, TextIO

# the per-table protocol rounds the overall progress counts (tables x rounds)
ROUNDS = ("r1_main", "r1_aux", "r2_quotient", "r3_ood", "r4_deep", "r4_fri", "r4_pow", "r4_open")


class Board:
    """What has run: per row (a table, or ``whole`` -- "block" or "program", what is
    proved -- for the whole proof's stages) the current stage, when it started (None once
    done) and its seconds; the table-rounds done."""

    def __init__(self, tables: int = 5, clock: Callable[[], float] = time.perf_counter,
                 whole: str = "block"):
        self.clock = clock
        self.whole = whole
        self.n_tables = tables                # at least; a proof may show more rows
        self.done: set = set()
        self.t0 = clock()
        self.t_first: float | None = None     # when the first protocol round started
        self.state: dict = {}                 # row -> (stage, started or None, seconds)
        self.order: list = []
        self.lock = threading.Lock()
        self.seg: tuple | None = None         # (done, total or None, cut): segmented proofs
        self.seg_t0 = 0.0
        self.part: tuple | None = None        # (done, total): a block proved in epochs

    def record(self, table: str | None, stage: str, event: str, seconds: float) -> tuple[str, str]:
        """Book one event (call under ``self.lock``); returns (row, stage) as displayed."""
        row = table or self.whole
        stage = "all stages" if stage == "table" else stage
        if row not in self.state:
            self.order.append(row)
        if event == "start":
            now = self.clock()
            self.state[row] = (stage, now, 0.0)
            if self.t_first is None and stage in ROUNDS:
                self.t_first = now
        else:
            self.state[row] = (stage, None, seconds)
            if stage in ROUNDS:
                # a per-table round; or a whole-proof span of a round (one FRI for all
                # tables, protocol v3): that round is done for every table
                for t in ([table] if table is not None else self.tables()):
                    self.done.add((t, stage))
        return row, stage

    @property
    def total_rounds(self) -> int:
        """tables x rounds: the tables announced, or the rows seen if more (a program
        whose chips split over two tables has up to 27)."""
        return max(self.n_tables, len(self.tables())) * len(ROUNDS)

    def tables(self) -> list:
        """The table rows so far, in the order they appeared."""
        return [r for r in self.order if r != self.whole]

    def segment(self, done: int, total: int | None, cut: int) -> None:
        """A segmented proof (call under ``self.lock``): ``done`` segments proved of
        ``total`` (None while the execution is still cutting: ``cut`` so far); the
        table-rounds count again from zero for the next segment."""
        now = self.clock()
        if self.seg is None:
            self.seg_t0 = now
        self.seg = (done, total, cut)
        self.done.clear()
        self.t_first = None

    def set_part(self, done: int, total: int) -> None:
        """A block in epochs (call under ``self.lock``): ``done`` parts proved of
        ``total``; the next part's table-rounds (or segments) count from zero."""
        self.part = (done, total)
        self.seg = None
        self.done.clear()
        self.t_first = None

    def part_text(self) -> str:
        if self.part is None:
            return ""
        done, total = self.part
        return f"part {min(done + 1, total):,}/{total:,}"

    def segment_text(self) -> str:
        if self.seg is None:
            return ""
        done, total, cut = self.seg
        of = f"{total:,}" if total is not None else f">={cut:,}"
        return f"segment {min(done + 1, total or done + 1):,}/{of}"

    def rounds_of(self, row: str) -> int:
        return sum(1 for t, _ in self.done if t == row)

    def time_left(self, now: float) -> float | None:
        """Rounds left at the average pace since the first round started (None before the
        first round is done, 0 when all are); for a segmented proof, the segments left
        (the current one by its rounds done) at the average pace since the first began
        (None until the execution has ended and one round is done)."""
        k, n = len(self.done), self.total_rounds
        if self.seg is not None:
            done, total, _ = self.seg
            if total is None:
                return None
            part = done + k / n
            if part <= 0:
                return None
            return max(0.0, (now - self.seg_t0) * (total - part) / part)
        if k >= n:
            return 0.0
        if k == 0 or self.t_first is None:
            return None
        return (now - self.t_first) * (n - k) / k

    def overall(self, now: float) -> str:
        """``12/40 table-rounds (30%), 4.1s elapsed, ~9s left`` (fits 80 columns with the
        bar: ``1m52s``, ``1h13m`` past a minute, an hour)."""
        k, n = len(self.done), self.total_rounds
        text = f"{k}/{n} table-rounds ({100 * k // n}%), {duration(now - self.t0, 1)} elapsed"
        where = ", ".join(t for t in (self.part_text(), self.segment_text()) if t)
        if where:
            text = f"{where}, {text}"
        left = self.time_left(now)
        if left is not None and (k < n or self.seg is not None):
            text += f", ~{duration(left)} left"
        return text


def duration(seconds: float, digits: int = 0) -> str:
    """``9s`` / ``4.1s`` (``digits``) under a minute, ``1m52s`` under an hour, else ``1h13m``."""
    if seconds < 60:
        return f"{seconds:.{digits}f}s"
    s = int(seconds)
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class LineProgress:
    """Plain log lines, one per finished stage (deterministic layout, no escape codes)."""

    live = False

    def __init__(self, stream: TextIO | None = None, tables: int = 5,
                 clock: Callable[[], float] = time.perf_counter, whole: str = "block"):
        self.board = Board(tables, clock, whole)
        self.stream = stream if stream is not None else sys.stderr

    def __call__(self, table, stage, event, seconds):
        b = self.board
        with b.lock:
            row, stage = b.record(table, stage, event, seconds)
            if event != "start":
                self.stream.write(f"[{b.clock() - b.t0:8.2f}s] {row:<10} {stage:<12} "
                                  f"{seconds:7.2f}s   {len(b.done)}/{b.total_rounds}\n")
                self.stream.flush()

    def segments(self, done: int, total: int | None, cut: int, seconds: float) -> None:
        """A segmented proof's progress (prover/programs/segment_prover.py): one line per proved
        segment, with the estimate."""
        b = self.board
        with b.lock:
            b.segment(done, total, cut)
            if done:
                of = f"{total:,}" if total is not None else f">={cut:,}"
                left = b.time_left(b.clock())
                self.stream.write(f"[{b.clock() - b.t0:8.2f}s] segment {done:,}/{of} proved "
                                  f"{seconds:7.2f}s" + (f"   ~{duration(left)} left"
                                                        if left is not None else "") + "\n")
                self.stream.flush()

    def parts(self, done: int, total: int, seconds: float, name: str) -> None:
        """A block in epochs (prover/blocks/epoch_prover.py): one line per proved part."""
        b = self.board
        with b.lock:
            b.set_part(done, total)
            if done:
                self.stream.write(f"[{b.clock() - b.t0:8.2f}s] part {done:,}/{total:,} "
                                  f"proved {seconds:7.2f}s: {name}\n")
                self.stream.flush()

    def close(self):
        pass


class LiveProgress:
    """The live display (rich).  Started by the first event (nothing is drawn for a run
    that never proves, e.g. ``--precompile``); :meth:`close` draws the final frame and
    leaves it on the screen."""

    live = True

    def __init__(self, stream: TextIO | None = None, tables: int = 5,
                 clock: Callable[[], float] = time.perf_counter, whole: str = "block", *,
                 console=None, refresh_per_second: float = 4):
        from rich.console import Console
        from rich.progress import BarColumn, Progress, ProgressColumn
        from rich.text import Text

        self.board = board = Board(tables, clock, whole)
        self.stream = stream if stream is not None else sys.stderr
        if console is None:
            console = Console(file=self.stream, highlight=False)

        class _Bar(BarColumn):
            def render(self, task):
                return Text("") if task.fields.get("kind") == "whole" else super().render(task)

        class _Count(ProgressColumn):
            def render(self, task):
                if task.fields.get("kind") == "whole":
                    return Text("")
                w = len(str(board.total_rounds))
                return Text(f"{int(task.completed):>{w}}/{int(task.total):<{w}}")

        class _Status(ProgressColumn):
            """The stage running or done (tables, the whole proof); the overall time
            line."""

            def render(self, task):
                now = board.clock()
                if task.fields.get("kind") == "overall":
                    text = board.overall(now).replace(
                        f"{len(board.done)}/{board.total_rounds} ", "", 1)
                    return Text(text, style="bold")
                stage, started, secs = board.state.get(task.description, ("", None, 0.0))
                if started is not None:
                    return Text(f"{stage:<12} running {now - started:6.1f}s", style="cyan")
                return Text(f"{stage:<12} done    {secs:6.2f}s", style="dim")

        class _Board(Progress):
            def get_renderables(self_):
                # tables in the order they appeared, the overall row last
                tasks = sorted(self_.tasks, key=lambda t: t.fields.get("kind") == "overall")
                yield self_.make_tasks_table(tasks)

        self.progress = _Board("{task.description:<10}", _Bar(bar_width=14), _Count(), _Status(),
                               console=console, get_time=clock,
                               refresh_per_second=refresh_per_second,
                               redirect_stdout=False)   # stdout stays the caller's data
        self._tasks: dict = {}
        self._overall = self.progress.add_task("overall", total=board.total_rounds,
                                               kind="overall")
        self._started = False
        self._closed = False

    def __call__(self, table, stage, event, seconds):
        b = self.board
        with b.lock:
            if self._closed:
                return
            row, _ = b.record(table, stage, event, seconds)
            if row not in self._tasks:
                kind = "whole" if table is None else "table"
                self._tasks[row] = self.progress.add_task(row, total=len(ROUNDS), kind=kind)
            for r in ([row] if table is not None else b.tables()):
                self.progress.update(self._tasks[r], completed=b.rounds_of(r))
            self.progress.update(self._overall, completed=len(b.done), total=b.total_rounds)
            if not self._started:
                self._started = True
                self.progress.start()

    def segments(self, done: int, total: int | None, cut: int, seconds: float) -> None:
        """A segmented proof's progress: the overall row shows segment done / total and
        the time left; the table rows start again for the next segment."""
        b = self.board
        with b.lock:
            if self._closed:
                return
            b.segment(done, total, cut)
            for r, task in self._tasks.items():
                self.progress.update(task, completed=0)
            self.progress.update(self._overall, completed=0)

    def parts(self, done: int, total: int, seconds: float, name: str) -> None:
        """A block in epochs: the overall row shows part done / total; the table rows
        start again for the next part."""
        b = self.board
        with b.lock:
            if self._closed:
                return
            b.set_part(done, total)
            for r, task in self._tasks.items():
                self.progress.update(task, completed=0)
            self.progress.update(self._overall, completed=0)

    def renderable(self):
        """The current frame (what the terminal shows), for tests and for print."""
        from rich.console import Group
        return Group(*self.progress.get_renderables())

    def close(self):
        with self.board.lock:
            if self._closed:
                return
            self._closed = True
            started = self._started
        if started:
            self.progress.stop()


def make_progress(live: bool, stream: TextIO | None = None, tables: int = 5,
                  whole: str = "block"):
    """The live display when ``live`` (stderr is a terminal) and the terminal can redraw
    (rich: not ``TERM=dumb``/``unknown``, where a live display would show nothing until
    the end), plain lines otherwise; ``whole``: the row of the whole proof's stages, what
    is proved (``block`` or ``program``)."""
    if live:
        try:
            p = LiveProgress(stream, tables, whole=whole)
        except ImportError:      # rich is a dependency; a stripped install still gets lines
            p = None
        con = p.progress.console if p is not None else None
        if con is not None and con.is_terminal and not con.is_dumb_terminal:
            return p
    return LineProgress(stream, tables, whole=whole)
