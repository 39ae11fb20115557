/** The failure windows behind AUTH_THROTTLED: closed after N failures, open again when the window ends. */
import { describe, expect, it } from 'vitest';
import { FailureWindows } from '../src/adapters/inbound/http/authFailures.ts';

describe('failed authentications per address', () => {
  it('close an address after its Nth failure for the rest of the window, and no other address', () => {
    let now = 1_000_000;
    const windows = new FailureWindows({ failures: 3, windowSeconds: 60 }, () => now);
    windows.failed('10.0.0.1');
    windows.failed('10.0.0.1');
    expect(windows.closedFor('10.0.0.1')).toBe(0);
    now += 10_000;
    windows.failed('10.0.0.1');
    // The window runs from the first failure: 50 s are left.
    expect(windows.closedFor('10.0.0.1')).toBe(50_000);
    expect(windows.closedFor('10.0.0.2')).toBe(0);
    now += 50_000;
    expect(windows.closedFor('10.0.0.1')).toBe(0);
    // A new window starts from nothing.
    windows.failed('10.0.0.1');
    expect(windows.closedFor('10.0.0.1')).toBe(0);
  });

  it('stay bounded under a spray of addresses, keeping the newest windows', () => {
    let now = 0;
    const windows = new FailureWindows({ failures: 1, windowSeconds: 3_600 }, () => now);
    for (let i = 0; i < 100_010; i += 1) {
      now += 1;
      windows.failed(`address-${i}`);
    }
    expect(windows.closedFor('address-100009')).toBeGreaterThan(0);
    expect(windows.closedFor('address-0')).toBe(0);
  });
});

describe('the failed-authentication hooks', () => {
  it('count the 400s and 403s of a sign-in route (single sign-on) as failures, and no other route’s', async () => {
    const { default: Fastify } = await import('fastify');
    const { throttleAuthFailures } = await import('../src/adapters/inbound/http/authFailures.ts');
    const app = Fastify();
    throttleAuthFailures(app, { failures: 3, windowSeconds: 60 }, () => {});
    // A login whose refusals are 400s but which is not a sign-in: its 400s are bad requests, not guesses.
    app.get('/login-form', { config: { credentialInBody: true } }, async (_request, reply) =>
      reply.code(400).send(),
    );
    app.get<{ Querystring: { status: string } }>(
      '/sso',
      { config: { credentialInBody: true, countsAsSignIn: true } },
      async (request, reply) => reply.code(Number(request.query.status)).send(),
    );
    try {
      for (let i = 0; i < 5; i += 1) expect((await app.inject('/login-form')).statusCode).toBe(400);
      expect((await app.inject('/sso?status=302')).statusCode).toBe(302);
      expect((await app.inject('/sso?status=502')).statusCode).toBe(502);
      expect((await app.inject('/sso?status=400')).statusCode).toBe(400);
      expect((await app.inject('/sso?status=403')).statusCode).toBe(403);
      expect((await app.inject('/sso?status=400')).statusCode).toBe(400);
      // The third refused sign-in closed the address to every route that takes a credential.
      expect((await app.inject('/sso?status=302')).statusCode).toBe(429);
      expect((await app.inject('/login-form')).statusCode).toBe(429);
    } finally {
      await app.close();
    }
  });
});

describe('the client a per-address limit counts', () => {
  it('is an IPv4 address, mapped or not, and an IPv6 /64', async () => {
    const { clientOf } = await import('../src/adapters/inbound/http/clientAddress.ts');
    expect(clientOf('203.0.113.7')).toBe('203.0.113.7');
    expect(clientOf('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(clientOf('2001:db8:1:2:aaaa::1')).toBe(clientOf('2001:db8:1:2:bbbb:cccc:dddd:eeee'));
    expect(clientOf('2001:db8:1:2::1')).not.toBe(clientOf('2001:db8:1:3::1'));
  });
});
