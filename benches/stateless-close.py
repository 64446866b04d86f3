#!/usr/bin/env python3
"""How fast `staunch serve --http` notices that a 2026-07-28 client closed a request's stream.

usage: benches/stateless-close.py PORT LOG_FILE silent|progress N

Starts N stateless `slow_count {steps: 1000, delay_ms: 50}` calls one after another over raw
sockets, closes each connection 300 ms in (with `progress`, after reading the first progress
bytes; `silent` sends no progress token, so the handler writes nothing for seconds), and reads
the server's lifecycle log for the request's `request.end`: the time from the close to the end
of the handler. Log timestamps have millisecond resolution, so values within ±1 ms mean "at
once". Run against `staunch serve --http 127.0.0.1:PORT --log-file LOG_FILE`.
"""
import datetime
import json
import socket
import statistics
import sys
import time

port, log, mode, n = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
progress = mode == "progress"
prefix = f"{mode}-{int(time.time())}-"


def post(rid):
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "stateless-close", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    if progress:
        meta["progressToken"] = rid
    body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {
        "name": "slow_count", "arguments": {"steps": 1000, "delay_ms": 50, "tag": rid},
        "_meta": meta}}).encode()
    s = socket.create_connection(("127.0.0.1", port))
    head = ("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n"
            "Mcp-Method: tools/call\r\nMcp-Name: slow_count\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")
    s.sendall(head.encode() + body)
    return s


def end_ts(rid):
    for line in open(log):
        v = json.loads(line)
        if v.get("request_id") == rid and v["event"] == "request.end":
            return datetime.datetime.fromisoformat(v["ts"].replace("Z", "+00:00")).timestamp()
    return None


lat = []
for i in range(n):
    rid = f"{prefix}{i}"
    s = post(rid)
    time.sleep(0.3)
    if progress:
        s.recv(65536)
    closed = time.time()
    s.close()
    time.sleep(0.5)
    ts = end_ts(rid)
    if ts is None:
        print(f"{rid}: no request.end within 500 ms of the close", file=sys.stderr)
        sys.exit(1)
    lat.append((ts - closed) * 1000)
lat.sort()
p99 = lat[max(0, int(len(lat) * 0.99) - 1)]
print(f"{mode}: n={n} close -> handler ended: p50 {statistics.median(lat):.1f} ms, "
      f"p99 {p99:.1f} ms, max {max(lat):.1f} ms (log resolution 1 ms)")
