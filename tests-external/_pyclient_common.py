"""Shared flow for the Python `mcp` client drivers (py_stdio_client.py, py_http_client.py).

Written for the `mcp` 1.x client API (pinned 1.30.0 in .tools/py); it also runs
under `mcp` 2.x (.tools/py2) where the differences are small (read timeout given
as float instead of timedelta; the HTTP transport yields 2 streams instead of 3).

Each driver prints ONE JSON object on stdout and exits 0 on success; on failure it
prints a message on stderr and exits non-zero.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import timedelta
from importlib.metadata import version as _pkg_version
from typing import Any

import anyio
import mcp.types as types
from mcp import ClientSession

MCP_VERSION = _pkg_version("mcp")
MCP_MAJOR = int(MCP_VERSION.split(".")[0])


class DriverError(Exception):
    """A check failed: reported on stderr, exit code 1."""


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else x


def _timeout(seconds: float) -> Any:
    # 1.x: `read_timeout_seconds: timedelta`; 2.x: `read_timeout_seconds: float`
    return timedelta(seconds=seconds) if MCP_MAJOR < 2 else seconds


def _attr(obj: Any, *names: str, default: Any = None) -> Any:
    """First present attribute (1.x uses camelCase model fields, 2.x snake_case)."""
    for n in names:
        if hasattr(obj, n):
            return getattr(obj, n)
    return default


def _is_error(result: Any) -> bool:
    return bool(_attr(result, "isError", "is_error", default=False))


def _text(result: Any) -> str | None:
    for c in getattr(result, "content", None) or []:
        if getattr(c, "type", None) == "text":
            return c.text
    return None


def _dump(msg: Any) -> dict[str, Any]:
    """Best-effort JSON-RPC dict of an outgoing SessionMessage (1.x and 2.x)."""
    inner = getattr(msg, "message", msg)
    root = getattr(inner, "root", inner)
    if hasattr(root, "model_dump"):
        return root.model_dump(by_alias=True, exclude_none=True)
    if isinstance(root, dict):
        return root
    return {}


class SpyWriteStream:
    """Wraps the client's write stream and records every outgoing JSON-RPC message,
    so the driver can tell which request id a call used and whether the *client
    library itself* sent notifications/cancelled."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.sent: list[dict[str, Any]] = []

    async def send(self, item: Any) -> None:
        try:
            self.sent.append(_dump(item))
        except Exception:  # never let the spy break the client
            pass
        await self._inner.send(item)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def __aenter__(self) -> "SpyWriteStream":
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._inner.__aexit__(*exc)

    def last_request_id(self, method: str) -> Any:
        for m in reversed(self.sent):
            if m.get("method") == method and "id" in m:
                return m["id"]
        return None

    def cancels(self) -> list[dict[str, Any]]:
        return [m.get("params", {}) for m in self.sent if m.get("method") == "notifications/cancelled"]


class Observer:
    """message_handler for ClientSession: records what arrives outside a request's
    own response (exceptions such as a response to an already-abandoned request id,
    and notifications)."""

    def __init__(self) -> None:
        self.exceptions: list[str] = []
        self.notifications: list[str] = []
        # (monotonic time, progressToken, progress) of every notifications/progress
        self.progress: list[tuple[float, Any, float]] = []

    async def __call__(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.exceptions.append(f"{type(message).__name__}: {message}")
            return
        root = getattr(message, "root", None)
        method = getattr(root, "method", None)
        if method:
            self.notifications.append(method)
        if method == "notifications/progress":
            params = root.params
            self.progress.append(
                (time.monotonic(), _attr(params, "progressToken", "progress_token"), params.progress)
            )

    def progress_since(self, token: Any, since: float) -> int:
        return sum(1 for t, tok, _ in self.progress if tok == token and t >= since)


def make_session(read: Any, write: Any, observer: Observer) -> ClientSession:
    return ClientSession(
        read,
        write,
        message_handler=observer,
        client_info=types.Implementation(name="staunch-tests-external-py", version="1.0.0"),
    )


async def initialize(session: ClientSession) -> dict[str, Any]:
    init = await session.initialize()
    out: dict[str, Any] = {"protocolVersion": _attr(init, "protocolVersion", "protocol_version")}
    info = _attr(init, "serverInfo", "server_info")
    if info is not None:
        out["serverInfo"] = {"name": info.name, "version": info.version}
    return out


async def basic_flow(session: ClientSession) -> dict[str, Any]:
    """list_tools, echo {"text":"hi"}, slow_count {steps:5, delay_ms:20} with progress."""
    tools = await session.list_tools()
    names = [t.name for t in tools.tools]

    echo = await session.call_tool("echo", {"text": "hi"})
    if _is_error(echo):
        raise DriverError(f"echo returned isError: {_text(echo)!r}")

    progress: list[float | int] = []
    totals: list[float | int | None] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append(_num(p))
        totals.append(None if total is None else _num(total))

    t0 = time.monotonic()
    slow = await session.call_tool(
        "slow_count", {"steps": 5, "delay_ms": 20}, progress_callback=on_progress
    )
    slow_ms = round((time.monotonic() - t0) * 1000)
    if _is_error(slow):
        raise DriverError(f"slow_count returned isError: {_text(slow)!r}")
    # let progress notifications that raced the result be delivered
    await anyio.sleep(0.05)
    return {
        "tools": names,
        "echo": _text(echo),
        "progress": progress,
        "progress_total": totals[-1] if totals else None,
        "slow_result": _text(slow),
        "slow_ms": slow_ms,
    }


async def cancel_flow(
    session: ClientSession,
    spy: SpyWriteStream,
    observer: Observer,
    timeout_s: float,
    send_cancel: bool,
    steps: int = 1000,
    delay_ms: int = 20,
) -> dict[str, Any]:
    """Call slow_count {steps:1000, delay_ms:20} with a read timeout and observe.

    mcp 1.x raises McpError(code 408) on timeout and sends NOTHING to the server;
    mcp 2.x sends notifications/cancelled itself. With --send-cancel (and no cancel
    sent by the library) the driver sends notifications/cancelled {requestId,
    reason} itself, as a well-behaved 1.x application should.
    """
    progress: list[float | int] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append(_num(p))

    out: dict[str, Any] = {"timeout_s": timeout_s}
    t0 = time.monotonic()
    try:
        result = await session.call_tool(
            "slow_count",
            {"steps": steps, "delay_ms": delay_ms},
            read_timeout_seconds=_timeout(timeout_s),
            progress_callback=on_progress,
        )
        out["error"] = False
        out["result"] = _text(result)
    except Exception as e:  # McpError (1.x) / MCPError (2.x)
        out["error"] = True
        err = getattr(e, "error", None)
        out["error_code"] = getattr(err, "code", getattr(e, "code", None))
        out["error_message"] = str(getattr(err, "message", None) or e)
    out["elapsed_ms"] = round((time.monotonic() - t0) * 1000)
    request_id = spy.last_request_id("tools/call")
    out["request_id"] = request_id
    out["progress_before_timeout"] = len(progress)
    out["library_sent_cancel"] = bool(spy.cancels())

    if out["error"] and send_cancel and not spy.cancels() and request_id is not None:
        await session.send_notification(
            types.ClientNotification(
                types.CancelledNotification(
                    method="notifications/cancelled",
                    params=types.CancelledNotificationParams(
                        requestId=request_id, reason="timed out (sent by staunch test driver)"
                    ),
                )
            )
        )
        out["driver_sent_cancel"] = True
    else:
        out["driver_sent_cancel"] = False
    out["cancel_notifications"] = spy.cancels()
    out["sent_methods"] = [m.get("method") for m in spy.sent if m.get("method")]

    # Is the session still usable? And does anything arrive for the abandoned id
    # (e.g. a `code: 0` error reply from an mcp 1.x server, python-sdk#2493)?
    t_cancel = time.monotonic()
    t1 = time.monotonic()
    echo = await session.call_tool("echo", {"text": "still alive"})
    out["echo_after_ms"] = round((time.monotonic() - t1) * 1000)
    out["echo_after"] = _text(echo)
    await anyio.sleep(0.3)
    # progress notifications for the abandoned request that still arrived after the
    # timeout (+ grace 50 ms): shows whether the server stopped working on it
    # (counted from all incoming notifications; the library stops calling the
    # callback itself once the request timed out)
    out["progress_after_cancel"] = observer.progress_since(request_id, t_cancel + 0.05)
    out["late_messages"] = list(observer.exceptions)
    return out


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def fail(msg: str, code: int = 1) -> "NoReturn":  # type: ignore[name-defined]
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(code)


def unwrap(exc: BaseException) -> BaseException:
    """First leaf of an ExceptionGroup (anyio task groups wrap errors)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
