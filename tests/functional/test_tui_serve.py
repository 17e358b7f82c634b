"""`rooftui serve` in headless Chromium: the page loads from loopback, and the app it
serves draws the Explorer's step time.

The terminal in the page is xterm.js on a canvas, so the test reads what the app sent
it: a script (added through the DevTools protocol before the page's own) keeps the text
of every websocket message the page receives, and the test asks for it until the step
time is there. Chromium gets a proxy that goes nowhere, so nothing but loopback loads
(the page's web font does not; the terminal falls back to a local one).
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time

import aiohttp
import pytest
from browser_helpers import chromium
from test_tui_support import sweep_point

from rooftui.core import units

KEEP_MESSAGES = """
window.__received = "";
const Native = window.WebSocket;
window.WebSocket = function (...args) {
  const socket = new Native(...args);
  socket.addEventListener("message", (event) => {
    const data = event.data;
    if (typeof data === "string") { window.__received += data; return; }
    const decode = (buffer) => {
      window.__received += new TextDecoder("utf-8", {fatal: false}).decode(buffer); };
    if (data instanceof ArrayBuffer) decode(data); else data.arrayBuffer().then(decode);
  });
  return socket;
};
window.WebSocket.prototype = Native.prototype;
Object.assign(window.WebSocket, Native);
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[0]
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"nothing listens on port {port}")


class DevTools:
    """The DevTools protocol over one page's websocket."""

    def __init__(self, socket_) -> None:
        self.socket = socket_
        self.next_id = 0

    async def call(self, method: str, **params) -> dict:
        self.next_id += 1
        await self.socket.send_json({"id": self.next_id, "method": method, "params": params})
        while True:
            reply = json.loads((await self.socket.receive()).data)
            if reply.get("id") == self.next_id:
                assert "error" not in reply, reply
                return reply.get("result", {})


async def received_text(url: str, debug_port: int, wanted: list[str],
                        timeout: float = 90) -> tuple[str, str]:
    """The page's origin and the text its websockets received, once it holds `wanted`."""
    async with aiohttp.ClientSession() as session:
        deadline = time.monotonic() + 30
        while True:
            try:
                async with session.get(f"http://127.0.0.1:{debug_port}/json") as reply:
                    targets = await reply.json()
                break
            except aiohttp.ClientError:
                assert time.monotonic() < deadline, "Chromium's DevTools did not start"
                await asyncio.sleep(0.2)
        page = next(t for t in targets if t["type"] == "page")
        async with session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            tools = DevTools(ws)
            await tools.call("Page.enable")
            await tools.call("Page.addScriptToEvaluateOnNewDocument", source=KEEP_MESSAGES)
            await tools.call("Page.navigate", url=url)
            deadline = time.monotonic() + timeout
            text = ""
            while time.monotonic() < deadline:
                result = await tools.call("Runtime.evaluate", returnByValue=True,
                                          expression="[location.origin, window.__received]")
                origin, text = result["result"].get("value") or ["", ""]
                if text and all(item in text for item in wanted):
                    return origin, text
                await asyncio.sleep(0.3)
            raise AssertionError(f"the page never received {wanted}; got {text[-2000:]!r}")


@pytest.fixture
def served(tmp_path):
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "rooftui.tui.app", "serve", "--port",
                                str(port)], cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_port(port, process)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_the_served_page_shows_the_explorers_step_time(served, tmp_path):
    debug_port = free_port()
    browser = subprocess.Popen(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
         "--proxy-server=127.0.0.1:9",  # loopback goes direct; anything else nowhere
         "--window-size=1200,800", f"--remote-debugging-port={debug_port}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        step_time = units.seconds(sweep_point()["step_time_s"])
        origin, text = asyncio.run(received_text(f"http://127.0.0.1:{served}/", debug_port,
                                                [step_time, "Quit"]))
    finally:
        browser.terminate()
        browser.wait(timeout=30)
    assert origin == f"http://127.0.0.1:{served}"
    assert "step time" in text and step_time in text


def test_serve_listens_on_loopback_by_default():
    from rooftui.tui.serve import parse_arguments

    args, rest = parse_arguments(["--gpu", "h200"])
    assert (args.host, args.port, rest) == ("127.0.0.1", 8000, ["--gpu", "h200"])
