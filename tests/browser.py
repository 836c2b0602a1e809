"""A headless Chromium driven over the DevTools protocol, for the observer page's browser tests:
set a viewport, load a page, measure it with a script, take screenshots. No browser download and
no Node: the system's Chromium and the `websockets` client."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import re
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--no-first-run",
    "--disable-extensions",
)


class DevToolsError(RuntimeError):
    """The browser answered a command with an error."""


class Page:
    """One tab: commands in, answers and events out."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for raw in self.ws:
            message = json.loads(raw)
            if (waiting := self._waiting.pop(message.get("id", -1), None)) is not None:
                waiting.set_result(message)
            elif "method" in message:
                self._events.put_nowait(message)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        number = next(self._ids)
        answer = self._waiting[number] = asyncio.get_running_loop().create_future()
        await self.ws.send(json.dumps({"id": number, "method": method, "params": params}))
        message = await asyncio.wait_for(answer, 60)
        if "error" in message:
            raise DevToolsError(f"{method}: {message['error']}")
        return dict(message.get("result", {}))

    async def event(self, method: str) -> dict[str, Any]:
        while True:
            message = await asyncio.wait_for(self._events.get(), 60)
            if message["method"] == method:
                return dict(message.get("params", {}))

    async def open(self, url: str, *, width: int, height: int, mobile: bool = False) -> None:
        """Load ``url`` in a ``width`` × ``height`` viewport (a phone's with ``mobile``), fonts
        loaded."""
        await self.send(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=mobile,
        )
        await self.send("Page.enable")
        await self.send("Page.navigate", url=url)
        await self.event("Page.loadEventFired")
        await self.evaluate("document.fonts.ready.then(() => true)")

    async def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (a promise is awaited), as JSON."""
        found = await self.send(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in found:
            raise DevToolsError(f"script failed: {found['exceptionDetails']}")
        return found["result"].get("value")

    async def screenshot(self, path: Path, selector: str | None = None) -> Path:
        """A PNG of the element ``selector`` (the whole page without one)."""
        box = await self.evaluate(
            "(() => { const e = "
            + (f"document.querySelector({json.dumps(selector)})" if selector else "null")
            + "; const r = e ? e.getBoundingClientRect() : {x: 0, y: 0,"
            " width: document.documentElement.scrollWidth,"
            " height: document.documentElement.scrollHeight};"
            " return {x: r.x + scrollX, y: r.y + scrollY, width: r.width, height: r.height}; })()"
        )
        shot = await self.send(
            "Page.captureScreenshot",
            format="png",
            captureBeyondViewport=True,
            clip={**box, "scale": 1},
        )
        await asyncio.to_thread(path.write_bytes, base64.b64decode(shot["data"]))
        return path

    async def close(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


@contextlib.asynccontextmanager
async def chromium_page(executable: str) -> AsyncIterator[Page]:
    """A tab of a fresh headless Chromium (its own profile), closed afterwards."""
    with tempfile.TemporaryDirectory(prefix="yuiju-chromium-") as profile:
        proc = await asyncio.create_subprocess_exec(
            executable,
            *FLAGS,
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "about:blank",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        drain: asyncio.Task[bytes] | None = None
        try:
            assert proc.stderr is not None
            said = b""
            while (found := re.search(rb"ws://([\d.]+:\d+)/devtools/browser/", said)) is None:
                line = await asyncio.wait_for(proc.stderr.readline(), 30)
                if not line:
                    raise DevToolsError(f"Chromium exited before listening: {said[-2000:]!r}")
                said += line
            address = found.group(1).decode()
            drain = asyncio.create_task(proc.stderr.read())  # a full pipe would stall the browser
            async with httpx.AsyncClient() as client:
                targets = (await client.get(f"http://{address}/json/list")).json()
            tab = next(t for t in targets if t["type"] == "page")
            async with connect(tab["webSocketDebuggerUrl"], max_size=None) as ws:
                page = Page(ws)
                try:
                    yield page
                finally:
                    await page.close()
        finally:
            if proc.returncode is None:
                proc.kill()
            await proc.wait()
            if drain is not None:
                await drain
