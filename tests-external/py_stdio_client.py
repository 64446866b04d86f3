#!/usr/bin/env python3
"""Real-client interop driver: the Python `mcp` client over stdio.

usage:
  py_stdio_client.py [--cancel [--timeout S] [--send-cancel]] -- SERVER_CMD [ARGS...]

Spawns SERVER_CMD with `mcp.client.stdio.stdio_client`, runs `ClientSession`:
initialize, list_tools, call echo {"text":"hi"} and slow_count {"steps":5,
"delay_ms":20} with a progress callback. Prints ONE JSON object on stdout:
  {"client","mcpVersion","transport","protocolVersion","serverInfo","tools":[…],
   "echo","progress":[…],"progress_total","slow_result","slow_ms"}

--cancel: initialize, then slow_count {"steps":1000,"delay_ms":20} with a read
timeout (default 0.5 s). mcp 1.x raises McpError (code 408) and sends nothing to
the server; mcp 2.x sends notifications/cancelled itself. --send-cancel makes the
driver send notifications/cancelled when the library did not. Then it calls echo
to check the session still works. Prints
  {"mode":"cancel","error","error_code","error_message","elapsed_ms","request_id",
   "library_sent_cancel","driver_sent_cancel","cancel_notifications":[…],
   "echo_after","echo_after_ms","progress_before_timeout","progress_after_cancel",
   "late_messages":[…], …}
Exit 0 on success; non-zero with a message on stderr otherwise (for --cancel,
success means: the call errored, within 5 s, and the session still answered echo).

Server stderr is passed through to this process's stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import anyio
from mcp.client.stdio import StdioServerParameters, stdio_client

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


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" not in argv:
        fail("usage: py_stdio_client.py [--cancel [--timeout S] [--send-cancel]] -- SERVER_CMD [ARGS...]", 2)
    i = argv.index("--")
    p = argparse.ArgumentParser(prog="py_stdio_client.py")
    p.add_argument("--cancel", action="store_true")
    p.add_argument("--timeout", type=float, default=0.5)
    p.add_argument("--send-cancel", action="store_true")
    p.add_argument("--overall-timeout", type=float, default=30.0)
    opts = p.parse_args(argv[:i])
    cmd = argv[i + 1 :]
    if not cmd:
        fail("no server command after --", 2)
    return opts, cmd


async def run(opts: argparse.Namespace, cmd: list[str], out: dict) -> None:
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=dict(os.environ))
    observer = Observer()
    with anyio.fail_after(opts.overall_timeout):
        async with stdio_client(params) as streams:
            read, write = streams[0], streams[1]
            spy = SpyWriteStream(write)
            async with make_session(read, spy, observer) as session:
                out.update(await initialize(session))
                if opts.cancel:
                    out["mode"] = "cancel"
                    out.update(await cancel_flow(session, spy, observer, opts.timeout, opts.send_cancel))
                else:
                    out.update(await basic_flow(session))
                out["_complete"] = True


def main() -> int:
    opts, cmd = parse(sys.argv[1:])
    t0 = time.monotonic()
    out: dict = {"client": "python-mcp", "mcpVersion": MCP_VERSION, "transport": "stdio"}
    try:
        anyio.run(run, opts, cmd, out)
    except DriverError as e:
        fail(str(e))
    except BaseException as e:  # noqa: BLE001 - report anything, incl. ExceptionGroup
        leaf = unwrap(e)
        if not out.get("_complete"):
            if isinstance(leaf, TimeoutError):
                fail(f"overall timeout ({opts.overall_timeout}s) exceeded")
            fail(f"{type(leaf).__name__}: {leaf}")
        # The flow finished; the error came while closing the client (mcp 1.x's
        # stdio_client raises BrokenResourceError if the server is still writing,
        # e.g. progress for an abandoned request). Reported, not fatal.
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
