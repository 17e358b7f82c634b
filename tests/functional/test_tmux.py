"""`rooftui` in a real terminal: tmux runs it detached at 80×24 and at 200×50, the test
types keys and reads the screen back with capture-pane. Skipped when tmux is missing
(`.ci/run` installs it; `apt-get install tmux` does here)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_tui_support import sweep_point, write_results_dir

from rooftui.core import units

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.skipif(shutil.which("tmux") is None,
                       reason="tmux is not installed (apt-get install tmux; .ci/run does)"),
]


def rooftui_command(*args: str) -> list[str]:
    """The installed console script next to this Python, else the module."""
    script = Path(sys.executable).with_name("rooftui")
    if script.exists():
        return [str(script), *args]
    return [sys.executable, "-m", "rooftui.tui.app", *args]


class Terminal:
    """One tmux server of our own (its own socket, no user config) running one command."""

    def __init__(self, size: tuple[int, int], command: list[str], cwd: Path,
                 env: dict[str, str] | None = None) -> None:
        self.socket = f"rooftui-test-{os.getpid()}-{size[0]}x{size[1]}"
        width, height = size
        environment = {"TERM": "screen-256color", "COLORTERM": "", **(env or {})}
        # the pane stays open after the program ends, showing its exit status
        shell_command = (" ".join(shlex.quote(part) for part in command)
                         + '; echo "exit status $?"; sleep 600')
        # the window gets its size once created: start a placeholder, then run the
        # program in the sized pane (started directly, it may see tmux's default 80×24
        # and miss the resize that follows)
        self._tmux("-f", "/dev/null", "new-session", "-d", "-s", "main", "-x", str(width),
                   "-y", str(height), "-c", str(cwd), "sleep 600")
        # COLUMNS and LINES would override the pane's size; pytest's process may have
        # them (importing readline exports them), and tmux passes its environment on
        self.socket_path = Path(self._tmux("display-message", "-p", "-t", "main",
                                           "#{socket_path}").stdout.strip())
        assignments = " ".join(f"{key}={shlex.quote(value)}"
                               for key, value in environment.items())
        self._tmux("respawn-pane", "-k", "-t", "main", "-c", str(cwd),
                   f"env -u COLUMNS -u LINES {assignments} sh -c "
                   + shlex.quote(shell_command))

    def _tmux(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True,
                              text=True, timeout=30)

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", "main").stdout

    def keys(self, *keys: str) -> None:
        for key in keys:
            self._tmux("send-keys", "-t", "main", "-l", key)

    def special(self, key: str) -> None:
        self._tmux("send-keys", "-t", "main", key)

    def burst(self, *keys: str) -> None:
        """Several keys in one `send-keys`: they reach the program in one write, as
        keys typed faster than it reads do. Key names (Tab, BTab, BSpace) or text. Not
        Escape followed by more: ESC and a character in one read are Alt+character to
        any terminal program (Textual waits ESCDELAY, 100 ms, to tell them apart)."""
        self._tmux("send-keys", "-t", "main", *keys)

    def line_with(self, text: str) -> str:
        """The screen's first line holding `text`."""
        return next(line for line in self.screen().splitlines() if text in line)

    def wait_for(self, *texts: str, timeout: float = 60) -> str:
        """The screen once it shows every one of `texts`."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if all(text in screen for text in texts):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"waited for {texts!r}; the screen shows:\n{screen}")
            time.sleep(0.2)

    def wait_without(self, *texts: str, timeout: float = 60) -> str:
        """The screen once it shows none of `texts`."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if not any(text in screen for text in texts):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"waited for {texts!r} to go; the screen shows:\n"
                                     f"{screen}")
            time.sleep(0.2)

    def exit_status(self, timeout: float = 60) -> int:
        """The program's exit status, once it has ended."""
        screen = self.wait_for("exit status ", timeout=timeout)
        return int(screen.split("exit status ")[-1].split()[0])

    def close(self) -> None:
        self._tmux("kill-server")
        self.socket_path.unlink(missing_ok=True)  # a server that exited by itself leaves it


@pytest.fixture
def terminal(tmp_path):
    opened = []

    def open_terminal(size, *args, env=None, command=None):
        opened.append(Terminal(size, command or rooftui_command(*args), tmp_path, env))
        return opened[-1]

    yield open_terminal
    for term in opened:
        term.close()


def figures(**options) -> tuple[str, str]:
    report = sweep_point(**options)
    return units.seconds(report["step_time_s"]), units.rate(report["tokens_per_s"])


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
def test_keys_change_the_figures(terminal, size):
    term = terminal(size)
    # the layout for the size: tabs at 80×24, both plots' titles at 200×50 (tmux may
    # start the program at its default size and resize it a moment later)
    layout = "Throughput · tok/s vs batch" if size == (200, 50) else " Roofline  Throughput"
    screen = term.wait_for("4.52 ms", "221 tok/s", "q Quit", layout)
    assert "FLOP/s" in screen
    term.keys("]", "]", "]")  # batch 8
    term.wait_for(*figures(batch=8))
    term.keys("}")  # context 2048
    term.wait_for(*figures(batch=8, context=2048))
    if size == (200, 50):  # everything at once: both plots and the breakdown
        screen = term.screen()
        assert "Throughput · tok/s vs batch" in screen and "attention" in screen
    else:  # one panel at a time: `v` shows the throughput plot
        term.keys("v")
        max_batch = sweep_point(batch=8, context=2048)["max_batch"]
        term.wait_for("all users", "per user", f"max {max_batch:,}")
    term.keys("q")
    assert term.exit_status() == 0


def test_typed_batch_and_a_refused_one(terminal):
    term = terminal((80, 24))
    term.wait_for("4.52 ms")
    # GPU -> model -> weights -> KV dtype -> batch, then a backspace and digits, all in
    # one read (the app once dropped keys that came with a backspace: they went to the
    # widget focused before the Tabs had moved the focus)
    term.burst("Tab", "Tab", "Tab", "Tab", "BSpace", "32")
    term.wait_for(*figures(batch=32))
    # a number field has focus: the footer offers ctrl+q and Escape, and F1 for help
    term.wait_for("^q Quit", "esc Leave field", "f1 Help")
    term.keys("x")
    term.wait_for("batch must be a whole", "'32x'")  # the message wraps
    assert figures(batch=32)[0] in term.screen()


def test_a_burst_of_keys_lands_where_it_was_typed(terminal):
    """Tab Tab Tab Tab 6 4 from the GPU select, in one read: batch 64; then `v` while
    the field has focus is typed into it (refused), a backspace takes it out; Escape
    leaves the field, and `v` and `q` are the screen's keys again."""
    term = terminal((80, 24))
    term.wait_for("4.52 ms", "q Quit")
    term.burst("Tab", "Tab", "Tab", "Tab", "6", "4")
    term.wait_for(*figures(batch=64))
    assert "64" in term.line_with("batch").split()
    term.burst("v")
    term.wait_for("'64v'")
    assert "all users" not in term.screen()  # still the roofline panel
    term.burst("BSpace")
    term.wait_without("'64v'")  # the field shows 64 again: its error is gone
    assert "esc Leave field" in term.screen()
    term.special("Escape")
    term.wait_without("esc Leave field", "^q Quit")  # back from the field
    assert " q Quit" in term.screen()  # `q` quits again
    term.burst("v")
    term.wait_for("all users", "per user")  # the throughput panel
    assert "64" in term.line_with("batch").split()
    term.burst("q")
    assert term.exit_status() == 0


def test_shift_tab_and_tab_come_back_to_the_select(terminal):
    """BTab BTab Tab Tab from the GPU select comes back to it: `v` is the screen's
    key there (next view), not typed into the context field."""
    term = terminal((80, 24))
    term.wait_for("4.52 ms", "q Quit")
    term.burst("BTab", "BTab", "Tab", "Tab", "v")
    term.wait_for("all users", "per user")
    assert "1024" in term.line_with("context").split()
    assert "must be" not in term.screen()


def test_a_refusal_typed_fast_stays_on_screen(terminal):
    """`64k` in one read: the figures of 64 land after the `k` was refused; the
    refusal stays, since the field still shows text it refuses."""
    term = terminal((80, 24))
    term.wait_for("4.52 ms")
    term.burst("Tab", "Tab", "Tab", "Tab", "64k")
    term.wait_for(figures(batch=64)[0], "batch must be a whole", "'64k'")


def test_escape_leaves_a_field_of_the_optimize_view(terminal):
    term = terminal((80, 24))
    term.wait_for("4.52 ms", "q Quit")
    term.burst("O")
    term.wait_for("r: run the search")
    term.burst("Tab", "5")  # workload select -> the TTFT field: "5" for "2"
    term.wait_for("esc Leave field", "^q Quit")
    assert "5" in term.line_with("TTFT").split()
    term.special("Escape")
    term.wait_without("esc Leave field")
    assert "esc Back" in term.screen()
    term.special("Escape")  # no field has focus: back to the Explorer
    term.wait_for("4.52 ms", "v View")
    term.burst("q")
    assert term.exit_status() == 0


def test_results_row_opens_in_the_explorer(terminal, tmp_path):
    out = write_results_dir(tmp_path / "sweep")
    term = terminal((200, 50), str(out))
    term.wait_for("sweep-demo · rows 1–100 of 120")
    term.special("Down")
    term.special("Enter")  # row 2: h100-sxm, llama-3-8b, batch 1, context 512, fp8 KV
    term.wait_for(*figures(batch=1, context=512, kv_dtype="fp8"))


@pytest.mark.parametrize("env", [{"NO_COLOR": "1"}, {"TERM": "xterm-mono"}, {"TERM": "dumb"}],
                         ids=["NO_COLOR", "xterm-mono", "dumb"])
def test_a_terminal_without_colour(terminal, env):
    term = terminal((80, 24), env=env)
    term.wait_for("4.52 ms", "221 tok/s", "q Quit", "■ gemm", "▲ attention")
    term.keys("v")  # the throughput curves tell apart by their markers
    term.wait_for("━● all users", "━○ per user")
    term.keys("q")
    assert term.exit_status() == 0


def test_results_without_colour(terminal, tmp_path):
    out = write_results_dir(tmp_path / "sweep")
    term = terminal((200, 50), str(out), env={"NO_COLOR": "1"})
    term.wait_for("sweep-demo · rows 1–100 of 120", "tok/s/user")
    term.keys("q")
    assert term.exit_status() == 0


def test_a_crash_is_one_line_and_a_report(terminal, tmp_path):
    """An error inside the app: exit status 1, one line naming the report, which holds
    the traceback."""
    breaks_a_widget = (
        "from rooftui.tui.widgets import key_figures\n"
        "def show(*args, **kwargs):\n"
        "    raise RuntimeError('a widget broke on purpose')\n"
        "key_figures.KeyFigures.show_report = show\n"
        "from rooftui.tui.app import main\n"
        "main([])\n")
    term = terminal((80, 24), command=[sys.executable, "-c", breaks_a_widget],
                    env={"XDG_STATE_HOME": str(tmp_path / "state")})
    assert term.exit_status() == 1
    screen = term.screen()
    line = next(text for text in screen.splitlines() if text.startswith("rooftui: error:"))
    assert "RuntimeError: a widget broke on purpose" in line
    assert "Traceback" not in screen
    reports = list((tmp_path / "state" / "rooftui").glob("crash-*.log"))
    assert len(reports) == 1 and str(reports[0]) in screen.replace("\n", "")
    assert "a widget broke on purpose" in reports[0].read_text()
