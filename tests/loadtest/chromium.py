"""A real headless Chromium driven over the DevTools protocol, for tests that open a page and look at it.

Debian's ``chromium`` (installed by ``tests/run``) is started with ``--remote-debugging-pipe``: protocol
messages are NUL-terminated JSON on the child's fd 3 (commands in) and fd 4 (replies and events out),
so no WebSocket client and no port is needed. Nothing reaches the network: the browser's own
background traffic (update checks, sign-in) goes to the `RecordingProxy` of ``proxy_port``, and the
page lives in a browser context of its own whose proxy is the one of ``page_proxy_port``, loopback
included, so that proxy sees every connection the page opens and nothing else. The page's requests are
also in the ``Network.requestWillBeSent`` events (after ``Network.enable``).
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["Chromium", "RecordingProxy", "chromium_path"]


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class RecordingProxy:
    """A TCP listener on 127.0.0.1 that records the first line of every connection (``CONNECT host:443 …``,
    ``GET http://…``) and closes it."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        self.requests: list[str] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            with connection:
                connection.settimeout(2)
                try:
                    first = connection.recv(4096).split(b"\r\n", 1)[0].decode("latin-1")
                except OSError:
                    first = "(no request line)"
                self.requests.append(first)

    def close(self) -> None:
        self._socket.close()


class Chromium:
    """One headless browser with one page (a context manager). `send` runs a protocol command on the page and returns
    its result; `events` holds every event received, in order."""

    def __init__(self, *, proxy_port: int, page_proxy_port: int, width: int = 1280, height: int = 1400) -> None:
        binary = chromium_path()
        if binary is None:
            raise RuntimeError("chromium is not installed (bash tests/run installs Debian's chromium package)")
        self._profile = tempfile.mkdtemp(prefix="impulse-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        # the child's ends above any fd bash below redirects, then moved to 3 and 4 by it (no preexec_fn:
        # the test process has threads)
        high_r, high_w = (fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100) for fd in (to_child_r, from_child_w))
        os.close(to_child_r)
        os.close(from_child_w)
        args = [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                f"--user-data-dir={self._profile}", f"--proxy-server=http://127.0.0.1:{proxy_port}",
                "--proxy-bypass-list=<-loopback>", "--no-first-run", "--no-default-browser-check",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-domain-reliability", "--disable-breakpad", "--no-pings", "--mute-audio",
                "--disable-features=Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider",
                f"--window-size={width},{height}", "about:blank"]
        self.process = subprocess.Popen(
            [shutil.which("bash") or "/bin/bash", "-c", f'exec "$@" 3<&{high_r} 4>&{high_w} {high_r}<&- {high_w}>&-',
             "bash", *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=(high_r, high_w))
        os.close(high_r)
        os.close(high_w)
        self.events: list[dict] = []
        self._replies: dict[int, queue.Queue] = {}
        self._next_id = 0
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.stderr = b""
        self._stderr = threading.Thread(target=lambda: setattr(self, "stderr", self.process.stderr.read()),
                                        daemon=True)
        self._stderr.start()
        try:
            context = self._command("Target.createBrowserContext", {
                "proxyServer": f"http://127.0.0.1:{page_proxy_port}", "proxyBypassList": "<-loopback>"}, None)
            target = self._command("Target.createTarget", {"url": "about:blank", **context}, None)["targetId"]
            self._session = self._command("Target.attachToTarget", {"targetId": target, "flatten": True},
                                          None)["sessionId"]
            self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                             "deviceScaleFactor": 1, "mobile": False})
        except BaseException as exc:
            self.close()
            raise RuntimeError(f"chromium did not start: {exc}; its stderr: "
                               f"{self.stderr.decode(errors='replace')[-2000:]}") from exc

    def _read(self) -> None:
        buffer = b""
        with os.fdopen(self._from_child, "rb", buffering=0) as pipe:
            while True:
                chunk = pipe.read(1 << 16)
                if not chunk:
                    return
                buffer += chunk
                while b"\0" in buffer:
                    raw, buffer = buffer.split(b"\0", 1)
                    message = json.loads(raw)
                    if "id" in message and message["id"] in self._replies:
                        self._replies[message["id"]].put(message)
                    else:
                        self.events.append(message)

    def _command(self, method: str, params: dict, session: str | None, timeout: float = 60.0) -> dict:
        with self._lock:
            self._next_id += 1
            ident = self._next_id
            self._replies[ident] = queue.Queue()
        message = {"id": ident, "method": method, "params": params, **({"sessionId": session} if session else {})}
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        try:
            reply = self._replies[ident].get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"chromium did not answer {method} within {timeout:g}s") from None
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def send(self, method: str, params: dict | None = None, timeout: float = 60.0) -> dict:
        """A protocol command on the page (e.g. ``Page.navigate``); its result."""
        return self._command(method, params or {}, self._session, timeout)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60.0) -> Any:
        """Poll `expression` until it is truthy; its value (TimeoutError with the last value after `timeout` s)."""
        deadline = time.monotonic() + timeout
        value = None
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.1)
        raise TimeoutError(f"{expression} still {value!r} after {timeout:g}s")

    def screenshot(self, path: str | Path) -> Path:
        """The viewport as a PNG at `path`."""
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        path = Path(path)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self._command("Browser.close", {}, None, timeout=10)
        except (OSError, RuntimeError, TimeoutError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_child)
        self._stderr.join(timeout=5)
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
