#!/usr/bin/env python3
"""Real-client interop driver: Python `mcp` 2.x's high-level `Client` over Streamable HTTP.

usage:
  py2_client.py URL --mode auto|legacy [--tag TAG] [--no-greet]

`--mode auto` is what the SDK does by default: probe `server/discover` and speak 2026-07-28
statelessly when the server offers it; `--mode legacy` forces the 2025 initialize handshake.
Against the same server, each mode runs:

  1. slow_count {steps: 5, delay_ms: 20} with a progress callback;
  2. (unless --no-greet) greet {}, answered by an elicitation callback with the name "Ada" (an input-required
     round in 2026-07-28, a server->client elicitation/create request in 2025);
  3. the cancel: slow_count {steps: 400, delay_ms: 25, tag} inside an anyio cancel scope
     that gives up after 0.4 s (in 2026-07-28 the SDK closes the request's stream; in 2025
     it sends notifications/cancelled), then slow_count_status {tag} twice, 300 ms apart,
     to see whether the work stopped (side effects, not just messages).

Prints ONE JSON object on stdout:
  {"client","mcpVersion","mode","protocolVersion","serverInfo","progress":[...],
   "slow_result","greeting","cancel":{"progress_before","progress_after",
   "steps_at_close","steps_later","steps_later_still"}}
Exit 0 on success; non-zero with a message on stderr otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib.metadata import version as _pkg_version

import anyio
import mcp_types as types
from mcp import Client


def text_of(result) -> str | None:
    for c in result.content or []:
        if getattr(c, "type", None) == "text":
            return c.text
    return None


async def elicit(_context, params):
    # The one question `greet` asks.
    return types.ElicitResult(action="accept", content={"name": "Ada"})


async def status(client: Client, tag: str) -> int:
    r = await client.call_tool("slow_count_status", {"tag": tag})
    sc = r.structured_content or json.loads(text_of(r) or "{}")
    return int(sc["steps"])


async def run(opts: argparse.Namespace, out: dict) -> None:
    with anyio.fail_after(60):
        await flow(opts, out)


async def flow(opts: argparse.Namespace, out: dict) -> None:
    async with Client(
        opts.url,
        mode=opts.mode,
        elicitation_callback=elicit,
        client_info=types.Implementation(name="staunch-py2-driver", version="0"),
    ) as client:
        out["protocolVersion"] = client.protocol_version
        info = client.server_info
        out["serverInfo"] = {"name": info.name, "version": info.version} if info else None

        seen: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(progress)

        r = await client.call_tool(
            "slow_count", {"steps": 5, "delay_ms": 20}, progress_callback=on_progress
        )
        out["progress"] = [int(p) if float(p).is_integer() else p for p in seen]
        out["slow_result"] = text_of(r)

        if not opts.no_greet:
            g = await client.call_tool("greet", {})
            out["greeting"] = text_of(g)

        # The cancel: give up on a long call from the client side.
        cancel_seen: list[float] = []

        async def on_cancel_progress(progress: float, total: float | None, message: str | None) -> None:
            cancel_seen.append(progress)

        with anyio.move_on_after(0.4):
            await client.call_tool(
                "slow_count",
                {"steps": 400, "delay_ms": 25, "tag": opts.tag},
                progress_callback=on_cancel_progress,
            )
            raise RuntimeError("slow_count finished before the client gave up")
        before = len(cancel_seen)
        await anyio.sleep(0.3)
        at_close = await status(client, opts.tag)
        await anyio.sleep(0.3)
        later = await status(client, opts.tag)
        await anyio.sleep(0.3)
        later_still = await status(client, opts.tag)
        out["cancel"] = {
            "progress_before": before,
            "progress_after": len(cancel_seen) - before,
            "steps_at_close": at_close,
            "steps_later": later,
            "steps_later_still": later_still,
        }


def main() -> int:
    p = argparse.ArgumentParser(prog="py2_client.py")
    p.add_argument("url")
    p.add_argument("--mode", default="auto")
    p.add_argument("--tag", default="py2")
    # For servers without the `greet` tool (the SDK peers).
    p.add_argument("--no-greet", action="store_true")
    opts = p.parse_args()
    out: dict = {"client": "python-mcp", "mcpVersion": _pkg_version("mcp"), "mode": opts.mode}
    try:
        anyio.run(run, opts, out)
    except BaseException as e:  # noqa: BLE001
        print(f"py2_client.py: {type(e).__name__}: {e}", file=sys.stderr)
        print(json.dumps(out), file=sys.stderr)
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
