#!/usr/bin/env python3
"""Python `mcp` 2.x peer server (`MCPServer`): a benchmark peer of the 2026-07-28 generation.

    .tools/py2/bin/python server.py stdio
    .tools/py2/bin/python server.py http PORT    # Streamable HTTP on http://127.0.0.1:PORT/mcp

Targets `mcp` 2.3.0 (scripts/setup-tools installs it into .tools/py2), written as its docs
recommend: `mcp.server.mcpserver.MCPServer`, tools declared with `@mcp.tool()`, the `Context`
injected by type annotation, `run(transport="streamable-http", stateless_http=True)` — the
2026 mode: 2026-07-28 requests are served as single exchanges (no session), and 2025 traffic
by a fresh stateless transport per request. Closing a 2026 request's response stream cancels
the handler's scope (the SDK watches for `http.disconnect`). Over stdio the first exchange
picks the era (`server/discover` + envelope = 2026, `initialize` = 2025).

Tools (the convention every peer in benches/peers shares):
  echo(text)                         -> text `text`
  slow_count(steps, delay_ms, tag?)  -> per step: `await anyio.sleep` (a cancellation point),
                                        the step recorded under `tag`, then
                                        `ctx.report_progress(step+1, steps)` (a no-op without a
                                        progressToken); returns `counted N`.
  slow_count_status(tag?)            -> {"tag","steps","last_step_unix_ms"} as structured
                                        content (and, by the SDK, as JSON text).
  progress_flood(reports)            -> `ctx.report_progress(i, reports)` for i in 1..=reports.
"""

from __future__ import annotations

import sys
import time
from typing import TypedDict

import anyio
from mcp.server.mcpserver import Context, MCPServer

USAGE = "usage: server.py stdio | http PORT"

# tag -> [steps, unix ms of the last step]: the side effects a client that closed a stream
# asks about later.
STEPS: dict[str, list[int]] = {}


class CountStatus(TypedDict):
    tag: str
    steps: int
    last_step_unix_ms: int


def build_server() -> MCPServer:
    mcp = MCPServer("staunch-peer-python2", version="1.0.0", log_level="WARNING")

    @mcp.tool()
    def echo(text: str) -> str:
        """Echo the given text back."""
        return text

    @mcp.tool()
    async def slow_count(steps: int, delay_ms: int, ctx: Context, tag: str | None = None) -> str:
        """Count to `steps`, sleeping `delay_ms` per step, reporting progress; honours cancellation."""
        entry = STEPS.setdefault(tag or "", [0, 0])
        for step in range(steps):
            await anyio.sleep(delay_ms / 1000)
            entry[0] += 1
            entry[1] = int(time.time() * 1000)
            await ctx.report_progress(step + 1, steps)
        return f"counted {steps}"

    @mcp.tool()
    def slow_count_status(tag: str | None = None) -> CountStatus:
        """Steps slow_count has done for `tag` and when the last one happened (unix ms)."""
        steps, last = STEPS.get(tag or "", [0, 0])
        return CountStatus(tag=tag or "", steps=steps, last_step_unix_ms=last)

    @mcp.tool()
    async def progress_flood(reports: int, ctx: Context) -> str:
        """Report progress `reports` times as fast as possible (a benchmark fixture)."""
        for i in range(1, reports + 1):
            await ctx.report_progress(i, reports)
        return f"reported {reports}"

    return mcp


def main(argv: list[str]) -> int:
    if not argv or argv[0] == "stdio":
        build_server().run(transport="stdio")
        return 0
    if argv[0] == "http" and len(argv) >= 2 and argv[1].isdigit() and 0 < int(argv[1]) < 65536:
        build_server().run(transport="streamable-http", host="127.0.0.1", port=int(argv[1]), stateless_http=True)
        return 0
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
