// Real-client interop driver: the TypeScript SDK v2 client (@modelcontextprotocol/client
// 2.4.0) over Streamable HTTP.
//
// usage: node ts2_client.mjs URL auto|legacy [TAG]
//
// `auto` probes server/discover and speaks 2026-07-28 when the server offers it; `legacy`
// runs the 2025 initialize handshake (the SDK's default). Against the same server, each mode:
//   1. slow_count {steps: 5, delay_ms: 20} with onprogress;
//   2. greet {}: the elicitation/create handler answers "Ada" (an input-required round in
//      2026-07-28, a server->client request in 2025);
//   3. the cancel: slow_count {steps: 400, delay_ms: 25, tag} aborted through an
//      AbortSignal after 400 ms, then slow_count_status {tag} three times, 300 ms apart, to see
//      whether the work stopped (side effects, not just messages).
// Prints ONE JSON object on stdout; exits non-zero with a message on stderr on failure.

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const [url, mode = 'auto', tag = 'ts2'] = process.argv.slice(2);
if (!url) {
  console.error('usage: ts2_client.mjs URL auto|legacy [TAG]');
  process.exit(2);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const textOf = (r) => (r.content ?? []).find((c) => c.type === 'text')?.text ?? null;

async function main() {
  const out = { client: 'typescript-sdk-v2', sdkVersion: '2.4.0', mode };
  const client = new Client(
    { name: 'staunch-ts2-driver', version: '0' },
    {
      capabilities: { elicitation: { form: {} } },
      versionNegotiation: { mode: mode === 'auto' ? 'auto' : 'legacy' },
    },
  );
  client.setRequestHandler('elicitation/create', async () => ({
    action: 'accept',
    content: { name: 'Ada' },
  }));
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  out.protocolVersion = client.getNegotiatedProtocolVersion();
  out.serverInfo = client.getServerVersion() ?? null;

  const progress = [];
  const slow = await client.callTool(
    { name: 'slow_count', arguments: { steps: 5, delay_ms: 20 } },
    { onprogress: (p) => progress.push(p.progress) },
  );
  out.progress = progress;
  out.slow_result = textOf(slow);

  const greet = await client.callTool({ name: 'greet', arguments: {} });
  out.greeting = textOf(greet);

  // The cancel: the caller gives up through an AbortSignal.
  const seen = [];
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort('the caller gave up'), 400);
  let aborted = false;
  try {
    await client.callTool(
      { name: 'slow_count', arguments: { steps: 400, delay_ms: 25, tag } },
      { onprogress: (p) => seen.push(p.progress), signal: abort.signal, timeout: 30000 },
    );
  } catch (e) {
    aborted = true;
    out.abort_error = String(e?.message ?? e).slice(0, 200);
  }
  clearTimeout(timer);
  if (!aborted) throw new Error('slow_count finished before the caller gave up');
  const before = seen.length;
  const status = async () => {
    const r = await client.callTool({ name: 'slow_count_status', arguments: { tag } });
    return (r.structuredContent ?? JSON.parse(textOf(r) ?? '{}')).steps;
  };
  await sleep(300);
  const atClose = await status();
  await sleep(300);
  const later = await status();
  await sleep(300);
  const laterStill = await status();
  out.cancel = {
    progress_before: before,
    progress_after: seen.length - before,
    steps_at_close: atClose,
    steps_later: later,
    steps_later_still: laterStill,
  };
  await client.close();
  return out;
}

const guard = setTimeout(() => {
  console.error('ts2_client.mjs: overall timeout (60 s)');
  process.exit(1);
}, 60000);
main()
  .then((out) => {
    clearTimeout(guard);
    console.log(JSON.stringify(out));
    process.exit(0);
  })
  .catch((e) => {
    console.error(`ts2_client.mjs: ${e?.stack ?? e}`);
    process.exit(1);
  });
