"""Open an HTML file in headless Chromium with the network cut off, and read what it drew.

The page is copied with a small script injected at the top of <head> that records, into
attributes of the <html> element (so `--dump-dom` carries them out):
- `data-errors`: uncaught errors, unhandled promise rejections and console.error calls;
- `data-warnings`: console.warn calls (Vega logs its warnings there);
- `data-requests`: every URL the page asked for through fetch, XMLHttpRequest or any
  resource load the browser timed.
Chromium itself gets a proxy that goes nowhere and a resolver that resolves nothing, so a
request that slipped past the trap could not leave the machine either.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

TRAP = """<script>
(function () {
  var root = document.documentElement;
  function keep(name, text) {
    var list = JSON.parse(root.getAttribute(name) || "[]");
    list.push(String(text));
    root.setAttribute(name, JSON.stringify(list));
  }
  function words(args) { return Array.prototype.map.call(args, String).join(" "); }
  window.addEventListener("error", function (e) { keep("data-errors", "uncaught: " + e.message); });
  window.addEventListener("unhandledrejection", function (e) {
    keep("data-errors", "unhandled rejection: " + e.reason); });
  var error = console.error, warn = console.warn, fetch = window.fetch;
  console.error = function () {
    keep("data-errors", words(arguments)); error.apply(console, arguments); };
  console.warn = function () {
    keep("data-warnings", words(arguments)); warn.apply(console, arguments); };
  window.fetch = function (url) {
    keep("data-requests", url); return fetch.apply(window, arguments); };
  var open = XMLHttpRequest.prototype.open;
  XMLHttpRequest.prototype.open = function (method, url) {
    keep("data-requests", url); return open.apply(this, arguments); };
  new PerformanceObserver(function (list) {
    list.getEntries().forEach(function (entry) { keep("data-requests", entry.name); });
  }).observe({type: "resource", buffered: true});
})();
</script>"""


def chromium() -> str:
    """The Chromium executable, or skip the test saying how to get one."""
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no headless Chromium on PATH (Debian: apt-get install chromium; "
                ".ci/run installs it)")


@dataclass
class RenderedPage:
    errors: list[str]
    warnings: list[str]
    requests: list[str]
    # Vega mark name -> the kind of each item drawn (its aria role description: "line
    # mark", "point", "bar", ...)
    marks: dict[str, list[str]] = field(default_factory=dict)
    selects: dict[str, list[str]] = field(default_factory=dict)  # bound dropdowns
    log_errors: list[str] = field(default_factory=list)  # page errors Chromium logged
    # Vega mark name -> each item's aria-label (Vega-Lite writes the tooltip's fields there)
    labels: dict[str, list[str]] = field(default_factory=dict)

    def count(self, mark_name: str) -> int:
        return len(self.marks.get(mark_name, []))

    def kinds(self) -> Counter:
        return Counter(kind for kinds in self.marks.values() for kind in kinds)


class _SvgMarks(HTMLParser):
    """Vega's SVG: each `<g class="mark-... role-mark NAME_marks">` holds a mark's items
    (paths, texts) carrying `aria-roledescription`; bound inputs are `<select>`s."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str | None] = []
        self.marks: dict[str, list[str]] = defaultdict(list)
        self.labels: dict[str, list[str]] = defaultdict(list)
        self.selects: dict[str, list[str]] = {}
        self.select: str | None = None

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "select":
            self.select = attributes.get("name", "")
            self.selects[self.select] = []
        if tag == "option" and self.select is not None:
            self.selects[self.select].append(attributes.get("value", ""))
        if tag == "g":
            classes = (attributes.get("class") or "").split()
            name = next((c[: -len("_marks")] for c in classes if c.endswith("_marks")), None)
            self.stack.append(name if "role-mark" in classes else None)
            return
        role = attributes.get("aria-roledescription")
        owner = next((n for n in reversed(self.stack) if n), None)
        if role and owner and not role.endswith("container"):
            self.marks[owner].append(role)
            self.labels[owner].append(attributes.get("aria-label") or "")

    def handle_endtag(self, tag):
        if tag == "g" and self.stack:
            self.stack.pop()
        if tag == "select":
            self.select = None


class _RootAttributes(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.attributes: dict[str, str] = {}

    def handle_starttag(self, tag, attrs):
        if tag == "html" and not self.attributes:
            self.attributes = {k: v or "" for k, v in attrs}


def render_in_browser(html: Path, work: Path, *, budget_ms: int = 15000,
                      script: str = "") -> RenderedPage:
    """Load `html` (a copy with the trap) in headless Chromium, offline: what it drew,
    logged and asked for. `script` runs at the end of the body (to work the page's
    controls before the DOM is read)."""
    work.mkdir(parents=True, exist_ok=True)
    text = html.read_text(encoding="utf-8")
    head = text.find("<head>")
    assert head >= 0, f"{html} has no <head>"
    page = work / html.name
    text = text[: head + 6] + TRAP + text[head + 6:]
    if script:
        end = text.rfind("</body>")
        text = text[:end] + f"<script>{script}</script>" + text[end:]
    page.write_text(text, encoding="utf-8")
    command = [
        chromium(), "--headless", "--no-sandbox", "--disable-gpu",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-default-apps", "--disable-extensions", "--no-first-run",
        "--no-default-browser-check", f"--user-data-dir={work / 'profile'}",
        "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--enable-logging=stderr", "--v=0",
        f"--virtual-time-budget={budget_ms}", "--dump-dom", page.as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    root = _RootAttributes()
    root.feed(dom[: dom.find(">", dom.find("<html")) + 1])
    svg = _SvgMarks()
    svg.feed(dom[dom.find("<body"):])
    # Chromium echoes the page's console as `INFO:CONSOLE(...)` lines; keep the bad ones.
    log_errors = [line for line in done.stderr.splitlines()
                  if ":CONSOLE" in line and ("Uncaught" in line or "Error" in line)]
    return RenderedPage(
        errors=json.loads(root.attributes.get("data-errors") or "[]"),
        warnings=json.loads(root.attributes.get("data-warnings") or "[]"),
        requests=json.loads(root.attributes.get("data-requests") or "[]"),
        marks=dict(svg.marks), selects=svg.selects, log_errors=log_errors,
        labels=dict(svg.labels))
