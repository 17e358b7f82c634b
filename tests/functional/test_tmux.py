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
    for _ in range(4):  # GPU -> model -> weights -> KV dtype -> batch
        term.special("Tab")
    # a number field has focus once `?` types into it: the footer offers F1 for help
    term.wait_for("f1 Help")
    # keys at a person's pace: Textual (8.2, here) can drop a key that reaches it in the
    # same read as a backspace; a bare Textual Input does the same under tmux
    term.special("BSpace")
    time.sleep(0.3)
    term.keys("32")
    term.wait_for(*figures(batch=32))
    term.keys("x")
    term.wait_for("batch must be a whole", "'32x'")  # the message wraps
    assert figures(batch=32)[0] in term.screen()


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
    term.wait_for("sweep-demo · rows 1–100 of 120", "step_time_s")
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
