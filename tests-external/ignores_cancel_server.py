#!/usr/bin/env python3
"""A deliberately bad MCP server over stdio, for `staunch probe` tests (stdlib only).

    python3 ignores_cancel_server.py            # each tools/call in its own thread
    python3 ignores_cancel_server.py --inline   # tools run on the message loop itself

`slow_count {steps, delay_ms}` sleeps per step and reports progress when asked, and
**ignores `notifications/cancelled`**: the work goes on to the end and the result is sent
anyway — the orphaned work the seed describes. With `--inline` the loop also blocks while a
tool runs, so `ping` waits behind it. Everything else is minimal but valid: initialize,
tools/list, ping.
"""

import json
import sys
import threading
import time

INLINE = "--inline" in sys.argv[1:]
out_lock = threading.Lock()


def send(msg):
    with out_lock:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def slow_count(req_id, params):
    args = params.get("arguments") or {}
    steps = int(args.get("steps", 10))
    delay = int(args.get("delay_ms", 50)) / 1000.0
    token = (params.get("_meta") or {}).get("progressToken")
    for step in range(steps):
        time.sleep(delay)
        if token is not None:
            send({"jsonrpc": "2.0", "method": "notifications/progress",
                  "params": {"progressToken": token, "progress": step + 1, "total": steps}})
    send({"jsonrpc": "2.0", "id": req_id,
          "result": {"content": [{"type": "text", "text": f"counted {steps}"}]}})


TOOLS = [{
    "name": "slow_count",
    "description": "Counts slowly; ignores cancellation (a test fixture).",
    "inputSchema": {"type": "object", "properties": {
        "steps": {"type": "integer"}, "delay_ms": {"type": "integer"}}},
}]


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method, req_id = msg.get("method"), msg.get("id")
        if req_id is None:
            continue  # notifications, including notifications/cancelled: ignored
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": req_id, "result": {
                "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                "serverInfo": {"name": "ignores-cancel", "version": "0"}}})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": req_id, "result": {}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": req_id, "result": {"tools": TOOLS}})
        elif method == "tools/call" and msg.get("params", {}).get("name") == "slow_count":
            if INLINE:
                slow_count(req_id, msg["params"])
            else:
                threading.Thread(target=slow_count, args=(req_id, msg["params"]), daemon=True).start()
        else:
            send({"jsonrpc": "2.0", "id": req_id,
                  "error": {"code": -32601, "message": f"unknown method {method}"}})


if __name__ == "__main__":
    main()
