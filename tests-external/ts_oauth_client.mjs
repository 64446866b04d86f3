#!/usr/bin/env node
// Real-client OAuth driver: the TypeScript SDK (@modelcontextprotocol/sdk 1.32.2) `Client` over
// `StreamableHTTPClientTransport` with the SDK's own `ClientCredentialsProvider`. Nothing here
// knows where the authorization server is: the SDK finds it from the server's 401
// (`WWW-Authenticate: Bearer resource_metadata=…`), the RFC 9728 metadata and the RFC 8414
// metadata, gets a token (client_credentials, with the RFC 8707 `resource`) and retries.
//
// usage: node ts_oauth_client.mjs URL CLIENT_ID CLIENT_SECRET [SCOPE]
//
// SCOPE is what the provider is configured to request: SDK 1.32.2's client-credentials path
// (`fetchToken`) sends the provider's own `clientMetadata.scope`, not the server's
// `scopes_supported`. Without it the token carries no scope and set_value gets 403
// insufficient_scope (the SDK retries once with "upscoping", then fails).
//
// Connects (initialize), lists tools, calls set_value {key:"oauth", value:"ok"} (which the
// test declares to need a scope), then get_value
// {key:"oauth"}. Prints ONE JSON object:
//   {"client","sdkVersion","sessionId","tools","set","get","token_type","scope","errors":[…]}
// Exit 0 on success, 1 with a message on stderr on failure, 2 on usage error.
import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';

const OVERALL_MS = 30_000;
const [url, clientId, clientSecret, scope] = process.argv.slice(2);
if (!url || !clientId || !clientSecret) {
  console.error('usage: node ts_oauth_client.mjs URL CLIENT_ID CLIENT_SECRET [SCOPE]');
  process.exit(2);
}
const sdkVersion = JSON.parse(
  readFileSync(new URL('./node_modules/@modelcontextprotocol/sdk/package.json', import.meta.url), 'utf8'),
).version;
const fail = (msg) => {
  console.error(`error: ${msg}`);
  process.exit(1);
};
const overall = setTimeout(() => fail(`overall timeout (${OVERALL_MS} ms) exceeded`), OVERALL_MS);
const textOf = (result) => result?.content?.find((c) => c.type === 'text')?.text ?? null;

const out = { client: 'typescript-sdk', sdkVersion };
const errors = [];
const provider = new ClientCredentialsProvider({ clientId, clientSecret, scope, clientName: 'staunch-oauth-test' });
const client = new Client({ name: 'staunch-tests-external-ts-oauth', version: '1.0.0' });
client.onerror = (err) => errors.push(String(err?.message ?? err));
const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });

try {
  await client.connect(transport);
  out.sessionId = transport.sessionId ?? null;
  out.tools = (await client.listTools()).tools.map((t) => t.name);
  const set = await client.callTool({ name: 'set_value', arguments: { key: 'oauth', value: 'ok' } });
  out.set = { isError: set.isError ?? false, text: textOf(set) };
  const get = await client.callTool({ name: 'get_value', arguments: { key: 'oauth' } });
  out.get = { isError: get.isError ?? false, text: textOf(get), structured: get.structuredContent ?? null };
  const tokens = provider.tokens();
  out.token_type = tokens?.token_type ?? null;
  out.scope = tokens?.scope ?? null;
  await client.close();
} catch (e) {
  fail(`${e?.name ?? 'Error'}: ${e?.message ?? e}`);
}
out.errors = errors;
clearTimeout(overall);
console.log(JSON.stringify(out));
process.exit(0);
