// Real-client OAuth driver for the 2026-07-28 era: the TypeScript SDK v2 client
// (@modelcontextprotocol/client 2.4.0) with its own `ClientCredentialsProvider`, version
// negotiation `auto` (server/discover, then stateless requests — each one carrying the token).
// The SDK finds the authorization server from the server's 401 and the RFC 9728 metadata.
//
// usage: node ts2_oauth_client.mjs URL CLIENT_ID CLIENT_SECRET SCOPE
//
// Calls set_value {key:"oauth2", value:"ok"} and get_value {key:"oauth2"}. Prints ONE JSON
// object {"client","sdkVersion","protocolVersion","tools","set","get","token_type"}; exits
// non-zero with a message on stderr on failure.

import { Client, StreamableHTTPClientTransport, ClientCredentialsProvider } from '@modelcontextprotocol/client';

const [url, clientId, clientSecret, scope] = process.argv.slice(2);
if (!url || !clientId || !clientSecret) {
  console.error('usage: ts2_oauth_client.mjs URL CLIENT_ID CLIENT_SECRET SCOPE');
  process.exit(2);
}
const textOf = (r) => (r.content ?? []).find((c) => c.type === 'text')?.text ?? null;
const overall = setTimeout(() => {
  console.error('error: overall timeout (30000 ms) exceeded');
  process.exit(1);
}, 30_000);

async function main() {
  const out = { client: 'typescript-sdk-v2', sdkVersion: '2.4.0' };
  const provider = new ClientCredentialsProvider({ clientId, clientSecret, scope, clientName: 'staunch-oauth-test-v2' });
  const client = new Client({ name: 'staunch-ts2-oauth', version: '0' }, { versionNegotiation: { mode: 'auto' } });
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  await client.connect(transport);
  out.protocolVersion = client.getNegotiatedProtocolVersion();
  out.tools = (await client.listTools()).tools.map((t) => t.name);
  const set = await client.callTool({ name: 'set_value', arguments: { key: 'oauth2', value: 'ok' } });
  out.set = { isError: set.isError ?? false, text: textOf(set) };
  const get = await client.callTool({ name: 'get_value', arguments: { key: 'oauth2' } });
  out.get = { isError: get.isError ?? false, text: textOf(get), structured: get.structuredContent ?? null };
  out.token_type = (await provider.tokens())?.token_type ?? null;
  await client.close();
  return out;
}

main()
  .then((out) => {
    clearTimeout(overall);
    console.log(JSON.stringify(out));
    process.exit(0);
  })
  .catch((e) => {
    console.error(`error: ${e?.name ?? 'Error'}: ${e?.message ?? e}`);
    process.exit(1);
  });
