"""The prover's progress on the command line: rich's live display (a row per table,
redrawn in place, the overall table-rounds and the time left, 80 columns), plain lines off
a terminal or under TERM=dumb, ``prove`` on a terminal (the cold-start line first) and the
installed ``prove`` under a real pseudo-terminal and in a pipe (split from
tests/test_cli.py; the proofs are of tests/txblocks.empty_block, two tables)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from steadfast.prover.cli import main_prove
from steadfast.prover.cli.display import ROUNDS
from steadfast.rv32 import block as rblock

from tests.txblocks import empty_block

FAST = ["--queries", "8", "--pow-bits", "2", "--backend", "host"]
EMPTY_ROUNDS = rblock.num_tables(0) * len(ROUNDS)          # 2 shared tables x 8 rounds


def write(tmp_path, name, obj):
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(p)


def _live(tables=5, whole="block"):
    """A LiveProgress on a fake clock, drawing to a recorded 100-column terminal."""
    import io
    from rich.console import Console
    from steadfast.prover.cli.display import LiveProgress
    clock = [100.0]
    term = io.StringIO()
    con = Console(file=term, width=100, force_terminal=True, color_system=None)
    return (LiveProgress(tables=tables, clock=lambda: clock[0], whole=whole, console=con),
            clock, term)


def _frame(p) -> list[str]:
    """The live display's current frame as plain text lines."""
    import io
    from rich.console import Console
    con = Console(file=io.StringIO(), width=100, color_system=None)
    con.print(p.renderable())
    return [l.rstrip() for l in con.file.getvalue().splitlines()]


def test_live_progress_display_redraws_per_table():
    """rich's live display: a row per table (its rounds' bar, k/8, the stage running or
    done), the whole-block stages on a block row, redrawn in place on the terminal."""
    p, clock, term = _live()
    p(None, "execute", "start", 0.0)
    clock[0] += 0.5
    p(None, "execute", "end", 0.5)
    p("cpu", "r1_main", "start", 0.0)
    p("range", "r1_main", "start", 0.0)
    clock[0] += 1.25
    p("cpu", "r1_main", "end", 1.25)
    clock[0] += 0.5
    rows = {l.split()[0]: l for l in _frame(p)}
    p.close()
    assert list(rows) == ["block", "cpu", "range", "overall"]     # overall last
    assert rows["block"].split()[1:] == ["execute", "done", "0.50s"]
    assert " 1/8 " in rows["cpu"] and rows["cpu"].endswith("r1_main      done      1.25s")
    assert " 0/8 " in rows["range"] and rows["range"].endswith("r1_main      running    1.8s")
    assert "1/40 table-rounds (2%), 2.2s elapsed" in rows["overall"]
    text = term.getvalue()
    assert "\x1b[1A\x1b[2K" in text                    # redrawn in place (cursor up, erase)
    assert "1/40 table-rounds" in text.rsplit("\x1b[2K", 1)[-1]   # the final frame stays


def test_live_progress_shows_overall_rounds_and_time_left():
    """The live display's last line counts table-rounds done of tables x rounds and, once
    one is done, estimates the time left at the average pace since the first round
    started, up to now (it grows while a round stalls); whole-proof spans and the
    per-table grinding are not counted rounds."""
    from steadfast.prover.cli.display import ROUNDS
    n = 2 * len(ROUNDS)
    p, clock, _ = _live(tables=2)
    assert p.board.overall(clock[0]).startswith(f"0/{n} table-rounds (0%)")
    p("cpu", "r1_main", "start", 0.0)
    clock[0] += 0.5
    p("cpu", "r1_main", "end", 0.5)
    p("cpu", "grind", "end", 0.1)                       # not a counted round
    p(None, "r1_pow", "end", 0.1)                       # a whole-proof span: not counted
    p("memory", "r1_main", "start", 0.0)
    clock[0] += 0.5
    p("memory", "r1_main", "end", 0.5)
    assert p.board.time_left(clock[0]) == 7.0          # 1 s for 2 rounds, 14 left
    assert _frame(p)[-1].endswith(f"2/{n} table-rounds (12%), 1.0s elapsed, ~7s left")
    clock[0] += 1.0                                      # a stall: the estimate grows
    assert "~14s left" in _frame(p)[-1]
    for t in ("cpu", "memory"):
        for r in ROUNDS[1:]:
            p(t, r, "end", 0.0)
    assert p.board.time_left(clock[0]) == 0.0
    assert _frame(p)[-1].endswith(f"{n}/{n} table-rounds (100%), 2.0s elapsed")
    # a whole-proof span of a round (v3: one FRI for all tables) completes it for each
    q, _, _ = _live(tables=2)
    for t in ("cpu", "memory"):
        for r in ROUNDS[:5]:
            q(t, r, "end", 0.0)
    assert len(q.board.done) == 10
    for r in ROUNDS[5:]:
        q(None, r, "end", 0.0)
    assert len(q.board.done) == n and q.board.rounds_of("cpu") == len(ROUNDS)
    rows = {l.split()[0]: l.split() for l in _frame(q)}
    assert (rows["cpu"][2], rows["memory"][2], rows["overall"][2]) == ("8/8", "8/8", f"{n}/{n}")
    q.close()
    p.close()
    p("cpu", "r1_main", "start", 0.0)                  # after close: ignored, no redraw


def test_live_display_fits_80_columns_and_long_times_read_as_minutes():
    """A long proof's overall row (hours left, minutes elapsed) still fits one 80-column
    line; durations past a minute read 1m52s, past an hour 1h13m."""
    from steadfast.prover.cli.display import duration
    assert [duration(x) for x in (7.4, 59.4, 60, 112.8, 3599, 3600, 4380.5)] == \
        ["7s", "59s", "1m00s", "1m52s", "59m59s", "1h00m", "1h13m"]
    assert duration(2.25, 1) == "2.2s"
    import io
    from rich.console import Console
    p, clock, _ = _live()
    p("cpu", "r1_main", "start", 0.0)
    p("program", "r1_main", "start", 0.0)
    clock[0] += 3599.0
    p("cpu", "r1_main", "end", 3599.0)
    clock[0] += 100.0
    con = Console(file=io.StringIO(), width=80, color_system=None)
    con.print(p.renderable())
    lines = con.file.getvalue().splitlines()
    p.close()
    assert [l.split()[0] for l in lines] == ["cpu", "program", "overall"]   # one line each
    assert lines[-1].rstrip().endswith("1/40 table-rounds (2%), 1h01m elapsed, ~40h04m left")   # 3699 s x 39
    assert "r1_main      running 3699.0s" in lines[1]


def test_plain_progress_lines_are_plain():
    """Off a terminal: one plain line per finished stage, no escape codes, ending k/40."""
    import io
    from steadfast.prover.cli.display import LineProgress, make_progress
    buf = io.StringIO()
    p = make_progress(False, stream=buf)
    assert isinstance(p, LineProgress)
    p("cpu", "r1_main", "start", 0.0)
    p("cpu", "r1_main", "end", 0.25)
    p(None, "execute", "end", 0.5)
    p.close()
    lines = buf.getvalue().splitlines()
    assert len(lines) == 2 and "\x1b" not in buf.getvalue()
    assert lines[0].split("]", 1)[1].split() == ["cpu", "r1_main", "0.25s", "1/40"]
    assert lines[1].split("]", 1)[1].split() == ["block", "execute", "0.50s", "1/40"]


def test_a_program_s_stages_are_labelled_a_program_s():
    """A program's whole-proof stages (execute, traces, the commitments, the grinding) on a
    ``program`` row, plain and live -- a block's on a ``block`` row."""
    import io
    from steadfast.prover.cli.display import make_progress
    buf = io.StringIO()
    p = make_progress(False, stream=buf, whole="program")
    p(None, "execute", "start", 0.0)
    p(None, "execute", "end", 0.5)
    p("rv32_alu", "r1_main", "end", 0.25)
    p(None, "commit_main", "end", 0.1)          # a whole-proof round: every table's
    p.close()
    rows = [l.split("]", 1)[1].split()[:2] for l in buf.getvalue().splitlines()]
    assert rows == [["program", "execute"], ["rv32_alu", "r1_main"],
                    ["program", "commit_main"]]
    live, clock, _ = _live(whole="program")
    live(None, "execute", "start", 0.0)
    clock[0] += 0.5
    live(None, "execute", "end", 0.5)
    live("rv32_alu", "r1_main", "end", 0.25)
    names = [l.split()[0] for l in _frame(live)]
    live.close()
    assert names == ["program", "rv32_alu", "overall"]


def test_prove_program_labels_its_stages_a_program_s(tmp_path, capsys):
    """``prove PROGRAM.elf`` off a terminal: the plain lines name the whole-proof row
    ``program``, never ``block`` (``prove BLOCK.json``'s: tests/test_cli_prove.py)."""
    import shutil
    from pathlib import Path
    elf = tmp_path / "hello.elf"
    shutil.copy(Path(__file__).resolve().parents[1] / "examples" / "hello.elf", elf)
    code = main_prove([str(elf), "-o", str(tmp_path / "h.proof")] + FAST)
    _, err = capsys.readouterr()
    assert code == 0 and "Traceback" not in err
    rows = [l.split("]", 1)[1].split()[0] for l in err.splitlines() if l.startswith("[")]
    assert "program" in rows and "block" not in rows
    assert rows[0] == "program" and "rv32_alu" in rows
    whole = [l.split("]", 1)[1].split()[1] for l in err.splitlines()
             if l.startswith("[") and l.split("]", 1)[1].split()[0] == "program"]
    assert whole[:2] == ["execute", "traces"]


class _TTY:
    """A text stream that says it is a terminal (what prove checks before going live)."""

    def __init__(self):
        import io
        self.buf = io.StringIO()

    def write(self, s):
        return self.buf.write(s)

    def flush(self):
        pass

    def isatty(self):
        return True

    def fileno(self):
        raise OSError("not a real terminal")


def test_live_only_where_the_terminal_can_redraw(monkeypatch):
    """A terminal gets the live display; TERM=dumb (which rich would not redraw, showing
    nothing until the end) and a non-terminal get plain lines."""
    from steadfast.prover.cli.display import LineProgress, LiveProgress, make_progress
    monkeypatch.setenv("TERM", "xterm-256color")
    assert isinstance(make_progress(True, stream=_TTY()), LiveProgress)
    assert isinstance(make_progress(False, stream=_TTY()), LineProgress)
    monkeypatch.setenv("TERM", "dumb")
    assert isinstance(make_progress(True, stream=_TTY()), LineProgress)


def test_prove_on_a_terminal_is_live_and_announces_the_cold_start(tmp_path, monkeypatch,
                                                                   capsys):
    """stderr a terminal: the cold-start line, then rich's live display (redrawn in place,
    ending at 16/16 for the empty block's two tables); the summary on stdout as off a terminal."""
    from steadfast.prover import cli
    monkeypatch.setattr(cli, "_host_kernels_cached", lambda: False)
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("NO_COLOR", raising=False)
    tty = _TTY()
    monkeypatch.setattr(sys, "stderr", tty)
    blk = write(tmp_path, "empty.json", empty_block().to_json())
    code = main_prove([blk, "-o", str(tmp_path / "e.proof")] + FAST)
    monkeypatch.undo()
    out, _ = capsys.readouterr()
    err = tty.buf.getvalue()
    assert code == 0 and "Traceback" not in err
    assert err.index("compiling the host kernels") < err.index("\x1b[")   # before the display
    assert "\x1b[1A\x1b[2K" in err and f"{EMPTY_ROUNDS}/{EMPTY_ROUNDS}" in err
    assert "table-rounds (100%)" in err
    assert not any(l.startswith("[") and l.endswith(f"/{EMPTY_ROUNDS}")
               for l in err.splitlines())
    assert "wrote" in out and "rounds:" in out


def test_installed_prove_on_a_pty_and_in_a_pipe(tmp_path):
    """The installed ``prove`` under a real pseudo-terminal draws the live display; the same
    command with stderr piped writes plain lines (no escape codes)."""
    import pty
    import threading
    prove = os.path.join(os.path.dirname(sys.executable), "prove")
    if not os.path.exists(prove):
        pytest.skip("console scripts not installed beside this interpreter")
    blk = write(tmp_path, "empty.json", empty_block().to_json())
    argv = [prove, blk, "-o", str(tmp_path / "e.proof")] + FAST
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="100")
    env.pop("NO_COLOR", None)
    master, slave = pty.openpty()
    chunks = []

    def drain():                                        # a full pty would block the child
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=slave, env=env, timeout=300)
    finally:
        os.close(slave)
        reader.join(timeout=30)
        os.close(master)
    err = b"".join(chunks).decode(errors="replace")
    assert r.returncode == 0 and "Traceback" not in err, err[-2000:]
    assert "\x1b[" in err and "overall" in err and f"{EMPTY_ROUNDS}/{EMPTY_ROUNDS}" in err
    assert b"wrote" in r.stdout
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and "\x1b" not in r.stderr
    assert any(l.startswith("[") and l.endswith(f" {EMPTY_ROUNDS}/{EMPTY_ROUNDS}")
               for l in r.stderr.splitlines())
