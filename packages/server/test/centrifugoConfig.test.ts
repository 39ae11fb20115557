/**
 * TDP_REALTIME_TOKEN_SECRET (the HMAC secret TDP signs realtime tokens with and the embedded gateway
 * checks them with, so that Centrifugo can share it) and the Centrifugo config made from TDP's settings,
 * as docs/realtime.md shows it.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readCentrifugoConfig } from '@tdp/gateway';
import { Centrifuge } from 'centrifuge';
import { jwtVerify, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { newTokenSecret } from '../../../test/centrifugo.ts';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { centrifugoConfig, tdpChannelNamespaces } from '../src/features/realtime/centrifugoConfig.ts';
import { realtimeTokenSecretFrom, startGatewayServer } from '../src/features/realtime/gateway.ts';
import { ConfigError, configFromEnv, defaultSettings, startServer } from '../src/main.ts';

const env = {
  DATABASE_URL: 'postgres://x',
  TDP_ADMIN_TOKEN: 'a-long-enough-admin-token',
  TDP_SECRET_KEYS: 'k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=',
};

describe('TDP_REALTIME_TOKEN_SECRET', () => {
  it('is read from the environment, unset by default', () => {
    const secret = newTokenSecret();
    expect(configFromEnv({ ...env, TDP_REALTIME_TOKEN_SECRET: secret }).realtimeTokenSecret).toBe(secret);
    expect(configFromEnv(env).realtimeTokenSecret).toBeNull();
  });

  it('refuses a secret shorter than 32 bytes before connecting anything, without showing it', async () => {
    const short = 'only-thirty-one-bytes-long-1234';
    // Read from the environment, it is refused at once.
    expect(() => configFromEnv({ ...env, TDP_REALTIME_TOKEN_SECRET: short })).toThrow(ConfigError);
    // Given by an embedder, the start refuses it before it connects anything: the database URL leads nowhere.
    const config = { ...configFromEnv(env), realtimeTokenSecret: short };
    const started = startServer(config).then(
      () => 'started',
      (error: Error) => error,
    );
    const error = (await started) as Error;
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toMatch(/TDP_REALTIME_TOKEN_SECRET must be at least 32 bytes/);
    expect(error.message).not.toContain(short);
    expect(() => realtimeTokenSecretFrom(short)).toThrow(ConfigError);
    expect(realtimeTokenSecretFrom(` ${'x'.repeat(32)} `)).toBe('x'.repeat(32));
  });
});

describe('a server with TDP_REALTIME_TOKEN_SECRET', () => {
  const secret = newTokenSecret();
  let h: Harness;
  let apiKey: string;
  const clients: Centrifuge[] = [];
  beforeAll(async () => {
    h = await startHarness({ realtimeTokenSecret: secret });
    apiKey = (await h.createApplication()).apiKey;
  });
  afterAll(async () => {
    for (const client of clients) client.disconnect();
    await h.close();
  });

  const connect = (url: string, token: string) => {
    const client = new Centrifuge(url, { websocket: WebSocket, token });
    clients.push(client);
    const outcome = new Promise<string>((resolve) => {
      client.once('connected', () => resolve('connected'));
      client.once('disconnected', (ctx) => resolve(`disconnected ${ctx.code}`));
    });
    client.connect();
    return outcome;
  };

  it('signs its realtime tokens with the secret, and its gateway accepts tokens signed with it by another', async () => {
    const issued = await h.request('POST', '/v1/realtime/connection-token', {
      token: apiKey,
      body: { userId: 'u1' },
    });
    const verified = await jwtVerify(issued.body.token, new TextEncoder().encode(secret));
    expect(verified.payload.sub).toBe('u1');
    expect(await connect(issued.body.url, issued.body.token)).toBe('connected');
    // What Centrifugo would accept, the embedded gateway accepts: a token signed with the secret elsewhere.
    const elsewhere = await new SignJWT({ sub: 'u2' })
      .setProtectedHeader({ alg: 'HS256' })
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode(secret));
    expect(await connect(issued.body.url, elsewhere)).toBe('connected');
    // And no other key: the connection is refused as an invalid token.
    const otherKey = await new SignJWT({ sub: 'u3' })
      .setProtectedHeader({ alg: 'HS256' })
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode(newTokenSecret()));
    expect(await connect(issued.body.url, otherKey)).toBe('disconnected 3500');
  });
});

describe('centrifugoConfig', () => {
  const clients: Centrifuge[] = [];
  afterAll(() => {
    for (const client of clients) client.disconnect();
  });
  const settings = {
    tokenSecret: newTokenSecret(),
    apiKey: 'api-key',
    realtimeHistory: { size: 300, followedSize: 100, ttlMs: 600_000 },
  };

  it('has a namespace for every channel prefix TDP publishes to, with the history and recovery of the embedded gateway', () => {
    expect(tdpChannelNamespaces().sort()).toEqual(
      [
        'task_detail',
        'task_ops',
        'task_project',
        'task_role',
        'task_system',
        'task_tenant',
        'task_user',
        'workflow_summary',
      ].sort(),
    );
    const config = centrifugoConfig(settings) as any;
    expect(config.client.token.hmac_secret_key).toBe(settings.tokenSecret);
    expect(config.http_api.key).toBe('api-key');
    const byName = Object.fromEntries(config.channel.namespaces.map((n: any) => [n.name, n]));
    expect(byName.task_user).toEqual({
      name: 'task_user',
      history_size: 300,
      history_ttl: '600s',
      force_recovery: true,
      allow_history_for_subscriber: true,
    });
    // One task's channels keep the smaller history the gateway keeps for them.
    expect(byName.task_detail.history_size).toBe(100);
    expect(byName.workflow_summary.history_size).toBe(100);
    expect(config.engine).toBeUndefined();
    const clustered = centrifugoConfig({ ...settings, redis: { url: 'redis://r:6379', prefix: 'p' } }) as any;
    expect(clustered.engine).toEqual({ type: 'redis', redis: { address: ['redis://r:6379'], prefix: 'p' } });
  });

  it('refuses a missing or short secret and a missing API key', () => {
    expect(() => centrifugoConfig({ ...settings, tokenSecret: '' })).toThrow(ConfigError);
    expect(() => centrifugoConfig({ ...settings, tokenSecret: 'short' })).toThrow(/at least 32 bytes/);
    expect(() => centrifugoConfig({ ...settings, apiKey: ' ' })).toThrow(ConfigError);
  });

  it('is a config the embedded gateway reads whole (tdp gateway --config), meaning what it means to Centrifugo', () => {
    const config = centrifugoConfig({
      ...settings,
      allowedOrigins: ['https://app.example.com'],
      redis: { url: 'redis://127.0.0.1:6379', prefix: 'tdp-centrifugo' },
      listen: { address: '127.0.0.1', port: 8100 },
    }) as any;
    // Every key TDP writes is one the gateway takes: a new one there fails here until the gateway knows it.
    const read = readCentrifugoConfig(config);
    expect(read.options).toMatchObject({
      hmacKey: settings.tokenSecret,
      apiKey: 'api-key',
      allowedOrigins: ['https://app.example.com'],
      channelMaxLength: config.channel.max_length,
      health: true,
    });
    expect(read.redis).toEqual({ url: 'redis://127.0.0.1:6379', prefix: 'tdp-centrifugo' });
    expect(read.listen).toEqual({ address: '127.0.0.1', port: 8100 });
    for (const name of tdpChannelNamespaces()) {
      expect(read.options.channels?.namespaces[name]).toMatchObject({
        forceRecovery: true,
        allowHistoryForSubscriber: true,
      });
      expect(read.options.history?.(`${name}:x`).size).toBeGreaterThan(0);
    }
    // The same without the optional parts.
    expect(() => readCentrifugoConfig(centrifugoConfig(settings))).not.toThrow();
  });

  it('runs two `tdp gateway --config` nodes on its Redis engine: a publication on one reaches the SDK on the other', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tdp-gateway-config-'));
    const path = join(dir, 'centrifugo.json');
    const prefix = `tdp-config-test-${Date.now()}`;
    writeFileSync(
      path,
      JSON.stringify(
        centrifugoConfig({
          ...settings,
          redis: { url: 'redis://127.0.0.1:6379', prefix },
          listen: { address: '127.0.0.1', port: 0 },
        }),
      ),
    );
    const nodes = [
      await startGatewayServer({}, { configPath: path }),
      await startGatewayServer({}, { configPath: path }),
    ];
    try {
      const channel = 'task_user:t1/a1/u1';
      const token = await new SignJWT({ sub: 'u1', channels: [channel] })
        .setProtectedHeader({ alg: 'HS256' })
        .setExpirationTime('10m')
        .sign(new TextEncoder().encode(settings.tokenSecret));
      const client = new Centrifuge(`${nodes[0]!.url.replace('http', 'ws')}/connection/websocket`, {
        websocket: WebSocket,
        token,
      });
      clients.push(client);
      const heard: unknown[] = [];
      client.on('publication', (ctx) => heard.push(ctx.data));
      const subscribed = new Promise((resolve) => client.once('subscribed', resolve));
      client.connect();
      await subscribed;
      const published = await fetch(`${nodes[1]!.url}/api/publish`, {
        method: 'POST',
        headers: { 'x-api-key': 'api-key', 'content-type': 'application/json' },
        body: JSON.stringify({ channel, data: { from: 'the other node' } }),
      });
      expect(published.status).toBe(200);
      await expect.poll(() => heard).toEqual([{ from: 'the other node' }]);
      // health.enabled in TDP's config: Centrifugo's /health.
      expect((await fetch(`${nodes[1]!.url}/health`)).status).toBe(200);
    } finally {
      for (const node of nodes) await node.close();
    }
  });

  it('is what docs/realtime.md shows, for its placeholder secret and key', () => {
    const doc = readFileSync(new URL('../../../docs/realtime.md', import.meta.url), 'utf8');
    const block = /<!-- centrifugo-config -->\n```json\n([\s\S]*?)```/.exec(doc);
    expect(block, 'docs/realtime.md has the generated config block').not.toBeNull();
    const shown = JSON.parse(block![1]!);
    expect(shown).toEqual(
      centrifugoConfig({
        tokenSecret: shown.client.token.hmac_secret_key,
        apiKey: shown.http_api.key,
        realtimeHistory: defaultSettings.realtimeHistory,
        allowedOrigins: shown.client.allowed_origins,
      }),
    );
  });
});
