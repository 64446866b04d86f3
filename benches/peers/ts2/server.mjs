#!/usr/bin/env node
// TypeScript SDK v2 peer server (`@modelcontextprotocol/server` 2.4.0): a benchmark peer of
// the 2026-07-28 generation.
//
//   node server.mjs stdio          # serveStdio: the opening exchange picks the era
//   node server.mjs http PORT      # createMcpHandler on http://127.0.0.1:PORT/mcp
//
// Written the way the v2 docs recommend: ONE server factory serves both eras; HTTP is
// `createMcpHandler(factory)` (a fresh McpServer per request, 2026-07-28 requests served
// statelessly, 2025 traffic by its default stateless legacy fallback) mounted on plain
// `node:http` through `toNodeHandler` from `@modelcontextprotocol/node` with its localhost
// Host/Origin guards. When the client closes a request's response stream, the adapter aborts
// the web Request, and the SDK aborts the handler's `ctx.mcpReq.signal` — no code here.
//
// Tools (the convention every peer in benches/peers shares):
//   echo {text}                          -> text content `text`
//   slow_count {steps, delay_ms, tag?}   -> cooperative: per step sleeps delay_ms (abortable
//                                           through ctx.mcpReq.signal), records the step for
//                                           `tag`, reports progress step/steps when the
//                                           request carried a progressToken; `counted N`.
//   slow_count_status {tag?}             -> {"tag","steps","last_step_unix_ms"} as
//                                           structuredContent and as JSON text.
//   progress_flood {reports}             -> progress 1..=reports back to back; `reported N`.
//
// The SDK is resolved from ./node_modules, a symlink to .tools/ts2/node_modules that
// scripts/setup-tools creates.
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import * as z from 'zod/v4';
import { McpServer, createMcpHandler } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { toNodeHandler, localhostHostValidation, localhostOriginValidation } from '@modelcontextprotocol/node';

const [mode = 'stdio', portArg] = process.argv.slice(2);
const log = (...args) => console.error('[ts2-peer]', ...args); // stderr: stdout is the stdio channel

// Side effects of slow_count, per tag: what a client that closed a stream asks about later.
// Module-level because createMcpHandler builds a fresh McpServer per request.
const stepsByTag = new Map(); // tag -> { steps, last }
function recordStep(tag) {
  const e = stepsByTag.get(tag) ?? { steps: 0, last: 0 };
  e.steps += 1;
  e.last = Date.now();
  stepsByTag.set(tag, e);
}

function progressToken(ctx) {
  return ctx.mcpReq._meta?.progressToken;
}

function buildServer() {
  const server = new McpServer({ name: 'staunch-peer-ts2', version: '1.0.0' }, { capabilities: { tools: {} } });

  server.registerTool(
    'echo',
    { description: 'Echo the given text back', inputSchema: z.object({ text: z.string() }) },
    async ({ text }) => ({ content: [{ type: 'text', text }] }),
  );

  server.registerTool(
    'slow_count',
    {
      description: 'Count to `steps`, sleeping `delay_ms` per step, reporting progress; honours cancellation',
      inputSchema: z.object({
        steps: z.number().int().min(0).describe('Number of steps'),
        delay_ms: z.number().int().min(0).describe('Milliseconds to sleep per step'),
        tag: z.string().optional().describe('Records each step under this tag (slow_count_status)'),
      }),
    },
    async ({ steps, delay_ms, tag }, ctx) => {
      const token = progressToken(ctx);
      const signal = ctx.mcpReq.signal;
      for (let step = 0; step < steps; step++) {
        signal.throwIfAborted();
        await sleep(delay_ms, undefined, { signal });
        recordStep(tag ?? '');
        if (token !== undefined) {
          await ctx.mcpReq.notify({
            method: 'notifications/progress',
            params: { progressToken: token, progress: step + 1, total: steps },
          });
        }
      }
      return { content: [{ type: 'text', text: `counted ${steps}` }] };
    },
  );

  server.registerTool(
    'slow_count_status',
    {
      description: 'Steps slow_count has done for `tag` and when the last one happened (unix ms)',
      inputSchema: z.object({ tag: z.string().optional() }),
    },
    async ({ tag }) => {
      const e = stepsByTag.get(tag ?? '') ?? { steps: 0, last: 0 };
      const status = { tag: tag ?? '', steps: e.steps, last_step_unix_ms: e.last };
      return { content: [{ type: 'text', text: JSON.stringify(status) }], structuredContent: status };
    },
  );

  // Benchmark fixture: progress as fast as the SDK sends it (the SDK does not limit it).
  server.registerTool(
    'progress_flood',
    {
      description: 'Report progress `reports` times as fast as possible',
      inputSchema: z.object({ reports: z.number().int().min(0).describe('How many progress reports') }),
    },
    async ({ reports }, ctx) => {
      const token = progressToken(ctx);
      if (token !== undefined) {
        for (let i = 1; i <= reports; i++) {
          ctx.mcpReq.signal.throwIfAborted();
          await ctx.mcpReq.notify({
            method: 'notifications/progress',
            params: { progressToken: token, progress: i, total: reports },
          });
        }
      }
      return { content: [{ type: 'text', text: `reported ${reports}` }] };
    },
  );
  return server;
}

function runStdio() {
  serveStdio(() => buildServer(), { onerror: (e) => log('error:', e?.message ?? e) });
  log('stdio ready');
}

function runHttp(port) {
  const host = '127.0.0.1';
  const handler = createMcpHandler(() => buildServer(), { onerror: (e) => log('error:', e?.message ?? e) });
  const serve = toNodeHandler(handler, { onerror: (e) => log('adapter error:', e?.message ?? e) });
  const validHost = localhostHostValidation();
  const validOrigin = localhostOriginValidation();
  const server = http.createServer((req, res) => {
    if (!validHost(req, res) || !validOrigin(req, res)) return;
    if ((req.url ?? '').split('?')[0] !== '/mcp') {
      res.writeHead(404).end();
      return;
    }
    void serve(req, res);
  });
  server.listen(port, host, () => log(`http ready on http://${host}:${port}/mcp`));
  const shutdown = async () => {
    await handler.close().catch(() => {});
    server.close();
    process.exit(0);
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
}

if (mode === 'stdio') {
  runStdio();
} else if (mode === 'http') {
  const port = Number.parseInt(portArg ?? '', 10);
  if (!Number.isInteger(port) || port <= 0 || port > 65535) {
    console.error('usage: node server.mjs http PORT');
    process.exit(2);
  }
  runHttp(port);
} else {
  console.error('usage: node server.mjs stdio | http PORT');
  process.exit(2);
}
