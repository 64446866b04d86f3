#!/usr/bin/env node
// Real-client interop driver: the TypeScript SDK (@modelcontextprotocol/sdk 1.32.2)
// `Client` over `StreamableHTTPClientTransport`.
//
// usage:
//   node ts_http_client.mjs URL              # basic flow
//   node ts_http_client.mjs URL --timeout    # request timeout flow
//
// Basic: connect (initialize), listTools, callTool slow_count {steps:5, delay_ms:20}
// with `onprogress`, callTool echo {text:"hi"}, then terminateSession (DELETE) and
// close. Prints ONE JSON object:
//   {"client","sdkVersion","transport","sessionId","protocolVersion","serverInfo",
//    "tools":[…],"progress":[…],"progress_total","slow_result","slow_ms","echo",
//    "terminated","errors":[…]}
//
// --timeout: callTool slow_count {steps:1000, delay_ms:20} with {timeout: 300,
// onprogress}. The SDK sends notifications/cancelled and rejects with McpError
// -32001 "Request timed out". Then echo on the same session, and 300 ms of
// listening for leftovers (progress for the abandoned token, a late response),
// which the SDK reports through client.onerror. Prints
//   {"mode":"timeout","error":true,"error_code":-32001,"error_message",
//    "elapsed_ms","progress_before_timeout","echo_after","echo_after_ms",
//    "progress_after_cancel","late_response","errors":[…], …}
//
// Exit 0 on success, 1 with a message on stderr on failure, 2 on usage error.
// The SDK resolves from ./node_modules (symlink made by scripts/setup-tools).
import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const OVERALL_MS = 30_000;
const args = process.argv.slice(2);
const url = args.find((a) => !a.startsWith('--'));
const timeoutMode = args.includes('--timeout');
if (!url) {
  console.error('usage: node ts_http_client.mjs URL [--timeout]');
  process.exit(2);
}

// (the package's exports map sends `…/package.json` to dist/cjs, so read the file)
const sdkVersion = JSON.parse(
  readFileSync(new URL('./node_modules/@modelcontextprotocol/sdk/package.json', import.meta.url), 'utf8'),
).version;

const fail = (msg) => {
  console.error(`error: ${msg}`);
  process.exit(1);
};
const overall = setTimeout(() => fail(`overall timeout (${OVERALL_MS} ms) exceeded`), OVERALL_MS);
const textOf = (result) => result?.content?.find((c) => c.type === 'text')?.text ?? null;

const out = { client: 'typescript-sdk', sdkVersion, transport: 'streamable-http' };
const errors = []; // what the SDK reports out-of-band via onerror
const client = new Client({ name: 'staunch-tests-external-ts', version: '1.0.0' });
client.onerror = (err) => errors.push(String(err?.message ?? err));
const transport = new StreamableHTTPClientTransport(new URL(url));

try {
  await client.connect(transport);
  out.sessionId = transport.sessionId ?? null;
  out.protocolVersion = transport.protocolVersion ?? null;
  const info = client.getServerVersion();
  out.serverInfo = info ? { name: info.name, version: info.version } : null;

  if (!timeoutMode) {
    const { tools } = await client.listTools();
    out.tools = tools.map((t) => t.name);

    const progress = [];
    let total = null;
    const t0 = performance.now();
    const slow = await client.callTool({ name: 'slow_count', arguments: { steps: 5, delay_ms: 20 } }, undefined, {
      onprogress: (p) => {
        progress.push(p.progress);
        total = p.total ?? null;
      },
    });
    out.slow_ms = Math.round(performance.now() - t0);
    if (slow.isError) fail(`slow_count returned isError: ${textOf(slow)}`);
    out.progress = progress;
    out.progress_total = total;
    out.slow_result = textOf(slow);

    const echo = await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
    if (echo.isError) fail(`echo returned isError: ${textOf(echo)}`);
    out.echo = textOf(echo);
  } else {
    out.mode = 'timeout';
    out.timeout_ms = 300;
    const progress = [];
    const t0 = performance.now();
    try {
      const r = await client.callTool({ name: 'slow_count', arguments: { steps: 1000, delay_ms: 20 } }, undefined, {
        timeout: 300,
        onprogress: (p) => progress.push(p.progress),
      });
      out.error = false;
      out.result = textOf(r);
    } catch (err) {
      out.error = true;
      out.error_code = err?.code ?? null;
      out.error_message = String(err?.message ?? err);
    }
    out.elapsed_ms = Math.round(performance.now() - t0);
    out.progress_before_timeout = progress.length;
    const errorsBefore = errors.length;

    const t1 = performance.now();
    const echo = await client.callTool({ name: 'echo', arguments: { text: 'still alive' } });
    out.echo_after_ms = Math.round(performance.now() - t1);
    out.echo_after = textOf(echo);
    await new Promise((r) => setTimeout(r, 300));
    const later = errors.slice(errorsBefore);
    out.progress_after_cancel = later.filter((e) => /progress notification for an unknown token/i.test(e)).length;
    out.late_response = later.some((e) => /response for an unknown message ID/i.test(e));
  }

  try {
    await transport.terminateSession();
    out.terminated = true;
  } catch (err) {
    out.terminated = false;
    out.terminate_error = String(err?.message ?? err);
  }
  await client.close();
} catch (err) {
  fail(`${err?.name ?? 'Error'}: ${err?.message ?? err}`);
}

clearTimeout(overall);
out.errors = errors.slice(0, 20);
process.stdout.write(JSON.stringify(out) + '\n');
if (timeoutMode) {
  if (!out.error) fail('--timeout: slow_count did not fail');
  if (out.error_code !== -32001) fail(`--timeout: expected error code -32001, got ${out.error_code}`);
  if (out.echo_after !== 'still alive') fail('--timeout: session unusable after the timeout');
}
process.exit(0);
