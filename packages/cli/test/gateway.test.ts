/**
 * `tdp gateway`: the realtime gateway as its own process. Tokens signed with the key the server derives
 * from the same TDP_SECRET_KEYS connect to it, and what its server API publishes reaches them.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateKeyringEntry, parseKeyring, realtimeTokenKey } from '@tdp/server';
import { Centrifuge } from 'centrifuge';
import { SignJWT } from 'jose';
import { afterAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';

const root = new URL('../../../', import.meta.url).pathname;
const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) child.kill('SIGTERM');
});

async function startGateway(env: Record<string, string>, args: string[] = []) {
  const child = spawn(
    process.execPath,
    ['--conditions=@tdp/source', '--import', 'tsx', 'packages/cli/src/main.ts', 'gateway', ...args],
    {
      cwd: root,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  children.push(child);
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exited = new Promise<number>((resolve) => child.once('exit', (code) => resolve(code ?? -1)));
  return { child, output: () => output, exited };
}

describe('tdp gateway', () => {
  it('serves tokens made with the server keyring and publishes what its API is given', async () => {
    const keys = generateKeyringEntry('k1');
    const started = await startGateway({
      TDP_SECRET_KEYS: keys,
      TDP_GATEWAY_API_KEY: 'cli-gateway-key',
      TDP_GATEWAY_PORT: '0',
    });
    await expect.poll(() => started.output(), { timeout: 20_000 }).toContain('TDP gateway listening on');
    const base = /listening on (http:\/\/[\d.:]+)/.exec(started.output())![1]!;
    const channel = 'task_user:t/cli-user';
    const token = await new SignJWT({ sub: 'cli-user', channels: [channel] })
      .setProtectedHeader({ alg: 'HS256' })
      .setExpirationTime('5m')
      .sign(realtimeTokenKey(parseKeyring(keys)));
    const client = new Centrifuge(`${base.replace('http', 'ws')}/connection/websocket`, {
      websocket: WebSocket,
      token,
    });
    const received = new Promise<{ data: unknown }>((resolve) => client.once('publication', resolve));
    const subscribed = new Promise((resolve) => client.once('subscribed', resolve));
    client.connect();
    try {
      await subscribed;
      const answer = await fetch(`${base}/api/publish`, {
        method: 'POST',
        headers: { 'x-api-key': 'cli-gateway-key', 'content-type': 'application/json' },
        body: JSON.stringify({ channel, data: { hello: 'cli' } }),
      });
      expect(answer.status).toBe(200);
      expect((await received).data).toEqual({ hello: 'cli' });
      expect((await fetch(`${base}/api/info`, { method: 'POST', body: '{}' })).status).toBe(401);
    } finally {
      client.disconnect();
    }
    started.child.kill('SIGTERM');
    expect(await started.exited).toBe(0);
  });

  it('with TDP_REALTIME_TOKEN_SECRET (and no keyring) checks tokens with that secret, as Centrifugo would', async () => {
    const secret = 'a-realtime-token-secret-shared-with-centrifugo';
    const started = await startGateway({
      TDP_SECRET_KEYS: '',
      TDP_REALTIME_TOKEN_SECRET: secret,
      TDP_GATEWAY_API_KEY: 'cli-gateway-key',
      TDP_GATEWAY_PORT: '0',
    });
    await expect.poll(() => started.output(), { timeout: 20_000 }).toContain('TDP gateway listening on');
    const base = /listening on (http:\/\/[\d.:]+)/.exec(started.output())![1]!;
    const connects = async (key: Uint8Array) => {
      const token = await new SignJWT({ sub: 'cli-user' })
        .setProtectedHeader({ alg: 'HS256' })
        .setExpirationTime('5m')
        .sign(key);
      const client = new Centrifuge(`${base.replace('http', 'ws')}/connection/websocket`, {
        websocket: WebSocket,
        token,
      });
      const outcome = new Promise<string>((resolve) => {
        client.once('connected', () => resolve('connected'));
        client.once('disconnected', (ctx) => resolve(`disconnected ${ctx.code}`));
      });
      client.connect();
      const result = await outcome;
      client.disconnect();
      return result;
    };
    try {
      expect(await connects(new TextEncoder().encode(secret))).toBe('connected');
      expect(await connects(realtimeTokenKey(parseKeyring(generateKeyringEntry('k1'))))).toBe(
        'disconnected 3500',
      );
    } finally {
      started.child.kill('SIGTERM');
    }
    expect(await started.exited).toBe(0);
  });

  it('refuses to start without the keys it needs, saying which', async () => {
    const started = await startGateway({ TDP_SECRET_KEYS: '', TDP_GATEWAY_API_KEY: 'x' });
    expect(await started.exited).toBe(1);
    expect(started.output()).toContain('TDP_SECRET_KEYS is required');
  });

  const configFile = (config: unknown) => {
    const path = join(mkdtempSync(join(tmpdir(), 'tdp-gateway-config-')), 'config.json');
    writeFileSync(path, JSON.stringify(config));
    return path;
  };

  it('--config takes a Centrifugo v6 config: its token key, API key, anonymous connections and namespaces', async () => {
    const path = configFile({
      client: {
        token: { hmac_secret_key: 'a-centrifugo-hmac-secret-of-some-length' },
        allow_anonymous_connect_without_token: true,
      },
      http_api: { key: 'config-api-key' },
      http_server: { port: 0 },
      channel: {
        namespaces: [
          {
            name: 'chat',
            allow_subscribe_for_client: true,
            allow_subscribe_for_anonymous: true,
            allow_publish_for_subscriber: true,
            allow_publish_for_anonymous: true,
            history_size: 10,
            history_ttl: '300s',
            force_recovery: true,
          },
        ],
      },
    });
    const started = await startGateway({ TDP_SECRET_KEYS: '', TDP_GATEWAY_API_KEY: '' }, ['--config', path]);
    await expect.poll(() => started.output(), { timeout: 20_000 }).toContain('TDP gateway listening on');
    const base = /listening on (http:\/\/[\d.:]+)/.exec(started.output())![1]!;
    const client = new Centrifuge(`${base.replace('http', 'ws')}/connection/websocket`, {
      websocket: WebSocket,
    });
    const sub = client.newSubscription('chat:lobby');
    const received: unknown[] = [];
    sub.on('publication', (ctx) => received.push(ctx.data));
    const subscribed = new Promise<{ recoverable: boolean }>((resolve) => sub.once('subscribed', resolve));
    sub.subscribe();
    client.connect();
    try {
      expect((await subscribed).recoverable).toBe(true);
      await sub.publish({ from: 'anonymous' });
      const answer = await fetch(`${base}/api/history`, {
        method: 'POST',
        headers: { 'x-api-key': 'config-api-key' },
        body: JSON.stringify({ channel: 'chat:lobby', limit: -1 }),
      });
      expect(((await answer.json()) as { result: { publications: unknown } }).result.publications).toEqual([
        { data: { from: 'anonymous' }, offset: 1 },
      ]);
      await expect.poll(() => received).toEqual([{ from: 'anonymous' }]);
    } finally {
      client.disconnect();
    }
    started.child.kill('SIGTERM');
    expect(await started.exited).toBe(0);
  });

  it('--config refuses keys it does not support, listing each', async () => {
    // Keys of the config TDP writes (allowed_origins, engine, allow_history_for_subscriber) are known;
    // these are not.
    const path = configFile({
      client: { token: { hmac_secret_key: 'k'.repeat(32) }, allowed_origins: ['*'], connection_limit: 10 },
      http_api: { key: 'x' },
      admin: { enabled: true },
      engine: { type: 'redis', redis: { address: 'redis://127.0.0.1:6379', db: 2 } },
      channel: {
        namespaces: [
          { name: 'chat', presence: true, allow_history_for_subscriber: true, delta_publish: true },
        ],
      },
    });
    const started = await startGateway({ TDP_SECRET_KEYS: '', TDP_GATEWAY_API_KEY: '' }, ['--config', path]);
    expect(await started.exited).not.toBe(0);
    const output = started.output();
    for (const key of [
      'client.connection_limit',
      'admin',
      'engine.redis.db',
      'channel.namespaces.0.delta_publish',
    ])
      expect(output).toContain(`unknown key ${key}`);
    for (const key of [
      'client.allowed_origins',
      'engine',
      'channel.namespaces.0.allow_history_for_subscriber',
    ])
      expect(output).not.toMatch(new RegExp(`unknown key ${key.replaceAll('.', '\\.')}(?![.\\w])`));
    expect(output).not.toContain('listening');
  });
});
