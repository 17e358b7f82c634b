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

    def __init__(self, size: tuple[int, int], command: list[str], cwd: Path) -> None:
        self.socket = f"rooftui-test-{os.getpid()}-{size[0]}x{size[1]}"
        width, height = size
        shell_command = " ".join(shlex.quote(part) for part in command)
        # the window gets its size once created: start a placeholder, then run the
        # program in the sized pane (started directly, it may see tmux's default 80×24
        # and miss the resize that follows)
        self._tmux("-f", "/dev/null", "new-session", "-d", "-s", "main", "-x", str(width),
                   "-y", str(height), "-c", str(cwd), "sleep 600")
        # COLUMNS and LINES would override the pane's size; pytest's process may have
        # them (importing readline exports them), and tmux passes its environment on
        self.socket_path = Path(self._tmux("display-message", "-p", "-t", "main",
                                           "#{socket_path}").stdout.strip())
        self._tmux("respawn-pane", "-k", "-t", "main", "-c", str(cwd),
                   "env -u COLUMNS -u LINES TERM=screen-256color COLORTERM= "
                   + shell_command)

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

    def running(self) -> bool:
        return self._tmux("has-session", "-t", "main").returncode == 0

    def close(self) -> None:
        self._tmux("kill-server")
        self.socket_path.unlink(missing_ok=True)  # a server that exited by itself leaves it


@pytest.fixture
def terminal(tmp_path):
    opened = []

    def open_terminal(size, *args):
        opened.append(Terminal(size, rooftui_command(*args), tmp_path))
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
    deadline = time.monotonic() + 20
    while term.running() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not term.running()


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
    term.wait_for("batch: a whole number >=", "got '32x'")  # the message wraps
    assert figures(batch=32)[0] in term.screen()


def test_results_row_opens_in_the_explorer(terminal, tmp_path):
    out = write_results_dir(tmp_path / "sweep")
    term = terminal((200, 50), str(out))
    term.wait_for("sweep-demo · rows 1–100 of 120")
    term.special("Down")
    term.special("Enter")  # row 2: h100-sxm, llama-3-8b, batch 1, context 512, fp8 KV
    term.wait_for(*figures(batch=1, context=512, kv_dtype="fp8"))
