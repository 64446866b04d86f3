#!/usr/bin/env node
// A small OAuth 2.1 authorization server for the end-to-end auth test (crates/staunch/tests/
// http_auth.rs): just enough for the TypeScript SDK's client-credentials flow to get a JWT
// access token that `staunch serve --auth oauth` accepts. Node's own crypto only.
//
// usage: node oauth_as.mjs CLIENT_ID CLIENT_SECRET
//
// Serves on 127.0.0.1 (a free port):
//   GET  /.well-known/oauth-authorization-server   RFC 8414 metadata (issuer = http://127.0.0.1:PORT)
//   GET  /jwks.json                                the public signing key (ES256, kid "as-1")
//   POST /token                                    grant_type=client_credentials; client_secret_basic
//                                                  or _post; `resource` (RFC 8707) becomes `aud`
// Writes JSON lines on stdout: first {"listening": PORT}, then one {"token": {...}} per token
// issued (client, resource, scope) so the test can check what the client asked for. Runs until
// killed.
import { createServer } from 'node:http';
import { generateKeyPairSync, sign, randomUUID } from 'node:crypto';

const [clientId, clientSecret] = process.argv.slice(2);
if (!clientId || !clientSecret) {
  console.error('usage: node oauth_as.mjs CLIENT_ID CLIENT_SECRET');
  process.exit(2);
}

const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const jwk = { ...publicKey.export({ format: 'jwk' }), kid: 'as-1', alg: 'ES256', use: 'sig' };
const b64url = (buf) => Buffer.from(buf).toString('base64url');

function jwt(claims) {
  const header = b64url(JSON.stringify({ alg: 'ES256', typ: 'at+jwt', kid: jwk.kid }));
  const body = b64url(JSON.stringify(claims));
  const sig = sign('sha256', Buffer.from(`${header}.${body}`), { key: privateKey, dsaEncoding: 'ieee-p1363' });
  return `${header}.${body}.${b64url(sig)}`;
}

const json = (res, status, value) => {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify(value));
};

let issuer = '';
const server = createServer((req, res) => {
  const url = new URL(req.url, issuer);
  if (req.method === 'GET' && url.pathname === '/.well-known/oauth-authorization-server') {
    return json(res, 200, {
      issuer,
      // Required by RFC 8414 (and the SDK's schema) although this server only does
      // client_credentials: the endpoint answers unsupported_response_type.
      authorization_endpoint: `${issuer}/authorize`,
      token_endpoint: `${issuer}/token`,
      jwks_uri: `${issuer}/jwks.json`,
      grant_types_supported: ['client_credentials'],
      token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
      response_types_supported: ['token'],
    });
  }
  if (req.method === 'GET' && url.pathname === '/jwks.json') {
    return json(res, 200, { keys: [jwk] });
  }
  if (req.method === 'POST' && url.pathname === '/token') {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const form = new URLSearchParams(body);
      let id = form.get('client_id');
      let secret = form.get('client_secret');
      const basic = req.headers.authorization;
      if (basic?.startsWith('Basic ')) {
        const [u, p] = Buffer.from(basic.slice(6), 'base64').toString().split(':');
        id = decodeURIComponent(u);
        secret = decodeURIComponent(p ?? '');
      }
      if (id !== clientId || secret !== clientSecret) {
        return json(res, 401, { error: 'invalid_client' });
      }
      if (form.get('grant_type') !== 'client_credentials') {
        return json(res, 400, { error: 'unsupported_grant_type' });
      }
      const resource = form.get('resource');
      if (!resource) {
        return json(res, 400, { error: 'invalid_target', error_description: 'resource (RFC 8707) is required' });
      }
      const scope = form.get('scope') ?? '';
      const now = Math.floor(Date.now() / 1000);
      const token = jwt({ iss: issuer, sub: id, aud: resource, scope, iat: now, nbf: now, exp: now + 300, jti: randomUUID(), client_id: id });
      console.log(JSON.stringify({ token: { client: id, resource, scope } }));
      return json(res, 200, { access_token: token, token_type: 'Bearer', expires_in: 300, scope });
    });
    return;
  }
  if (url.pathname === '/authorize') {
    return json(res, 400, { error: 'unsupported_response_type' });
  }
  json(res, 404, { error: 'not_found' });
});

server.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  issuer = `http://127.0.0.1:${port}`;
  console.log(JSON.stringify({ listening: port }));
});
