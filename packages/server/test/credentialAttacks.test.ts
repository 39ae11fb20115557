/**
 * Credentials under attack on the server, each refused with its stable code: user and execution tokens
 * that are unsigned, of another purpose, of an unknown key, expired or not yet valid; execution tokens
 * and handles after their attempt was revoked; a worker key reporting, heartbeating or asking a grant
 * for another worker's attempt.
 */
import { createHmac } from 'node:crypto';
import { newId } from '@tdp/protocol';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { coordinator } from '../../../test/statusFixture.ts';
import {
  derivedKey,
  JoseExecutionCredentials,
} from '../src/adapters/outbound/tokens/executionCredentials.ts';
import { JoseUserTokens } from '../src/adapters/outbound/tokens/userTokens.ts';
import { generateKeyringEntry, parseKeyring } from '../src/main.ts';

const keyring = parseKeyring(`${generateKeyringEntry('old')},${generateKeyringEntry('new')}`);
const base64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
const seconds = (date: Date) => Math.floor(date.getTime() / 1000);

describe('user and execution tokens, offline', () => {
  // Only key k1 is usable: tokens minted by any other key are refused.
  const users = new JoseUserTokens(keyring, async (keyId) => keyId === 'k1');
  const executions = new JoseExecutionCredentials(keyring);
  const now = new Date();
  const later = new Date(now.getTime() + 600_000);
  const principal = {
    kind: 'user' as const,
    applicationId: newId(),
    tenantId: newId(),
    keyId: 'k1',
    viewer: { userId: 'u1', projects: [], roles: [] },
    userView: 'APPLICATION' as const,
  };
  const claims = {
    applicationId: newId(),
    tenantId: newId(),
    workflowId: newId(),
    taskId: newId(),
    taskAttempt: 1,
    stepId: 's',
    stepAttempt: 1,
    executionId: newId(),
    operationCode: 'OP',
    producerId: 'p',
    allowedEventTypes: ['STEP_STARTED'],
    expiresAt: later,
  };
  /** A token signed with the right key of `purpose` for `kid`, with the given header and claims. */
  const forge = (
    purpose: string,
    kid: string,
    header: Record<string, unknown>,
    payload: Record<string, unknown>,
    signingKid = kid,
  ) => {
    const signingInput = `${base64url({ kid, ...header })}.${base64url(payload)}`;
    const signature = createHmac('sha256', derivedKey(keyring, signingKid, purpose))
      .update(signingInput)
      .digest('base64url');
    return `${signingInput}.${signature}`;
  };
  const userClaims = {
    app: principal.applicationId,
    ten: principal.tenantId,
    sub: 'u1',
    aud: 'tdp:user',
    akid: 'k1',
  };

  it('accepts its own tokens, of the active key and of an older key still in the keyring', async () => {
    expect(await users.verify(await users.sign(principal, later), now)).toMatchObject({
      viewer: { userId: 'u1' },
    });
    expect(await executions.verify(await executions.sign(claims), now)).toMatchObject({
      taskId: claims.taskId,
    });
    const old = forge('user-token', 'old', { alg: 'HS256' }, { ...userClaims, exp: seconds(later) });
    expect(await users.verify(old, now)).not.toBeNull();
  });

  it('refuses alg none, another algorithm, an unknown or missing kid, expired, not yet valid, without exp, of an unusable key', async () => {
    const exp = seconds(later);
    const refused = [
      `${base64url({ alg: 'none', kid: 'new' })}.${base64url({ ...userClaims, exp })}.`,
      forge('user-token', 'new', { alg: 'HS384' }, { ...userClaims, exp }),
      forge('user-token', 'unknown', { alg: 'HS256' }, { ...userClaims, exp }, 'new'),
      forge('user-token', 'new', { alg: 'HS256', kid: undefined }, { ...userClaims, exp }),
      forge('user-token', 'new', { alg: 'HS256' }, { ...userClaims, exp: seconds(now) - 1 }),
      forge('user-token', 'new', { alg: 'HS256' }, { ...userClaims, exp, nbf: seconds(now) + 60 }),
      // No expiry: a token must say when it dies.
      forge('user-token', 'new', { alg: 'HS256' }, userClaims),
      // Minted by a key that is no longer usable, or not saying which key minted it.
      forge('user-token', 'new', { alg: 'HS256' }, { ...userClaims, exp, akid: 'k2' }),
      forge('user-token', 'new', { alg: 'HS256' }, { ...userClaims, exp, akid: undefined }),
    ];
    for (const [index, token] of refused.entries())
      expect(await users.verify(token, now), `case ${index}`).toBeNull();
    const execution = { aud: 'tdp:execution', sub: claims.executionId, tid: claims.taskId, exp };
    const refusedExecutions = [
      `${base64url({ alg: 'none', kid: 'new' })}.${base64url(execution)}.`,
      forge('execution-token', 'new', { alg: 'HS512' }, execution),
      forge('execution-token', 'unknown', { alg: 'HS256' }, execution, 'new'),
      forge('execution-token', 'new', { alg: 'HS256' }, { ...execution, exp: seconds(now) - 1 }),
      forge('execution-token', 'new', { alg: 'HS256' }, { ...execution, nbf: seconds(now) + 60 }),
    ];
    expect(
      await executions.verify(forge('execution-token', 'new', { alg: 'HS256' }, execution), now),
    ).not.toBeNull();
    for (const [index, token] of refusedExecutions.entries())
      expect(await executions.verify(token, now), `execution case ${index}`).toBeNull();
  });

  it('refuses a token of another purpose: wrong audience, or signed with another purpose’s key', async () => {
    const exp = seconds(later);
    // The user-token key with the execution audience, and with none.
    expect(
      await users.verify(
        forge('user-token', 'new', { alg: 'HS256' }, { ...userClaims, aud: 'tdp:execution', exp }),
        now,
      ),
    ).toBeNull();
    expect(
      await users.verify(
        forge('user-token', 'new', { alg: 'HS256' }, { ...userClaims, aud: undefined, exp }),
        now,
      ),
    ).toBeNull();
    // Each purpose's real token at the other's door, and a realtime token (the gateway's key) at both.
    expect(await users.verify(await executions.sign(claims), now)).toBeNull();
    expect(await executions.verify(await users.sign(principal, later), now)).toBeNull();
    const realtime = await new SignJWT({ sub: 'u1', aud: 'tdp:user' })
      .setProtectedHeader({ alg: 'HS256', kid: 'new' })
      .setExpirationTime(exp)
      .sign(derivedKey(keyring, 'new', 'realtime-token'));
    expect(await users.verify(realtime, now)).toBeNull();
    expect(await executions.verify(realtime, now)).toBeNull();
  });

  it('an execution token verified once is refused once it expires (the cache does not outlive it)', async () => {
    const token = await executions.sign(claims);
    expect(await executions.verify(token, now)).not.toBeNull();
    expect(await executions.verify(token, new Date(later.getTime() + 1))).toBeNull();
  });
});

describe('credentials after revocation, and of another worker', () => {
  let h: Harness;
  let c: Awaited<ReturnType<typeof coordinator>>;
  beforeAll(async () => {
    h = await startHarness({ runLoops: true });
    c = await coordinator(h);
  });
  afterAll(async () => {
    await h.close();
  });

  it('refuses the execution token, handle and heartbeats of an attempt revoked by its retry', async () => {
    const { taskId, ctx } = await c.runningContext();
    expect((await c.report(ctx, c.event(ctx))).body.accepted).toBe(true);
    await c.report(ctx, c.event(ctx, { sourceSeq: 2, eventType: 'STEP_FAILED' }));
    const retry = await c.activate(taskId, '01_prepare', 2);
    expect((await c.report(retry, c.event(retry))).body.accepted).toBe(true);
    const byToken = await c.report(ctx, c.event(ctx, { sourceSeq: 3, eventType: 'STEP_PROGRESS' }));
    const byHandle = await c.call('POST', '/v1/task-events', {
      executionHandle: ctx.executionHandle,
      eventId: newId(),
      eventType: 'STEP_PROGRESS',
      sourceSeq: 4,
    });
    const beat = await h.request('POST', '/v1/task-heartbeats:batch', {
      token: c.app.apiKey,
      body: {
        heartbeats: [
          { executionToken: ctx.executionToken, heartbeatSeq: 1 },
          { executionToken: retry.executionToken, heartbeatSeq: 1 },
        ],
      },
    });
    expect({
      byToken: byToken.body.code,
      byHandle: byHandle.body.code,
      beats: beat.body.results.map((r: { outcome: string }) => r.outcome),
    }).toEqual({
      byToken: 'STALE_EXECUTION',
      byHandle: 'STALE_EXECUTION',
      beats: ['STALE_ATTEMPT', 'ACCEPTED'],
    });
  });

  it('refuses the execution token, handle and heartbeats of a cancelled task once its grace ran out', async () => {
    const { taskId, ctx } = await c.runningContext();
    expect((await c.report(ctx, c.event(ctx))).body.accepted).toBe(true);
    expect((await c.call('POST', `/v1/tasks/${taskId}:cancel`)).status).toBe(200);
    // During the grace the executor may still report (it is asked to stop); after it, nothing.
    h.clock.advance(31_000);
    try {
      await expect
        .poll(async () => (await c.task(taskId)).task.lifecycleStatus, { timeout: 10_000 })
        .toBe('CANCELLED');
      const byToken = await c.report(ctx, c.event(ctx, { sourceSeq: 2, eventType: 'STEP_PROGRESS' }));
      const byHandle = await c.call('POST', '/v1/task-events', {
        executionHandle: ctx.executionHandle,
        eventId: newId(),
        eventType: 'STEP_COMPLETED',
        sourceSeq: 3,
      });
      const beat = await h.request('POST', '/v1/task-heartbeats:batch', {
        token: c.app.apiKey,
        body: { heartbeats: [{ executionToken: ctx.executionToken, heartbeatSeq: 1 }] },
      });
      // The step is cancelled: its events are no longer a transition it can make, its beats find it ended.
      expect([byToken.body.code, byHandle.body.code, beat.body.results[0].outcome]).toEqual([
        'INVALID_TRANSITION',
        'INVALID_TRANSITION',
        'TERMINAL',
      ]);
    } finally {
      h.clock.advance(-31_000);
    }
  });

  it('refuses a user token, a realtime token or an execution token where an API key or user token is due', async () => {
    const { ctx } = await c.runningContext();
    const realtime = (
      await h.request('POST', '/v1/realtime/connection-token', {
        token: c.app.apiKey,
        body: { userId: 'u1' },
      })
    ).body.token;
    for (const token of [realtime, ctx.executionToken, 'tdp_forged_key', `${realtime}x`]) {
      const me = await h.request('GET', '/v1/me/tasks', { token });
      expect([me.status, me.body.code]).toEqual([401, 'UNAUTHENTICATED']);
    }
    const user = (await h.request('POST', '/v1/user-tokens', { token: c.app.apiKey, body: { userId: 'u1' } }))
      .body.token;
    for (const token of [user, realtime]) {
      const minted = await h.request('POST', '/v1/user-tokens', { token, body: { userId: 'u2' } });
      expect([minted.status, minted.body.code]).toEqual([401, 'UNAUTHENTICATED']);
    }
  });

  it('a worker key cannot report, beat or get grants for another worker’s attempt', async () => {
    const key = async () =>
      (await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })).body
        .key as string;
    const [ownerKey, otherKey] = [await key(), await key()];
    const register = async (token: string, name: string) =>
      (
        await h.request('POST', '/v1/workers/register', {
          token,
          body: {
            instanceId: newId(),
            name,
            nodeId: `node-${name}`,
            capabilities: [{ name: 'atk.op', version: '1' }],
          },
        })
      ).body.workerId as string;
    const owner = await register(ownerKey, 'owner');
    await h.request('POST', '/v1/workflow-definitions', {
      token: c.app.apiKey,
      body: {
        name: 'atk-wf',
        version: '1',
        steps: [{ key: 'only', capability: 'atk.op', capabilityVersion: '1' }],
      },
    });
    const abort = new AbortController();
    const stream = await fetch(`${h.url}/v1/workers/${owner}/commands`, {
      headers: { authorization: `Bearer ${ownerKey}` },
      signal: abort.signal,
    });
    let text = '';
    const reading = (async () => {
      for await (const chunk of stream.body!) text += Buffer.from(chunk as Uint8Array).toString();
    })().catch(() => {});
    try {
      await h.request('POST', '/v1/tasks', {
        token: c.app.apiKey,
        headers: { 'idempotency-key': newId() },
        body: { workflowName: 'atk-wf', workflowVersion: '1', name: 'attacked' },
      });
      await expect.poll(() => /"type":"START_ATTEMPT"/.test(text), { timeout: 10_000 }).toBe(true);
      const start = JSON.parse(/data: (\{.*"START_ATTEMPT".*\})\n/.exec(text)![1]!);
      // Only registered now, so that the attempt went to the owner.
      const intruder = await register(otherKey, 'intruder');
      const event = (eventType: string) => ({
        attemptId: start.attemptId,
        leaseVersion: start.leaseVersion,
        eventId: newId(),
        eventType,
        sourceSeq: 1,
      });
      // Through the owner's worker id with another key: not its worker.
      const asOwner = await h.request('POST', `/v1/workers/${owner}/events:batch`, {
        token: otherKey,
        body: { events: [event('STEP_STARTED')] },
      });
      expect([asOwner.status, asOwner.body.code]).toEqual([401, 'UNAUTHENTICATED']);
      // Through its own worker: the attempt is not its.
      const asIntruder = await h.request('POST', `/v1/workers/${intruder}/events:batch`, {
        token: otherKey,
        body: { events: [event('STEP_COMPLETED')] },
      });
      expect(asIntruder.body.results[0]).toMatchObject({ ok: false, code: 'STEP_NOT_REGISTERED' });
      const beat = await h.request('POST', `/v1/workers/${owner}/heartbeat`, { token: otherKey, body: {} });
      expect([beat.status, beat.body.code]).toEqual([401, 'UNAUTHENTICATED']);
      const grant = await h.request('POST', `/v1/attempts/${start.attemptId}/grants`, {
        token: otherKey,
        headers: { 'idempotency-key': newId() },
        body: { leaseVersion: start.leaseVersion, access: 'DOWNLOAD', resourceRef: 'asset:1' },
      });
      expect([grant.status, grant.body.code]).toEqual([404, 'ATTEMPT_NOT_FOUND']);
      // Nothing moved: the owner's report is still the first.
      const mine = await h.request('POST', `/v1/workers/${owner}/events:batch`, {
        token: ownerKey,
        body: { events: [event('STEP_STARTED')] },
      });
      expect(mine.body.results[0]).toMatchObject({ ok: true });
    } finally {
      abort.abort();
      await reading;
    }
  });
});
