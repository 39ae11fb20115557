/**
 * A slow realtime client of a real server's gateway (docs/realtime.md, "Slow clients"): the server's
 * `realtimeClientQueue` setting bounds its queue, and /metrics counts the progress it coalesced and its
 * 3008 disconnect.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import WebSocket from 'ws';
import { type Harness, startHarness } from '../../../test/harness.ts';

const apiKey = 'slow-client-gateway-key';
let h: Harness;

beforeAll(async () => {
  h = await startHarness({
    gatewayApiKey: apiKey,
    settings: { realtimeClientQueue: { pressureBytes: 8 * 1024, maxBytes: 96 * 1024, closeGraceMs: 20_000 } },
  });
});
afterAll(async () => {
  await h.close();
});

/** A counter as /metrics shows it. */
async function counter(name: string): Promise<number> {
  const text = (await h.request('GET', '/metrics')).body as string;
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

/** Publishes through the gateway's server API, as `tdp gateway`'s callers (or Centrifugo's) do. */
async function publish(channel: string, data: unknown[]): Promise<void> {
  const response = await fetch(`${h.url}/api/batch`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
    body: JSON.stringify({ commands: data.map((d) => ({ publish: { channel, data: d } })) }),
  });
  expect(response.status).toBe(200);
  await response.body?.cancel();
}

it('counts coalesced progress and the slow disconnect of a client that stopped reading', async () => {
  const app = await h.createApplication();
  const issued = await h.request('POST', '/v1/realtime/connection-token', {
    token: app.apiKey,
    body: { userId: 'slow-reader' },
  });
  expect(issued.status).toBe(200);
  const { token, url, channels } = issued.body as { token: string; url: string; channels: string[] };
  const socket = new WebSocket(url);
  const closed = new Promise<number>((resolve) => socket.on('close', (code) => resolve(code)));
  const connected = new Promise((resolve) => socket.once('message', resolve));
  await new Promise((resolve) => socket.once('open', resolve));
  socket.send(JSON.stringify({ id: 1, connect: { token } }));
  await connected;
  (socket as unknown as { _socket: { pause(): void; resume(): void } })._socket.pause();
  const pad = 'p'.repeat(4096);
  const coalescedBefore = await counter('tdp_realtime_slow_client_coalesced_total');
  for (let round = 0; round < 500; round += 1) {
    const progress = Array.from({ length: 20 }, (_, i) => ({ taskId: 't', coalesceKey: 't', i, pad }));
    await publish(channels[0]!, progress);
    if ((await counter('tdp_realtime_slow_client_coalesced_total')) > coalescedBefore) break;
  }
  expect(await counter('tdp_realtime_slow_client_coalesced_total')).toBeGreaterThan(coalescedBefore);
  expect(await counter('tdp_realtime_slow_client_disconnects_total')).toBe(0);
  for (let round = 0; round < 500; round += 1) {
    const creations = Array.from({ length: 20 }, (_, i) => ({ taskId: `new-${round}-${i}`, pad }));
    await publish(channels[0]!, creations);
    if ((await counter('tdp_realtime_slow_client_disconnects_total')) > 0) break;
  }
  expect(await counter('tdp_realtime_slow_client_disconnects_total')).toBe(1);
  (socket as unknown as { _socket: { resume(): void } })._socket.resume();
  expect(await closed).toBe(3008);
});
