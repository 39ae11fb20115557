/**
 * The listener's own limits on a real server, with raw sockets on 127.0.0.1: a client that stalls in
 * its headers or its body is cut at the read deadline (short here), one address holds at most N
 * connections (small here: every test client is 127.0.0.1, so "another client" is one of the N already
 * open), and failed authentications from one address close it to credentials for the window, even to
 * correct ones (the window is short here; the count is per address and process).
 */
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';

let h: Harness;
let port: number;

beforeAll(async () => {
  h = await startHarness({
    settings: {
      headersTimeoutMs: 500,
      requestReadTimeoutMs: 1_000,
      maxConnectionsPerIp: 3,
      authFailureLimit: 3,
      authFailureWindowSeconds: 2,
    },
  });
  port = Number(new URL(h.url).port);
});

afterAll(async () => {
  await h?.close();
});

const open = () =>
  new Promise<Socket>((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port }, () => resolve(socket));
    socket.once('error', reject);
  });

/** Everything the server sends until it closes the socket. */
const untilClosed = (socket: Socket) =>
  new Promise<string>((resolve) => {
    let text = '';
    socket.on('data', (chunk) => {
      text += chunk.toString();
    });
    socket.on('error', () => {});
    socket.once('close', () => resolve(text));
  });

/** One keep-alive request on an open socket and its whole response (by Content-Length). */
function ask(socket: Socket, path: string): Promise<{ status: number; head: string; body: string }> {
  return new Promise((resolve, reject) => {
    let text = '';
    const onData = (chunk: Buffer) => {
      text += chunk.toString();
      const end = text.indexOf('\r\n\r\n');
      if (end < 0) return;
      const length = Number(/content-length: (\d+)/i.exec(text.slice(0, end))?.[1] ?? 0);
      if (Buffer.byteLength(text.slice(end + 4)) < length) return;
      socket.off('data', onData);
      resolve({ status: Number(text.split(' ')[1]), head: text.slice(0, end), body: text.slice(end + 4) });
    };
    socket.on('data', onData);
    socket.once('error', reject);
    socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
  });
}

async function refused(code: string): Promise<number> {
  const text = (await h.request('GET', '/metrics')).body as string;
  const line = text.split('\n').find((l) => l.startsWith(`tdp_quota_refused_total{code="${code}"}`));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

describe('read deadlines', () => {
  it('closes a socket that sends part of its headers and stalls (slow loris) at the headers deadline', async () => {
    const socket = await open();
    const closed = untilClosed(socket);
    socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ');
    // Within the test's timeout, far below the ~80 s a stalled socket lived before.
    const answer = await closed;
    expect(answer).toContain('REQUEST_TIMEOUT');
  }, 8_000);

  it('closes a socket that sends its headers and stalls in its body at the request deadline', async () => {
    const socket = await open();
    const closed = untilClosed(socket);
    socket.write(
      'POST /v1/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"na',
    );
    expect(await closed).toContain('REQUEST_TIMEOUT');
  }, 8_000);
});

describe('connections per address', () => {
  it('refuses the N+1th connection of one address with 429 CONNECTION_LIMIT while its open ones keep working', async () => {
    // The harness's own fetch pool may hold keep-alive sockets: let them close first.
    await new Promise((resolve) => setTimeout(resolve, 5_500));
    const held = [await open(), await open(), await open()];
    for (const socket of held) expect((await ask(socket, '/healthz')).status).toBe(200);
    const extra = await open();
    const answer = await ask(extra, '/healthz');
    expect(answer.status).toBe(429);
    expect(answer.head).toMatch(/retry-after: 1/i);
    expect(JSON.parse(answer.body)).toMatchObject({ code: 'CONNECTION_LIMIT', retryable: true });
    // The open connections still serve (one of them reads the metric of the refusal).
    const metrics = await ask(held[0]!, '/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.body).toMatch(/tdp_quota_refused_total\{code="CONNECTION_LIMIT"\} [1-9]/);
    // Once one closes, a new connection is accepted.
    held.pop()!.destroy();
    await expect
      .poll(async () => {
        const socket = await open();
        const status = (await ask(socket, '/healthz')).status;
        socket.destroy();
        return status;
      })
      .toBe(200);
    for (const socket of held) socket.destroy();
  }, 20_000);
});

describe('failed authentications per address', () => {
  it('after N refused credentials, answers 429 AUTH_THROTTLED with Retry-After even to a correct one until the window passes', async () => {
    // A fresh window: the connection test's sockets have gone.
    await new Promise((resolve) => setTimeout(resolve, 2_100));
    const app = await h.createApplication();
    const before = await refused('AUTH_THROTTLED');
    for (let i = 0; i < 3; i++)
      expect((await h.request('GET', '/v1/tasks', { token: 'tdp_wrong' })).status).toBe(401);
    const correct = await h.request('GET', '/v1/tasks', { token: app.apiKey });
    expect(correct.status).toBe(429);
    expect(correct.body).toMatchObject({ code: 'AUTH_THROTTLED', retryable: true });
    expect(Number(correct.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // The admin API and the dashboard's login are closed to this address too.
    expect((await h.request('GET', '/admin/v1/tenants', { token: h.adminToken })).status).toBe(429);
    const login = await h.request('POST', '/dashboard/api/login', {
      body: { token: h.adminToken },
      headers: { origin: h.url },
    });
    expect(login.status).toBe(429);
    expect(await refused('AUTH_THROTTLED')).toBe(before + 3);
    // Requests without a credential are not throttled.
    expect((await h.request('GET', '/healthz')).status).toBe(200);
    // After the window, the correct credential works again.
    await expect
      .poll(async () => (await h.request('GET', '/v1/tasks', { token: app.apiKey })).status, {
        timeout: 5_000,
      })
      .toBe(200);
  }, 20_000);

  it('counts failed dashboard logins and admin tokens as failures', async () => {
    await new Promise((resolve) => setTimeout(resolve, 2_100));
    const app = await h.createApplication();
    await new Promise((resolve) => setTimeout(resolve, 2_100));
    expect((await h.request('GET', '/admin/v1/tenants', { token: 'adm_wrong_wrong_wrong' })).status).toBe(
      401,
    );
    const badLogin = await h.request('POST', '/dashboard/api/login', {
      body: { token: 'not-the-admin-token' },
      headers: { origin: h.url },
    });
    expect(badLogin.status).toBe(401);
    expect((await h.request('GET', '/v1/tasks', { token: 'tdp_wrong' })).status).toBe(401);
    expect((await h.request('GET', '/v1/tasks', { token: app.apiKey })).status).toBe(429);
  }, 20_000);
});
