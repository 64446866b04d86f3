#!/usr/bin/env python3
"""Memory per in-flight HTTP call, measured from outside staunch-bench.

usage: benches/memory-outside.py STAUNCH_BIN [--calls N] [--era 2025|2026] [--idle] [-- SERVE_ARGS…]

Starts `STAUNCH_BIN serve --http 127.0.0.1:PORT SERVE_ARGS…` (default: the lifecycle log to a
file and a fresh SQLite store, as users run it), with the per-session and per-peer caps raised
to N, and reads its VmRSS (/proc/PID/status) at four points:

  started   the port answers, nothing asked yet
  session   after `initialize` (2025) or the first `server/discover` (2026)
  warm      after one `echo` call and one `slow_count` call that was answered
  loaded    N `slow_count {steps: 1, delay_ms: 600000}` calls in flight, each POSTed on a
            socket of its own with no progress token, once the RSS stops moving

and prints the bytes per in-flight call over each earlier point. With `--idle` the N sockets
are only opened, with nothing sent on them: what an open connection costs before any request.
The sockets are then closed
and (2025) the session deleted. Standard library only, so it is a driver with no code in
common with the server or with staunch-bench.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time


def rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def settled_rss(pid, quiet=1.0, limit=60.0):
    """The RSS once it has not moved for `quiet` seconds (a server that answers nothing until
    the handler speaks gives no other sign that it took every request)."""
    last, since, end = rss(pid), time.time(), time.time() + limit
    while time.time() < end:
        time.sleep(0.1)
        now = rss(pid)
        if now != last:
            last, since = now, time.time()
        elif time.time() - since >= quiet:
            return now
    return last


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def request_bytes(port, body, headers):
    data = json.dumps(body).encode()
    head = [
        "POST /mcp HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        f"Content-Length: {len(data)}",
    ] + [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + data


def exchange(port, body, headers):
    """One POST on a fresh connection, read to the end of its answer; (headers, text)."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(request_bytes(port, body, {**headers, "Connection": "close"}))
        chunks = []
        while True:
            b = s.recv(65536)
            if not b:
                break
            chunks.append(b)
    raw = b"".join(chunks).decode(errors="replace")
    head, _, rest = raw.partition("\r\n\r\n")
    return head, rest


def stateless_meta():
    return {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "memory-outside", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("bin")
    p.add_argument("--calls", type=int, default=1000)
    p.add_argument("--era", choices=["2025", "2026"], default="2025")
    p.add_argument("--idle", action="store_true", help="open the connections, send nothing")
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    a = p.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    a.serve_args = extra
    n = a.calls
    tmp = tempfile.mkdtemp(prefix="staunch-mem-")
    port = free_port()
    serve_args = a.serve_args or [
        "--log-file", os.path.join(tmp, "lifecycle.jsonl"),
        "--store", os.path.join(tmp, "staunch.db"),
    ]
    caps = [
        "--max-in-flight", str(n * 2), "--max-streams-per-session", str(n * 2),
        "--max-in-flight-per-session", str(n * 2), "--max-in-flight-per-peer", str(n * 2),
    ]
    cmd = [a.bin, "serve", "--http", f"127.0.0.1:{port}", *caps, *serve_args]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except OSError:
                time.sleep(0.05)
        points = {"started": settled_rss(server.pid, 0.5)}
        headers = {}
        if a.era == "2025":
            head, _ = exchange(port, {
                "jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "memory-outside", "version": "0"}},
            }, {})
            sid = next(l.split(":", 1)[1].strip() for l in head.split("\r\n")
                       if l.lower().startswith("mcp-session-id:"))
            headers = {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
            exchange(port, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)

            def call(i, name, args):
                return {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                        "params": {"name": name, "arguments": args}}
        else:
            headers = {"MCP-Protocol-Version": "2026-07-28"}
            exchange(port, {"jsonrpc": "2.0", "id": 0, "method": "server/discover",
                            "params": {"_meta": stateless_meta()}}, headers)

            def call(i, name, args):
                return {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                        "params": {"name": name, "arguments": args, "_meta": stateless_meta()}}

        def call_headers(name):
            if a.era == "2026":
                return {**headers, "Mcp-Method": "tools/call", "Mcp-Name": name}
            return headers

        points["session"] = settled_rss(server.pid, 0.5)
        exchange(port, call(1, "echo", {"text": "warm"}), call_headers("echo"))
        exchange(port, call(2, "slow_count", {"steps": 1, "delay_ms": 1}), call_headers("slow_count"))
        points["warm"] = settled_rss(server.pid, 0.5)
        socks = []
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", port))
            socks.append(s)
            if a.idle:
                continue
            s.sendall(request_bytes(port, call(100 + i, "slow_count",
                                               {"steps": 1, "delay_ms": 600000}),
                                    call_headers("slow_count")))
        loaded = settled_rss(server.pid)
        if server.poll() is not None:
            sys.exit(f"the server exited with {server.returncode}")
        what = "idle connections" if a.idle else f"calls in flight ({a.era})"
        print(f"{n} {what}, {' '.join(cmd[1:])}")
        print(f"  loaded RSS {loaded / 1048576:.1f} MiB")
        for name, value in points.items():
            print(f"  over {name:8} ({value / 1048576:5.1f} MiB): "
                  f"{(loaded - value) / n / 1024:5.1f} KiB per {'connection' if a.idle else 'call'}")
        for s in socks:
            s.close()
        if a.era == "2025":
            with socket.create_connection(("127.0.0.1", port)) as s:
                s.sendall((f"DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                           f"Mcp-Session-Id: {headers['Mcp-Session-Id']}\r\n"
                           "Connection: close\r\n\r\n").encode())
                s.recv(4096)
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
