#!/usr/bin/env node
// Real-client interop driver: the TypeScript SDK's experimental tasks API
// (2025-11-25 tasks; @modelcontextprotocol/sdk 1.32.2, `client.experimental.tasks`).
//
// usage:
//   node ts_tasks_client.mjs URL TOOL JSON_ARGS [--cancel] [--poll-ms N] [--ttl MS]
//                            [--expect STATUS|any] [--deadline-ms N]
//
// Default mode:
//   1. connect + listTools (the SDK caches each tool's execution.taskSupport)
//   2. experimental.tasks.callToolStream({name: TOOL, arguments}, …, {task: {ttl}})
//      — consumed only up to its first message: the `taskCreated` CreateTaskResult
//      (the driver then polls itself instead of letting the stream poll)
//   3. experimental.tasks.getTask(taskId) every poll interval until terminal
//      (interval: --poll-ms, else the task's pollInterval clamped to 50..1000 ms)
//   4. experimental.tasks.getTaskResult(taskId, CallToolResultSchema) (tasks/result)
//   5. experimental.tasks.listTasks() if the server advertises tasks.list
//   Expects final status `completed` unless --expect says otherwise.
// --cancel:
//   1, 2 as above, then experimental.tasks.cancelTask(taskId) (tasks/cancel), poll
//   getTask until terminal (expects `cancelled`), then cancelTask again (a terminal
//   task must be refused with -32602) and tasks/result with a 2 s timeout.
//
// Prints ONE JSON object:
//   {"mode","tool","serverTasksCapability","taskSupport","created":{taskId,status,ttl,
//    pollInterval,…},"statuses":[distinct statuses in order],"polls","final":{…},
//    "result":{"text","isError","relatedTask"}|{"error_code","error_message"},
//    "listed", "cancel":{…}, "recancel_error_code", "elapsed_ms", "errors":[…]}
// Exit 0 on success, 1 with a message on stderr on failure, 2 on usage error.
import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';

const USAGE =
  'usage: node ts_tasks_client.mjs URL TOOL JSON_ARGS [--cancel] [--poll-ms N] [--ttl MS] [--expect STATUS|any] [--deadline-ms N]';
const argv = process.argv.slice(2);
const positional = [];
const opts = { cancel: false, pollMs: undefined, ttl: 60_000, expect: undefined, deadlineMs: 30_000 };
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  const num = () => {
    const v = Number(argv[++i]);
    if (!Number.isFinite(v) || v < 0) usage(`bad value for ${a}`);
    return v;
  };
  if (a === '--cancel') opts.cancel = true;
  else if (a === '--poll-ms') opts.pollMs = num();
  else if (a === '--ttl') opts.ttl = num();
  else if (a === '--deadline-ms') opts.deadlineMs = num();
  else if (a === '--expect') opts.expect = argv[++i];
  else if (a.startsWith('--')) usage(`unknown option ${a}`);
  else positional.push(a);
}
function usage(msg) {
  console.error(msg ? `${msg}\n${USAGE}` : USAGE);
  process.exit(2);
}
if (positional.length !== 3) usage();
const [url, tool, rawArgs] = positional;
let toolArgs;
try {
  toolArgs = JSON.parse(rawArgs);
} catch (e) {
  usage(`JSON_ARGS is not JSON: ${e.message}`);
}
opts.expect ??= opts.cancel ? 'cancelled' : 'completed';

const fail = (msg) => {
  if (Object.keys(out).length) process.stdout.write(JSON.stringify(out) + '\n');
  console.error(`error: ${msg}`);
  process.exit(1);
};
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const textOf = (result) => result?.content?.find((c) => c.type === 'text')?.text ?? null;
const errInfo = (err) => ({ error_code: err?.code ?? null, error_message: String(err?.message ?? err) });
const sdkVersion = JSON.parse(
  readFileSync(new URL('./node_modules/@modelcontextprotocol/sdk/package.json', import.meta.url), 'utf8'),
).version;

const out = { client: 'typescript-sdk', sdkVersion, mode: opts.cancel ? 'cancel' : 'run', tool };
const errors = [];
const started = performance.now();
const overall = setTimeout(() => fail(`overall deadline exceeded`), opts.deadlineMs + 10_000);

const client = new Client({ name: 'staunch-tests-external-ts-tasks', version: '1.0.0' });
client.onerror = (err) => errors.push(String(err?.message ?? err));
const transport = new StreamableHTTPClientTransport(new URL(url));
const tasks = client.experimental.tasks;

async function pollUntilTerminal(taskId, pollMs) {
  const statuses = [];
  let polls = 0;
  let task;
  const deadline = performance.now() + opts.deadlineMs;
  for (;;) {
    task = await tasks.getTask(taskId);
    polls++;
    if (statuses.at(-1) !== task.status) statuses.push(task.status);
    if (TERMINAL.has(task.status)) break;
    if (performance.now() > deadline) {
      out.statuses = statuses;
      out.polls = polls;
      fail(`task ${taskId} not terminal after ${opts.deadlineMs} ms (status ${task.status})`);
    }
    await sleep(pollMs);
  }
  return { statuses, polls, task };
}

async function fetchResult(taskId, requestOptions) {
  try {
    const r = await tasks.getTaskResult(taskId, CallToolResultSchema, requestOptions);
    return {
      text: textOf(r),
      isError: r.isError ?? false,
      relatedTask: r._meta?.['io.modelcontextprotocol/related-task'] ?? null,
    };
  } catch (err) {
    return errInfo(err);
  }
}

try {
  await client.connect(transport);
  out.sessionId = transport.sessionId ?? null;
  out.protocolVersion = transport.protocolVersion ?? null;
  out.serverTasksCapability = client.getServerCapabilities()?.tasks ?? null;

  const { tools } = await client.listTools();
  const def = tools.find((t) => t.name === tool);
  if (!def) fail(`tool ${tool} not in tools/list (${tools.map((t) => t.name).join(', ')})`);
  out.taskSupport = def.execution?.taskSupport ?? null;

  // Create the task. The stream's first message is the CreateTaskResult.
  const stream = tasks.callToolStream({ name: tool, arguments: toolArgs }, CallToolResultSchema, {
    task: { ttl: opts.ttl },
  });
  const first = await stream.next();
  await stream.return(undefined); // stop the SDK's own polling; we poll below
  const msg = first.value;
  if (!msg) fail('callToolStream ended without a message');
  if (msg.type === 'error') fail(`task creation failed: ${msg.error?.code ?? ''} ${msg.error?.message ?? msg.error}`);
  if (msg.type !== 'taskCreated') {
    out.unexpected = msg.type === 'result' ? { type: 'result', text: textOf(msg.result) } : { type: msg.type };
    fail(`server answered without creating a task (first message: ${msg.type})`);
  }
  out.created = msg.task;
  const taskId = msg.task.taskId;
  const pollMs = opts.pollMs ?? Math.min(1000, Math.max(50, msg.task.pollInterval ?? 200));
  out.poll_ms = pollMs;

  if (opts.cancel) {
    try {
      out.cancel = await tasks.cancelTask(taskId);
    } catch (err) {
      out.cancel = errInfo(err);
      fail(`tasks/cancel failed: ${out.cancel.error_code} ${out.cancel.error_message}`);
    }
  }

  const { statuses, polls, task } = await pollUntilTerminal(taskId, pollMs);
  out.statuses = statuses;
  out.polls = polls;
  out.final = task;

  if (opts.cancel) {
    try {
      const again = await tasks.cancelTask(taskId);
      out.recancel_error_code = null;
      out.recancel_result = again;
    } catch (err) {
      out.recancel_error_code = err?.code ?? null;
      out.recancel_error_message = String(err?.message ?? err);
    }
    out.result = await fetchResult(taskId, { timeout: 2000 });
  } else {
    out.result = await fetchResult(taskId);
  }

  if (out.serverTasksCapability?.list) {
    try {
      const listed = await tasks.listTasks();
      out.listed = listed.tasks.some((t) => t.taskId === taskId);
    } catch (err) {
      out.listed = errInfo(err);
    }
  }

  await transport.terminateSession().catch(() => {});
  await client.close();
} catch (err) {
  fail(`${err?.name ?? 'Error'}: ${err?.code ?? ''} ${err?.message ?? err}`);
}

clearTimeout(overall);
out.elapsed_ms = Math.round(performance.now() - started);
out.errors = errors.slice(0, 20);
if (opts.expect !== 'any' && out.final?.status !== opts.expect) {
  fail(`expected final status ${opts.expect}, got ${out.final?.status}`);
}
if (opts.cancel && out.recancel_error_code !== -32602) {
  // the spec requires -32602 for cancelling a terminal task; report, and fail
  fail(`re-cancelling a terminal task gave ${out.recancel_error_code ?? 'success'}, expected -32602`);
}
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(0);
