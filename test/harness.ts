/**
 * A real server on a real database for integration tests, with helpers to create tenants, applications
 * and definitions through the admin and public APIs. Only the clock can be moved by the test.
 */

import { randomBytes } from 'node:crypto';
import { type Logger, pino } from 'pino';
import { InProcessBus } from '../packages/server/src/adapters/outbound/bus/inProcessBus.ts';
import type { TemporalSettings } from '../packages/server/src/adapters/temporal/temporalEngine.ts';
import type { EventPublisher } from '../packages/server/src/core/outbox/ports.ts';
import {
  defaultSettings,
  generateKeyringEntry,
  parseKeyring,
  type RunningServer,
  type ServerSettings,
  startServer,
} from '../packages/server/src/main.ts';
import { testDashboardDirectory } from './dashboardPages.ts';
import { createTestDatabase } from './database.ts';

export class TestClock {
  private readonly listeners: (() => void)[] = [];
  constructor(private current = new Date()) {}
  now = (): Date => new Date(this.current);
  onJump(listener: () => void): void {
    this.listeners.push(listener);
  }
  advance(ms: number): void {
    this.current = new Date(this.current.getTime() + ms);
    for (const listener of this.listeners) listener();
  }
  set(date: Date): void {
    this.current = date;
    for (const listener of this.listeners) listener();
  }
}

export interface Harness {
  server: RunningServer;
  url: string;
  adminToken: string;
  clock: TestClock;
  databaseUrl: string;
  close(): Promise<void>;
  request(
    method: string,
    path: string,
    options?: { token?: string; body?: unknown; headers?: Record<string, string>; rawBody?: string },
  ): Promise<{ status: number; body: any; headers: Headers }>;
  createApplication(
    tenantName?: string,
  ): Promise<{ tenantId: string; applicationId: string; apiKey: string; callbackSecret: string }>;
  createApplicationIn(
    tenantId: string,
    name?: string,
  ): Promise<{ tenantId: string; applicationId: string; apiKey: string; callbackSecret: string }>;
}

export async function startHarness(
  options: {
    runLoops?: boolean;
    /** Where domain events go; by default an in-process bus (as a deployment with an event bus). */
    publisher?: EventPublisher;
    /** No event bus at all (the default deployment without NATS): facts write no domain outbox rows. */
    withoutEventBus?: boolean;
    bodyLimitBytes?: number;
    nats?: { url: string; subjectPrefix: string };
    /** New executions are driven by this Temporal (TDP_ORCHESTRATOR=temporal); needs `nats`. */
    temporal?: TemporalSettings;
    /** Another harness's database, to run a second server on the same data (it is not dropped here). */
    sharedDatabaseUrl?: string;
    /** The keyring entry (`generateKeyringEntry`), e.g. another replica's, so their tokens and secrets agree. */
    keyringEntry?: string;
    logger?: Logger;
    healthGraceMs?: number;
    allowInsecureCallbacks?: boolean;
    /** TDP_EGRESS_ALLOW (default: loopback, where the tests' receivers listen; [] for the policy's own). */
    egressAllow?: string[];
    /** Rewrites the database URL the server uses (e.g. through a proxy); tests still get the direct URL. */
    serverDatabaseUrl?: (url: string) => string;
    /** Enables the in-process gateway's server API with this key. */
    gatewayApiKey?: string;
    /** The relay publishes through this Centrifugo-compatible API instead of the in-process gateway. */
    centrifugoApi?: { url: string; key: string };
    /** Realtime tokens are signed with this secret (TDP_REALTIME_TOKEN_SECRET), e.g. Centrifugo's. */
    realtimeTokenSecret?: string;
    /** The WebSocket URL the connection-token endpoint hands out (e.g. Centrifugo's). */
    realtimeWsUrl?: string;
    /** Every request is answered within this (503 REQUEST_TIMEOUT after it). */
    requestDeadlineMs?: number;
    /** Timings and sizes other than the defaults (e.g. a command poll too slow to deliver anything). */
    settings?: Partial<ServerSettings>;
    /** Serves the development resource provider (as `tdp dev` does) over this folder. */
    developmentFiles?: { directory: string; providerToken: string };
  } = {},
): Promise<Harness> {
  const database = options.sharedDatabaseUrl
    ? { url: options.sharedDatabaseUrl, drop: async () => {} }
    : await createTestDatabase();
  const clock = new TestClock();
  const adminToken = `adm_${randomBytes(16).toString('hex')}`;
  const server = await startServer(
    {
      ...defaultSettings,
      // Every test client is 127.0.0.1, one address for all: tests of the throttle turn it on.
      authFailureLimit: 0,
      ...options.settings,
      dashboardDirectory: testDashboardDirectory,
      databaseUrl: options.serverDatabaseUrl ? options.serverDatabaseUrl(database.url) : database.url,
      host: '127.0.0.1',
      port: 0,
      publicUrl: 'http://127.0.0.1',
      adminToken,
      secretKeyring: parseKeyring(options.keyringEntry ?? generateKeyringEntry('test1')),
      allowInsecureCallbacks: options.allowInsecureCallbacks ?? false,
      // The tests' receivers and providers listen on 127.0.0.1: allowed here, as `tdp dev` allows them.
      egressAllow: options.egressAllow ?? ['127.0.0.0/8'],
      natsUrl: options.nats?.url ?? null,
      natsSubjectPrefix: options.nats?.subjectPrefix ?? 'tdp',
      orchestrator: options.temporal ? 'temporal' : 'native',
      temporal: options.temporal ?? null,
      bodyLimitBytes: options.bodyLimitBytes ?? 1024 * 1024,
      requestDeadlineMs: options.requestDeadlineMs ?? 10_000,
      statementTimeoutMs: 10_000,
      databasePoolSize: 10,
      heartbeatPoolSize: 2,
      logLevel: 'silent',
      runLoops: options.runLoops ?? false,
      executionCredentialTtlMs: 3600_000,
      heartbeatIntervalSeconds: 15,
      heartbeatTimeoutSeconds: 60,
      healthGraceMs: options.healthGraceMs ?? 120_000,
      workerHeartbeatTtlMs: 30_000,
      redisUrl: null,
      gatewayApiKey: options.gatewayApiKey ?? null,
      realtimeJwksUrl: null,
      centrifugoApiUrl: options.centrifugoApi?.url ?? null,
      centrifugoApiKey: options.centrifugoApi?.key ?? null,
      realtimeWsUrl: options.realtimeWsUrl ?? null,
      realtimeTokenSecret: options.realtimeTokenSecret ?? null,
      developmentFiles: options.developmentFiles ?? null,
    },
    {
      clock,
      logger: options.logger ?? pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
      ...(options.publisher || (!options.nats && !options.withoutEventBus)
        ? { publisher: options.publisher ?? new InProcessBus() }
        : {}),
    },
  );

  const request: Harness['request'] = async (method, path, { token, body, headers, rawBody } = {}) => {
    const response = await fetch(`${server.url}${path}`, {
      method,
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(body !== undefined || rawBody !== undefined ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      ...(rawBody !== undefined
        ? { body: rawBody }
        : body !== undefined
          ? { body: JSON.stringify(body) }
          : {}),
    });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {}
    return { status: response.status, body: parsed, headers: response.headers };
  };

  let counter = 0;
  const createApplicationIn: Harness['createApplicationIn'] = async (tenantId, name) => {
    counter += 1;
    const created = await request('POST', `/admin/v1/tenants/${tenantId}/applications`, {
      token: adminToken,
      body: { name: name ?? `app-${counter}` },
    });
    if (created.status !== 201)
      throw new Error(`create application: ${created.status} ${JSON.stringify(created.body)}`);
    return {
      tenantId,
      applicationId: created.body.application.id,
      apiKey: created.body.apiKey.key,
      callbackSecret: created.body.callbackSecret,
    };
  };

  return {
    server,
    url: server.url,
    adminToken,
    clock,
    databaseUrl: database.url,
    request,
    createApplicationIn,
    createApplication: async (tenantName) => {
      counter += 1;
      const tenant = await request('POST', '/admin/v1/tenants', {
        token: adminToken,
        body: { name: tenantName ?? `tenant-${counter}-${randomBytes(3).toString('hex')}` },
      });
      if (tenant.status !== 201)
        throw new Error(`create tenant: ${tenant.status} ${JSON.stringify(tenant.body)}`);
      return createApplicationIn(tenant.body.id);
    },
    close: async () => {
      await server.close();
      await database.drop();
    },
  };
}

export { zipWorkflow } from './fixtures.ts';
