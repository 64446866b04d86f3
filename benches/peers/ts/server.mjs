#!/usr/bin/env node
// TypeScript SDK peer server (fixture for benchmarks and interop tests).
//
//   node server.mjs stdio
//   node server.mjs http PORT [--tasks]      # Streamable HTTP on http://127.0.0.1:PORT/mcp
//
// Written the way the @modelcontextprotocol/sdk 1.x docs recommend (McpServer +
// registerTool with a zod raw shape; createMcpExpressApp + one stateful
// StreamableHTTPServerTransport per session, keyed by a randomUUID session id,
// with an event store for resumability).
//
// Tools:
//   echo {text}                    -> text content `text`
//   slow_count {steps, delay_ms, tag?}
//                                  -> cooperative: per step checks extra.signal,
//                                     sleeps delay_ms (abortable), records the step
//                                     under `tag`, reports progress step+1/steps if
//                                     the request carried a progressToken; returns
//                                     text `counted N`.
//   stubborn_count {steps, delay_ms, tag?}
//                                  -> like slow_count, but ignores extra.signal and
//                                     sleeps unabortably: a cancel does not stop it, and
//                                     its pending timers keep the process alive after
//                                     stdin closes (a server that ignores cancels, for
//                                     the proxy's stop policy).
//   add_prompt {name}              -> registers a prompt `name` (text "hello from NAME");
//                                     the SDK sends notifications/prompts/list_changed.
//                                     Prompt `greeting` is there from the start.
//   touch_resource {uri}           -> bumps the revision of resource note://counter and, if
//                                     `uri` is subscribed (resources/subscribe), sends
//                                     notifications/resources/updated {uri, _meta:
//                                     {"peer/revision": N}}; returns text `updated URI to N`
//                                     or `not subscribed URI`.
//   greet {}                       -> asks the client's name (elicitation/create on the
//                                     call's own stream, extra.sendRequest) and returns
//                                     text `Hello, NAME!` (`Hello, stranger!` if declined);
//                                     each call is recorded as a step under tag `greet`
//                                     (slow_count_status {tag: "greet"}: how often it ran).
//   rich {result, progress?}       -> answers with `result` itself as its tool result, as
//                                     given: annotations, _meta, structuredContent, keys of
//                                     later protocol versions (what a proxy must pass on
//                                     unchanged; the SDK itself refuses unknown content types).
//                                     First, if the request carried a progressToken, one
//                                     notifications/progress per object in `progress`, with
//                                     that object's fields beside progressToken and
//                                     progress (1, 2, …): _meta and unknown keys.
//   slow_count_status {tag?}       -> {"tag","steps","last_step_unix_ms"} as
//                                     structuredContent and JSON text: did the work
//                                     go on after a cancel?
//   progress_flood {reports}       -> benchmark fixture: progress 1..=reports back to
//                                     back (if the request carried a progressToken);
//                                     returns text `reported N`.
//   slow_count_task {steps, delay_ms, tag?}   (only with --tasks; HTTP or stdio)
//                                  -> same work run as an experimental 2025-11-25
//                                     task (server.experimental.tasks.registerToolTask,
//                                     taskSupport "optional"), backed by the SDK's
//                                     InMemoryTaskStore. Stops when the task is cancelled;
//                                     reports each step to the creating request's progress
//                                     token, when it had one.
//   slow_count_task_required {steps, delay_ms, tag?}   (only with --tasks)
//                                  -> the same, taskSupport "required": callable only as
//                                     a task.
//
// With PEER_STEPS_DIR set, each step of a tagged count also writes PEER_STEPS_DIR/<tag>
// as "<steps> <pid>": a side effect outside the process, which a test reads after the
// process is gone (did the work stop, which process did it).
//
// The SDK is resolved from ./node_modules, a symlink to .tools/ts/node_modules that
// scripts/setup-tools creates.
import { randomUUID } from 'node:crypto';
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import * as z from 'zod/v4';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import {
  ElicitResultSchema,
  isInitializeRequest,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { InMemoryTaskStore, InMemoryTaskMessageQueue } from '@modelcontextprotocol/sdk/experimental/tasks/stores/in-memory.js';

const [mode = 'stdio', portArg] = process.argv.slice(2);
const withTasks = process.argv.includes('--tasks');
const log = (...args) => console.error('[ts-peer]', ...args); // stderr: stdout is the stdio channel

// ---------------------------------------------------------------------------
// Event store: the SDK ships InMemoryEventStore only as an example
// (src/examples/shared/inMemoryEventStore.ts), not as public API, so this is a
// small one of our own implementing the EventStore interface.
// Event ids are `<streamId>_<seq>`; replay sends every later event of that stream.
class InMemoryEventStore {
  #events = new Map(); // eventId -> { streamId, message }
  #seq = 0;

  async storeEvent(streamId, message) {
    const eventId = `${streamId}_${String(++this.#seq).padStart(10, '0')}`;
    this.#events.set(eventId, { streamId, message });
    return eventId;
  }

  async getStreamIdForEventId(eventId) {
    return this.#events.get(eventId)?.streamId;
  }

  async replayEventsAfter(lastEventId, { send }) {
    const last = this.#events.get(lastEventId);
    if (!last) return '';
    let after = false;
    for (const [eventId, { streamId, message }] of this.#events) {
      if (eventId === lastEventId) { after = true; continue; }
      if (after && streamId === last.streamId) await send(eventId, message);
    }
    return last.streamId;
  }
}

// ---------------------------------------------------------------------------
const countArgs = {
  steps: z.number().int().min(0).describe('Number of steps'),
  delay_ms: z.number().int().min(0).describe('Milliseconds to sleep per step'),
  tag: z.string().optional().describe('Records each step under this tag (slow_count_status)'),
};

// Step `step` (from 0) of `steps` done, told to `progressToken` when the request carried one;
// a failed send (the client gone) does not stop the work.
async function reportStep(extra, progressToken, step, steps) {
  if (progressToken === undefined) return;
  await extra
    .sendNotification({
      method: 'notifications/progress',
      params: { progressToken, progress: step + 1, total: steps },
    })
    .catch(() => {});
}

// Side effects of slow_count, per tag (shared by every session's McpServer).
const stepsByTag = new Map(); // tag -> { steps, last }
function recordStep(tag) {
  const e = stepsByTag.get(tag) ?? { steps: 0, last: 0 };
  e.steps += 1;
  e.last = Date.now();
  stepsByTag.set(tag, e);
  const dir = process.env.PEER_STEPS_DIR;
  if (dir && /^[A-Za-z0-9]+$/.test(tag)) {
    // Written aside, then renamed over: a reader never sees the file emptied for the write.
    const tmp = join(dir, `${tag}.${process.pid}.tmp`);
    writeFileSync(tmp, `${e.steps} ${process.pid}`);
    renameSync(tmp, join(dir, tag));
  }
}

// One shared task store for all sessions, as in the SDK's simpleStreamableHttp example.
const taskStore = withTasks ? new InMemoryTaskStore() : undefined;

function buildServer() {
  const server = new McpServer(
    { name: 'staunch-peer-ts', version: '1.0.0' },
    withTasks
      ? {
          capabilities: { tasks: { requests: { tools: { call: {} } }, list: {}, cancel: {} } },
          taskStore,
          taskMessageQueue: new InMemoryTaskMessageQueue(),
        }
      : {},
  );

  server.registerTool(
    'echo',
    { description: 'Echo the given text back', inputSchema: { text: z.string() } },
    async ({ text }) => ({ content: [{ type: 'text', text }] }),
  );

  server.registerTool(
    'slow_count',
    {
      description: 'Count to `steps`, sleeping `delay_ms` per step, reporting progress; honours cancellation',
      inputSchema: countArgs,
    },
    async ({ steps, delay_ms, tag }, extra) => {
      const progressToken = extra._meta?.progressToken;
      for (let step = 0; step < steps; step++) {
        extra.signal.throwIfAborted();
        await sleep(delay_ms, undefined, { signal: extra.signal });
        recordStep(tag ?? '');
        if (progressToken !== undefined) {
          await extra.sendNotification({
            method: 'notifications/progress',
            params: { progressToken, progress: step + 1, total: steps },
          });
        }
      }
      return { content: [{ type: 'text', text: `counted ${steps}` }] };
    },
  );

  server.registerTool(
    'rich',
    {
      description: 'Answer with the given object as the tool result, every field as given',
      inputSchema: {
        result: z.record(z.string(), z.unknown()),
        progress: z.array(z.record(z.string(), z.unknown())).optional(),
      },
    },
    async ({ result, progress }, extra) => {
      const progressToken = extra._meta?.progressToken;
      if (progressToken !== undefined) {
        for (const [i, fields] of (progress ?? []).entries()) {
          await extra.sendNotification({
            method: 'notifications/progress',
            params: { ...fields, progressToken, progress: i + 1 },
          });
        }
      }
      return result;
    },
  );

  const prompt = (name) =>
    server.registerPrompt(name, { description: `Says hello from ${name}` }, async () => ({
      messages: [{ role: 'user', content: { type: 'text', text: `hello from ${name}` } }],
    }));
  prompt('greeting');
  server.registerTool(
    'add_prompt',
    {
      description: 'Register a prompt at run time (the SDK announces the list change)',
      inputSchema: { name: z.string() },
    },
    async ({ name }) => {
      prompt(name);
      return { content: [{ type: 'text', text: `added ${name}` }] };
    },
  );

  // A resource a client may subscribe to: touch_resource changes it and, while it is
  // subscribed, tells the client with the SDK's sendResourceUpdated.
  let revision = 0;
  const subscribed = new Set();
  server.registerResource(
    'counter',
    'note://counter',
    { description: 'A revision number touch_resource bumps' },
    async (uri) => ({ contents: [{ uri: uri.href, text: `revision ${revision}` }] }),
  );
  server.server.registerCapabilities({ resources: { subscribe: true } });
  server.server.setRequestHandler(SubscribeRequestSchema, async (req) => {
    subscribed.add(req.params.uri);
    return {};
  });
  server.server.setRequestHandler(UnsubscribeRequestSchema, async (req) => {
    subscribed.delete(req.params.uri);
    return {};
  });
  server.registerTool(
    'touch_resource',
    {
      description: 'Bump a resource; its subscribers hear notifications/resources/updated',
      inputSchema: { uri: z.string() },
    },
    async ({ uri }) => {
      revision += 1;
      if (!subscribed.has(uri)) {
        return { content: [{ type: 'text', text: `not subscribed ${uri}` }] };
      }
      await server.server.sendResourceUpdated({ uri, _meta: { 'peer/revision': revision } });
      return { content: [{ type: 'text', text: `updated ${uri} to ${revision}` }] };
    },
  );

  server.registerTool(
    'stubborn_count',
    {
      description: 'Like slow_count, but ignores cancellation (a fixture for orphaned-work checks)',
      inputSchema: countArgs,
    },
    async ({ steps, delay_ms, tag }, extra) => {
      const progressToken = extra._meta?.progressToken;
      for (let step = 0; step < steps; step++) {
        await sleep(delay_ms);
        recordStep(tag ?? '');
        // A closed connection does not stop it either.
        await reportStep(extra, progressToken, step, steps);
      }
      return { content: [{ type: 'text', text: `counted ${steps}` }] };
    },
  );

  server.registerTool(
    'greet',
    { description: "Ask the user's name, then greet them", inputSchema: {} },
    async (_args, extra) => {
      recordStep('greet');
      const answer = await extra.sendRequest(
        {
          method: 'elicitation/create',
          params: {
            message: 'What is your name?',
            requestedSchema: {
              type: 'object',
              properties: { name: { type: 'string' } },
              required: ['name'],
            },
          },
        },
        ElicitResultSchema,
      );
      const name = answer.action === 'accept' ? answer.content?.name : undefined;
      return { content: [{ type: 'text', text: `Hello, ${name ?? 'stranger'}!` }] };
    },
  );

  server.registerTool(
    'slow_count_status',
    {
      description: 'Steps slow_count has done for `tag` and when the last one happened (unix ms)',
      inputSchema: { tag: z.string().optional() },
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
      inputSchema: { reports: z.number().int().min(0).describe('How many progress reports') },
    },
    async ({ reports }, extra) => {
      const progressToken = extra._meta?.progressToken;
      if (progressToken !== undefined) {
        for (let i = 1; i <= reports; i++) {
          extra.signal.throwIfAborted();
          await extra.sendNotification({
            method: 'notifications/progress',
            params: { progressToken, progress: i, total: reports },
          });
        }
      }
      return { content: [{ type: 'text', text: `reported ${reports}` }] };
    },
  );

  if (withTasks) {
    // The task's work: out of band, one step per delay_ms (recorded under `tag`), the task's
    // status its cancellation signal.
    const countTask = {
      async createTask({ steps, delay_ms, tag }, extra) {
        const { taskStore: store, taskRequestedTtl } = extra;
        // The creating request's token stays valid until the task ends (2025-11-25).
        const progressToken = extra._meta?.progressToken;
        const task = await store.createTask({ ttl: taskRequestedTtl ?? 60_000, pollInterval: 100 });
        (async () => {
          try {
            for (let step = 0; step < steps; step++) {
              const current = await store.getTask(task.taskId);
              if (!current || current.status === 'cancelled') return;
              await sleep(delay_ms);
              recordStep(tag ?? '');
              await reportStep(extra, progressToken, step, steps);
            }
            const current = await store.getTask(task.taskId);
            if (!current || current.status === 'cancelled') return;
            await store.storeTaskResult(task.taskId, 'completed', {
              content: [{ type: 'text', text: `counted ${steps}` }],
            });
          } catch (err) {
            log('task', task.taskId, 'error:', err?.message ?? err);
          }
        })();
        return { task };
      },
      async getTask(_args, { taskId, taskStore: store }) {
        return await store.getTask(taskId);
      },
      async getTaskResult(_args, { taskId, taskStore: store }) {
        return await store.getTaskResult(taskId);
      },
    };
    server.experimental.tasks.registerToolTask(
      'slow_count_task',
      {
        description: 'slow_count run as a task (experimental tasks API)',
        inputSchema: countArgs,
        execution: { taskSupport: 'optional' },
      },
      countTask,
    );
    server.experimental.tasks.registerToolTask(
      'slow_count_task_required',
      {
        description: 'slow_count that can only be called as a task',
        inputSchema: countArgs,
        execution: { taskSupport: 'required' },
      },
      countTask,
    );
  }
  return server;
}

// ---------------------------------------------------------------------------
async function runStdio() {
  const server = buildServer();
  await server.connect(new StdioServerTransport());
  log('stdio ready');
}

async function runHttp(port) {
  const host = '127.0.0.1';
  // createMcpExpressApp: JSON body parsing + DNS-rebinding (Host) protection for localhost.
  const app = createMcpExpressApp({ host });
  const transports = new Map(); // session id -> StreamableHTTPServerTransport

  const badSession = (res, status, message) =>
    res.status(status).json({ jsonrpc: '2.0', error: { code: -32000, message }, id: null });

  app.post('/mcp', async (req, res) => {
    const sessionId = req.headers['mcp-session-id'];
    try {
      let transport = sessionId ? transports.get(sessionId) : undefined;
      if (!transport) {
        if (sessionId) return badSession(res, 404, 'Session not found');
        if (!isInitializeRequest(req.body)) return badSession(res, 400, 'Bad Request: No valid session ID provided');
        transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          eventStore: new InMemoryEventStore(),
          onsessioninitialized: (sid) => {
            transports.set(sid, transport);
          },
        });
        transport.onclose = () => {
          if (transport.sessionId) transports.delete(transport.sessionId);
        };
        await buildServer().connect(transport);
      }
      await transport.handleRequest(req, res, req.body);
    } catch (err) {
      log('error handling POST:', err);
      if (!res.headersSent) {
        res.status(500).json({ jsonrpc: '2.0', error: { code: -32603, message: 'Internal server error' }, id: null });
      }
    }
  });

  // GET (standalone SSE stream / resumption) and DELETE (session end) need a known session.
  const sessionRequest = async (req, res) => {
    const sessionId = req.headers['mcp-session-id'];
    const transport = sessionId ? transports.get(sessionId) : undefined;
    if (!transport) return badSession(res, sessionId ? 404 : 400, sessionId ? 'Session not found' : 'Missing session ID');
    await transport.handleRequest(req, res);
  };
  app.get('/mcp', sessionRequest);
  app.delete('/mcp', sessionRequest);

  const httpServer = app.listen(port, host, (err) => {
    if (err) {
      log('listen failed:', err);
      process.exit(1);
    }
    log(`http ready on http://${host}:${port}/mcp${withTasks ? ' (tasks enabled)' : ''}`);
  });

  const shutdown = async () => {
    for (const t of transports.values()) await t.close().catch(() => {});
    httpServer.close();
    process.exit(0);
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
}

if (mode === 'stdio') {
  await runStdio();
} else if (mode === 'http') {
  const port = Number.parseInt(portArg ?? '', 10);
  if (!Number.isInteger(port) || port <= 0 || port > 65535) {
    console.error('usage: node server.mjs http PORT [--tasks]');
    process.exit(2);
  }
  await runHttp(port);
} else {
  console.error('usage: node server.mjs stdio | http PORT [--tasks]');
  process.exit(2);
}
