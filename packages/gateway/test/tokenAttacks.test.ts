/**
 * Tokens under attack at the gateway, each refused with its Centrifugo code
 * (docs/design/realtime-wire-compatibility.md, "Tokens"): `alg: none`, HMAC signed with the JWKS's public
 * key (HS/RS confusion), an unknown `kid`, expired, not yet valid, a wrong audience or issuer, and a
 * subscription token replayed for another channel or user.
 * Raw WebSocket frames, so every reply error and close code is seen as sent.
 */

import { createHmac } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { exportJWK, exportSPKI, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { Gateway, type GatewayOptions } from '../src/index.ts';

const secret = 'test-secret-of-enough-length-for-hs256';
const hmac = new TextEncoder().encode(secret);
const servers: Server[] = [];
const gateways: Gateway[] = [];
let rsa: Awaited<ReturnType<typeof generateKeyPair>>;
let jwksUrl: string;

beforeAll(async () => {
  rsa = await generateKeyPair('RS256', { extractable: true });
  const keys = [{ ...(await exportJWK(rsa.publicKey)), kid: 'rsa-1', alg: 'RS256', use: 'sig' }];
  const jwks = createServer((_request, response) =>
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys })),
  );
  await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
  servers.push(jwks);
  jwksUrl = `http://127.0.0.1:${(jwks.address() as { port: number }).port}/jwks.json`;
});
afterAll(async () => {
  for (const gateway of gateways) await gateway.close();
  for (const server of servers) await new Promise((resolve) => server.close(resolve));
});

async function start(options: Partial<GatewayOptions> = {}) {
  const server = createServer();
  const gateway = new Gateway({ hmacKey: secret, jwksUrl, ...options });
  gateway.attach(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  gateways.push(gateway);
  return `ws://127.0.0.1:${(server.address() as { port: number }).port}/connection/websocket`;
}

const base64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
const now = () => Math.floor(Date.now() / 1000);
const hs256 = (claims: Record<string, unknown>, key: Uint8Array = hmac) =>
  new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('10m').sign(key);

/**
 * Sends `frames` one at a time (each after the previous reply) and resolves with the replies and the
 * close code, if the gateway closed the connection.
 */
async function exchange(url: string, frames: unknown[]) {
  const socket = new WebSocket(url);
  await new Promise((resolve) => socket.once('open', resolve));
  const replies: any[] = [];
  let closed: number | null = null;
  const done = new Promise<void>((resolve) =>
    socket.once('close', (code) => {
      closed = code;
      resolve();
    }),
  );
  for (const frame of frames) {
    if (closed !== null) break;
    const answered = new Promise<void>((resolve) =>
      socket.once('message', (data) => {
        for (const line of data.toString().split('\n')) if (line) replies.push(JSON.parse(line));
        resolve();
      }),
    );
    socket.send(JSON.stringify(frame));
    await Promise.race([answered, done]);
  }
  if (closed === null) socket.close();
  await done;
  return { replies, closed: closed as number | null };
}
const connectWith = (url: string, token: string) => exchange(url, [{ id: 1, connect: { token } }]);

describe('connection tokens under attack', () => {
  let url: string;
  beforeAll(async () => {
    url = await start();
  });

  it('refuses an unsigned token (alg: none) with 3500', async () => {
    const unsigned = `${base64url({ alg: 'none', typ: 'JWT' })}.${base64url({ sub: 'mallory', exp: now() + 600 })}.`;
    expect((await connectWith(url, unsigned)).closed).toBe(3500);
  });

  it('refuses HS256 signed with the JWKS public key (HS/RS confusion) with 3500', async () => {
    const pem = await exportSPKI(rsa.publicKey);
    const header = base64url({ alg: 'HS256', kid: 'rsa-1' });
    const payload = base64url({ sub: 'mallory', exp: now() + 600 });
    for (const key of [pem, JSON.stringify(await exportJWK(rsa.publicKey))]) {
      const signature = createHmac('sha256', key).update(`${header}.${payload}`).digest('base64url');
      expect((await connectWith(url, `${header}.${payload}.${signature}`)).closed).toBe(3500);
    }
  });

  it('refuses a key id the JWKS does not publish with 3500', async () => {
    const token = await new SignJWT({ sub: 'k' })
      .setProtectedHeader({ alg: 'RS256', kid: 'rsa-unknown' })
      .setExpirationTime('10m')
      .sign(rsa.privateKey);
    expect((await connectWith(url, token)).closed).toBe(3500);
    // The published kid with the same key connects (the refusal above is about the kid).
    const good = await new SignJWT({ sub: 'k' })
      .setProtectedHeader({ alg: 'RS256', kid: 'rsa-1' })
      .setExpirationTime('10m')
      .sign(rsa.privateKey);
    expect((await connectWith(url, good)).replies[0].connect.client).toBeTruthy();
  });

  it('answers an expired token and a token not yet valid with error 109 (the SDK fetches a new one)', async () => {
    const expired = await new SignJWT({ sub: 'late' })
      .setProtectedHeader({ alg: 'HS256' })
      .setExpirationTime(now() - 60)
      .sign(hmac);
    const early = await new SignJWT({ sub: 'early' })
      .setProtectedHeader({ alg: 'HS256' })
      .setNotBefore(now() + 600)
      .setExpirationTime(now() + 1200)
      .sign(hmac);
    for (const token of [expired, early]) {
      const { replies } = await connectWith(url, token);
      expect(replies[0]).toEqual({ id: 1, error: { code: 109, message: 'token expired' } });
    }
  });

  it('refuses a wrong audience or issuer with 3500 when the gateway names them', async () => {
    const strict = await start({ audience: 'tdp-realtime', issuer: 'https://tdp.example' });
    const claims = (aud: string | undefined, iss: string | undefined) => {
      const jwt = new SignJWT({ sub: 'aud' }).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('10m');
      if (aud) jwt.setAudience(aud);
      if (iss) jwt.setIssuer(iss);
      return jwt.sign(hmac);
    };
    for (const [aud, iss] of [
      ['other', 'https://tdp.example'],
      ['tdp-realtime', 'https://evil.example'],
      [undefined, 'https://tdp.example'],
    ] as const)
      expect((await connectWith(strict, await claims(aud, iss))).closed, `${aud} ${iss}`).toBe(3500);
    const right = await connectWith(strict, await claims('tdp-realtime', 'https://tdp.example'));
    expect(right.replies[0].connect.client).toBeTruthy();
  });
});

describe('subscription tokens under attack', () => {
  let url: string;
  beforeAll(async () => {
    url = await start();
  });
  const connect = { id: 1, connect: { token: '' } };
  const session = async (frames: unknown[]) =>
    exchange(url, [{ ...connect, connect: { token: await hs256({ sub: 'u1' }) } }, ...frames]);

  it('closes with 3500 on a token replayed for another channel, or of another user', async () => {
    const mine = await hs256({ sub: 'u1', channel: 'task_detail:t/mine' });
    const replayed = await session([{ id: 2, subscribe: { channel: 'task_detail:t/theirs', token: mine } }]);
    expect(replayed.closed).toBe(3500);
    const ofAnother = await hs256({ sub: 'u2', channel: 'task_detail:t/mine' });
    expect(
      (await session([{ id: 2, subscribe: { channel: 'task_detail:t/mine', token: ofAnother } }])).closed,
    ).toBe(3500);
    // A connection token (no channel claim) is no subscription token.
    const connection = await hs256({ sub: 'u1' });
    expect(
      (await session([{ id: 2, subscribe: { channel: 'task_detail:t/mine', token: connection } }])).closed,
    ).toBe(3500);
    // sub_refresh with another channel's token, on a channel followed with its own.
    const refreshed = await session([
      { id: 2, subscribe: { channel: 'task_detail:t/mine', token: mine } },
      {
        id: 3,
        sub_refresh: { channel: 'task_detail:t/mine', token: await hs256({ sub: 'u1', channel: 'x' }) },
      },
    ]);
    expect(refreshed.replies[1].subscribe).toBeDefined();
    expect(refreshed.closed).toBe(3500);
  });

  it('refuses a subscription token as a connection token (3500), and a forged one (103)', async () => {
    expect((await connectWith(url, await hs256({ sub: 'u1', channel: 'task_detail:t/mine' }))).closed).toBe(
      3500,
    );
    const forged = await hs256(
      { sub: 'u1', channel: 'task_detail:t/mine' },
      new TextEncoder().encode('x'.repeat(40)),
    );
    const refused = await session([{ id: 2, subscribe: { channel: 'task_detail:t/mine', token: forged } }]);
    expect(refused.replies[1]).toEqual({ id: 2, error: { code: 103, message: 'permission denied' } });
    const none = await session([{ id: 2, subscribe: { channel: 'task_ops:all' } }]);
    expect(none.replies[1]).toEqual({ id: 2, error: { code: 103, message: 'permission denied' } });
  });
});
