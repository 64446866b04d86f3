#!/usr/bin/env python3
"""Python `mcp` (FastMCP) peer server: a fixture for benchmarks and interop tests.

    .tools/py/bin/python server.py stdio
    .tools/py/bin/python server.py http PORT     # Streamable HTTP on http://127.0.0.1:PORT/mcp

Targets the `mcp` 1.x line (pinned 1.30.0 by scripts/setup-tools), which is what
most deployed Python MCP servers run: `mcp.server.fastmcp.FastMCP`, tools declared
with `@mcp.tool()`, the `Context` injected by type annotation.

Tools:
  echo(text)                  -> text content `text`
  slow_count(steps, delay_ms, tag?)
                              -> per step: `await anyio.sleep(delay_ms/1000)` (a
                                 cancellation point: a notifications/cancelled from
                                 the client cancels the handler's scope here), the
                                 step recorded under `tag`, then
                                 `ctx.report_progress(step+1, steps)` (a no-op when
                                 the request carried no progressToken); returns
                                 text `counted N`.
  stubborn_count(steps, delay_ms, tag?)
                              -> like slow_count, but the loop runs in a shielded
                                 cancel scope: a cancel does not stop it (a server
                                 that ignores cancels, for the probe and the proxy's
                                 orphaned-work reports); its steps count under `tag`
                                 as slow_count's do.
  slow_count_status(tag?)     -> {"tag","steps","last_step_unix_ms"} as structured
                                 content (and JSON text): did the work go on after a
                                 cancel?
  log_echo(text, level?)      -> sends `text` as a log message (notifications/message,
                                 logger "peer", level `level`, default info), then
                                 returns text `text`.
  progress_flood(reports)     -> benchmark fixture: `ctx.report_progress(i, reports)` for
                                 i in 1..=reports, back to back; returns `reported N`.

With PEER_STEPS_DIR set, each step of a tagged count also writes
`PEER_STEPS_DIR/<tag>` as "<steps> <pid>": a side effect outside the process, which
a test can read after the process is gone (did the work stop, which process did it).

Streamable HTTP runs stateful (FastMCP's default: session ids minted by the SDK,
no event store) and binds 127.0.0.1 only, where FastMCP enables its own
DNS-rebinding protection.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TypedDict

import anyio
from mcp.server.fastmcp import Context, FastMCP

USAGE = "usage: server.py stdio | http PORT"
STEPS_DIR = os.environ.get("PEER_STEPS_DIR")

# tag -> [steps, unix ms of the last step]: the side effects slow_count_status reports.
STEPS: dict[str, list[int]] = {}


def record_step(tag: str | None, entry: list[int]) -> None:
    """One step of a tagged count: in memory, and in PEER_STEPS_DIR when set."""
    entry[0] += 1
    entry[1] = int(time.time() * 1000)
    if STEPS_DIR and tag and tag.isalnum():
        # Written aside, then renamed over: a reader never sees the file emptied for the write.
        path = os.path.join(STEPS_DIR, tag)
        with open(f"{path}.{os.getpid()}.tmp", "w", encoding="utf-8") as f:
            f.write(f"{entry[0]} {os.getpid()}")
        os.replace(f"{path}.{os.getpid()}.tmp", path)


class CountStatus(TypedDict):
    tag: str
    steps: int
    last_step_unix_ms: int


class Exact(TypedDict):
    zeta: int
    alpha: int
    big: int


def build_server(port: int = 8000) -> FastMCP:
    mcp = FastMCP(
        "staunch-peer-python",
        host="127.0.0.1",
        port=port,
        log_level="WARNING",
    )

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
            record_step(tag, entry)
            await ctx.report_progress(step + 1, steps)
        return f"counted {steps}"

    @mcp.tool()
    async def stubborn_count(steps: int, delay_ms: int, ctx: Context, tag: str | None = None) -> str:
        """Like slow_count, but ignores cancellation (a fixture for orphaned-work checks)."""
        entry = STEPS.setdefault(tag or "", [0, 0])
        with anyio.CancelScope(shield=True):
            for step in range(steps):
                await anyio.sleep(delay_ms / 1000)
                record_step(tag, entry)
                await ctx.report_progress(step + 1, steps)
        return f"counted {steps}"

    @mcp.tool()
    async def log_echo(text: str, ctx: Context, level: str = "info") -> str:
        """Log `text` to the client at `level` (logger "peer"), then return it."""
        await ctx.log(level, text, logger_name="peer")  # type: ignore[arg-type]
        return text

    @mcp.tool()
    def slow_count_status(tag: str | None = None) -> CountStatus:
        """Steps slow_count has done for `tag` and when the last one happened (unix ms)."""
        steps, last = STEPS.get(tag or "", [0, 0])
        return CountStatus(tag=tag or "", steps=steps, last_step_unix_ms=last)

    @mcp.tool()
    def exact_numbers() -> Exact:
        """Keys out of alphabetical order and 2**70 + 1, beyond 64 bits (a fixture for results passed on unchanged)."""
        return Exact(zeta=1, alpha=2, big=2**70 + 1)

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
        build_server(int(argv[1])).run(transport="streamable-http")
        return 0
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
