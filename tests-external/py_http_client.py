#!/usr/bin/env python3
"""Real-client interop driver: the Python `mcp` client over Streamable HTTP.

usage:
  py_http_client.py URL [--cancel [--timeout S] [--send-cancel]]

Connects with `mcp.client.streamable_http.streamable_http_client(URL)` and a
`ClientSession`: initialize, list_tools, echo {"text":"hi"}, slow_count
{"steps":5,"delay_ms":20} with a progress callback. On exit the transport sends
DELETE for the session (terminate_on_close). Prints ONE JSON object on stdout:
  {"client","mcpVersion","transport":"streamable-http","sessionId",
   "protocolVersion","serverInfo","tools":[…],"echo","progress":[…],
   "progress_total","slow_result","slow_ms"}

--cancel: slow_count {"steps":1000,"delay_ms":20} with a read timeout (default
0.5 s), then echo on the same session; same fields as py_stdio_client.py --cancel.
mcp 1.x sends no notifications/cancelled on timeout (use --send-cancel to have
the driver send it); mcp 2.x sends it as a POST.

Exit 0 on success; non-zero with a message on stderr otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time

import anyio
from mcp.client.streamable_http import streamable_http_client

from _pyclient_common import (
    MCP_VERSION,
    DriverError,
    Observer,
    SpyWriteStream,
    basic_flow,
    cancel_flow,
    emit,
    fail,
    initialize,
    make_session,
    unwrap,
)


async def run(opts: argparse.Namespace, out: dict) -> None:
    observer = Observer()
    with anyio.fail_after(opts.overall_timeout):
        async with streamable_http_client(opts.url) as streams:
            read, write = streams[0], streams[1]
            get_session_id = streams[2] if len(streams) > 2 else None  # 1.x only
            spy = SpyWriteStream(write)
            async with make_session(read, spy, observer) as session:
                out.update(await initialize(session))
                out["sessionId"] = get_session_id() if get_session_id else None
                if opts.cancel:
                    out["mode"] = "cancel"
                    out.update(await cancel_flow(session, spy, observer, opts.timeout, opts.send_cancel))
                else:
                    out.update(await basic_flow(session))
                out["_complete"] = True


def main() -> int:
    p = argparse.ArgumentParser(prog="py_http_client.py")
    p.add_argument("url")
    p.add_argument("--cancel", action="store_true")
    p.add_argument("--timeout", type=float, default=0.5)
    p.add_argument("--send-cancel", action="store_true")
    p.add_argument("--overall-timeout", type=float, default=30.0)
    opts = p.parse_args()

    t0 = time.monotonic()
    out: dict = {"client": "python-mcp", "mcpVersion": MCP_VERSION, "transport": "streamable-http"}
    try:
        anyio.run(run, opts, out)
    except DriverError as e:
        fail(str(e))
    except BaseException as e:  # noqa: BLE001
        leaf = unwrap(e)
        if not out.get("_complete"):
            if isinstance(leaf, TimeoutError):
                fail(f"overall timeout ({opts.overall_timeout}s) exceeded")
            fail(f"{type(leaf).__name__}: {leaf}")
        out["teardown_error"] = f"{type(leaf).__name__}: {leaf}"
    out.pop("_complete", None)
    out["total_ms"] = round((time.monotonic() - t0) * 1000)
    emit(out)
    if opts.cancel:
        if not out.get("error"):
            fail(f"--cancel: slow_count did not fail: {out}")
        if out["elapsed_ms"] > 5000:
            fail(f"--cancel: timeout took {out['elapsed_ms']} ms")
        if out.get("echo_after") != "still alive":
            fail(f"--cancel: session unusable after timeout: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
