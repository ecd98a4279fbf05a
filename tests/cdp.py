"""A small headless-Chromium driver over the Chrome DevTools Protocol (a websocket on loopback).

Used by the browser tests and `benchmarks/report_size.py`. Playwright and friends download their
own browser, which cannot happen here; this drives the system's Chromium (Debian's `chromium`)
with nothing but `websockets`. The browser is started with every background service off and every
host name unresolvable, and `offline()` cuts the page's network too, so a page that needs the
network fails instead of quietly fetching.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """The browser to drive: $GPUCOST_CHROMIUM, else the first of CANDIDATES on PATH."""
    configured = os.environ.get("GPUCOST_CHROMIUM")
    if configured:
        return configured if Path(configured).exists() else shutil.which(configured)
    return next((path for name in CANDIDATES if (path := shutil.which(name))), None)


@contextlib.contextmanager
def screenshot_folder(folder: Path) -> Iterator[Path]:
    """A folder for a browser test module's screenshots; on exit they are copied to
    $GPUCOST_REPORT_SHOTS when it is set (to look at them after a run), else left in the temp dir."""
    yield folder
    copy_to = os.environ.get("GPUCOST_REPORT_SHOTS")
    if copy_to:
        Path(copy_to).mkdir(parents=True, exist_ok=True)
        for shot in folder.glob("*.png"):
            shutil.copy2(shot, Path(copy_to) / shot.name)


class CdpError(RuntimeError):
    """The browser answered a command with an error, or the page threw."""


class Chromium:
    """One headless Chromium with one page (tab), driven synchronously."""

    def __init__(
        self,
        executable: str,
        *,
        width: int = 1280,
        height: int = 900,
        timeout: float = 30.0,
        loopback: bool = False,
    ) -> None:
        """`loopback`: 127.0.0.1 stays reachable (a server the test started, `gpucost serve`);
        every other name and address still resolves to nothing."""
        self.timeout = timeout
        self.events: list[dict[str, Any]] = []
        self._next_id = 0
        self._profile = tempfile.mkdtemp(prefix="gpucost-chromium-")
        args = [
            executable,
            "--headless=new",
            "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            f"--user-data-dir={self._profile}",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-domain-reliability",
            "--disable-sync",
            "--disable-extensions",
            "--no-pings",
            # no host name resolves: nothing leaves (but the loopback server a test asked for)
            "--host-resolver-rules=MAP * ~NOTFOUND" + (", EXCLUDE 127.0.0.1" if loopback else ""),
            f"--window-size={width},{height}",
            "about:blank",
        ]
        self._process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            url = self._devtools_url()
            self._ws = connect(url, max_size=None, open_timeout=timeout)
            target = self.call("Target.createTarget", url="about:blank")["targetId"]
            self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            for domain in ("Page", "Runtime", "Network"):
                self.page(f"{domain}.enable")
            self.viewport(width, height)
        except BaseException:
            self.close()
            raise

    def _devtools_url(self) -> str:
        assert self._process.stderr is not None
        deadline = time.monotonic() + self.timeout
        seen = []
        while time.monotonic() < deadline:
            line = self._process.stderr.readline()
            if not line and self._process.poll() is not None:
                break
            seen.append(line)
            if "DevTools listening on " in line:
                # keep draining its log, or a full pipe would stall the browser
                threading.Thread(target=self._drain, daemon=True).start()
                return line.split("DevTools listening on ", 1)[1].strip()
        raise CdpError("Chromium did not start its DevTools endpoint: " + "".join(seen[-10:]))

    def _drain(self) -> None:
        stream = self._process.stderr
        try:
            while stream is not None and stream.readline():
                pass
        except (OSError, ValueError):  # closed by close()
            return

    # -- protocol --------------------------------------------------------------------------------

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        """Send one command and wait for its answer; events that arrive meanwhile are kept."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        self._ws.send(json.dumps(message))
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CdpError(f"{method}: no answer within {self.timeout} s")
            reply = json.loads(self._ws.recv(timeout=left))
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise CdpError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def page(self, method: str, **params: Any) -> dict[str, Any]:
        return self.call(method, self.session, **params)

    def wait_event(self, method: str, timeout: float | None = None) -> dict[str, Any]:
        """The first kept or arriving event named `method` (removed from the kept ones)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            for i, event in enumerate(self.events):
                if event["method"] == method:
                    return self.events.pop(i)
            left = deadline - time.monotonic()
            if left <= 0:
                raise CdpError(f"no {method} event within {timeout or self.timeout} s")
            reply = json.loads(self._ws.recv(timeout=left))
            if "method" in reply:
                self.events.append(reply)

    # -- page ------------------------------------------------------------------------------------

    def offline(self) -> None:
        """Cut the page's network: only file:// and data: still load."""
        self.page(
            "Network.emulateNetworkConditions",
            offline=True,
            latency=0,
            downloadThroughput=-1,
            uploadThroughput=-1,
        )

    def viewport(self, width: int, height: int, *, mobile: bool = False, scale: float = 1.0) -> None:
        self.page(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=scale,
            mobile=mobile,
        )

    def open(self, url: str) -> None:
        """Navigate and wait for the load event."""
        self.events = [e for e in self.events if e["method"] != "Page.loadEventFired"]
        result = self.page("Page.navigate", url=url)
        if result.get("errorText"):
            raise CdpError(f"could not open {url}: {result['errorText']}")
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.page("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise CdpError(f"the page threw: {text}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float | None = None) -> Any:
        """Poll until `expression` is truthy; its value."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise CdpError(f"still false after {timeout or self.timeout} s: {expression}")
            time.sleep(0.05)

    def click(self, selector: str) -> None:
        """A real mouse click (press and release) at the middle of the element `selector` finds."""
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
            " e.scrollIntoView({block: 'center', inline: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2]; })()"
        )
        if box is None:
            raise CdpError(f"nothing on the page matches {selector}")
        for kind in ("mousePressed", "mouseReleased"):
            self.page("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def choose(self, selector: str, value: str) -> None:
        """Pick `value` in the <select> `selector`, as a person would (its change event fires)."""
        found = self.evaluate(
            f"(() => {{ const s = document.querySelector({json.dumps(selector)});"
            f" if (!s || ![...s.options].some(o => o.value === {json.dumps(value)})) return false;"
            f" s.value = {json.dumps(value)}; s.dispatchEvent(new Event('change', {{bubbles: true}}));"
            " return true; })()"
        )
        if not found:
            raise CdpError(f"{selector} has no option {value!r}")

    def screenshot(self, path: Path, *, full_page: bool = False) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
            size = self.page("Page.getLayoutMetrics")["cssContentSize"]
            params["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        data = self.page("Page.captureScreenshot", **params)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def requested_urls(self) -> list[str]:
        """Every URL the page asked for since the driver started."""
        return [
            e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"
        ]

    def console_errors(self) -> list[str]:
        """Uncaught exceptions and console.error messages seen so far."""
        found = []
        for e in self.events:
            if e["method"] == "Runtime.exceptionThrown":
                details = e["params"]["exceptionDetails"]
                found.append(details.get("exception", {}).get("description") or details.get("text", ""))
            elif e["method"] == "Runtime.consoleAPICalled" and e["params"]["type"] == "error":
                found.append(
                    " ".join(str(a.get("value", a.get("description", ""))) for a in e["params"]["args"])
                )
        return found

    def close(self) -> None:
        try:
            if getattr(self, "_ws", None) is not None:
                # the browser may be gone already; closing must not fail a test
                with contextlib.suppress(Exception):
                    self.call("Browser.close")
                self._ws.close()
        finally:
            if self._process.poll() is None:
                self._process.terminate()
                try:
                    self._process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait()
            if self._process.stderr is not None:
                self._process.stderr.close()
            shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
