// benches/node-stdio-ping.mjs BIN [N] — the stdio round trip as a Node-based MCP client sees it.
//
// Spawns `BIN serve --no-log --store :memory:` with Node's child_process (whose stdio pipes are
// socket pairs, not pipes: libuv makes them so; staunch-bench spawns with real pipes), then times
// N `ping`s one at a time (default 3000) and prints their p50 and p99 in microseconds. Node only,
// no packages.
import { spawn } from 'node:child_process';
const [bin, n = '3000'] = process.argv.slice(2);
const child = spawn(bin, ['serve', '--no-log', '--store', ':memory:'], { stdio: ['pipe', 'pipe', 'inherit'] });
let buf = '';
let waiting = null;
child.stdout.on('data', (d) => {
  buf += d;
  let i;
  while ((i = buf.indexOf('\n')) >= 0) {
    const line = buf.slice(0, i); buf = buf.slice(i + 1);
    if (waiting) { const w = waiting; waiting = null; w(line); }
  }
});
const send = (m) => new Promise((res) => { waiting = res; child.stdin.write(JSON.stringify(m) + '\n'); });
await send({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'p', version: '0' } } });
child.stdin.write(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) + '\n');
const times = [];
for (let k = 0; k < Number(n); k++) {
  const t = process.hrtime.bigint();
  await send({ jsonrpc: '2.0', id: k + 1, method: 'ping' });
  times.push(Number(process.hrtime.bigint() - t) / 1000);
}
times.sort((a, b) => a - b);
console.log(`p50 ${times[Math.floor(times.length / 2)].toFixed(0)} µs, p99 ${times[Math.floor(times.length * 0.99)].toFixed(0)} µs`);
child.stdin.end();
