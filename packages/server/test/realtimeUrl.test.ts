/**
 * The realtime URL a connection token comes with: wss:// when the request arrived over TLS at a proxy the
 * server trusts (a browser refuses ws:// from an https page), ws:// otherwise, and the proxy's word counts
 * only when TDP_TRUST_PROXY names it.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';

let trusting: Harness;
let h: Harness;
let apiKey: string;

beforeAll(async () => {
  h = await startHarness();
  apiKey = (await h.createApplication()).apiKey;
  trusting = await startHarness({ sharedDatabaseUrl: h.databaseUrl, settings: { trustProxy: '127.0.0.1' } });
});
afterAll(async () => {
  await trusting?.close();
  await h?.close();
});

const urlFrom = async (harness: Harness, headers: Record<string, string> = {}) => {
  const issued = await harness.request('POST', '/v1/realtime/connection-token', {
    token: apiKey,
    headers,
    body: { userId: 'olga' },
  });
  expect(issued.status).toBe(200);
  return issued.body.url as string;
};

it('is wss:// behind a trusted TLS proxy, and ws:// otherwise', async () => {
  const tls = { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'tdp.example' };
  expect(await urlFrom(trusting, tls)).toBe('wss://tdp.example/connection/websocket');
  expect(await urlFrom(trusting)).toMatch(/^ws:\/\/127\.0\.0\.1:\d+\/connection\/websocket$/);
  // An untrusted peer's word counts for nothing.
  expect(await urlFrom(h, tls)).toMatch(/^ws:\/\/127\.0\.0\.1:\d+\/connection\/websocket$/);
});
