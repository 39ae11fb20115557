/**
 * The egress policy against real listeners on 127.0.0.1: a refused address receives nothing (not even a
 * TCP connection), an allow-list entry lets it through, a name is resolved once and every address it
 * resolves to is checked, redirects are re-checked, answers are capped, and what a caller can read is the
 * same whether the refused port is open, closed or not HTTP.
 */
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createEgress,
  type Egress,
  EgressAllowListError,
  EgressError,
  egressPolicy,
  egressRequest,
  isPublicAddress,
  loopbackAllowList,
  refusedLiteral,
} from '../src/index.ts';

/** A listener that counts every TCP connection it accepts, whatever is said on it. */
interface Listener {
  port: number;
  connections: number;
  close(): Promise<void>;
}

async function listen(server: HttpServer | NetServer): Promise<Listener> {
  const sockets = new Set<Socket>();
  const listener = {
    port: 0,
    connections: 0,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
  server.on('connection', (socket: Socket) => {
    listener.connections += 1;
    sockets.add(socket);
    // A client that stops reading (a cap, a refusal) resets the connection: no concern of the server's.
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  listener.port = (server.address() as { port: number }).port;
  return listener;
}

let http: Listener;
let notHttp: Listener;
let closedPort: number;

beforeAll(async () => {
  http = await listen(
    createHttpServer((request, response) => {
      if (request.url === '/big') return void response.end(Buffer.alloc(2 * 1024 * 1024, 1));
      if (request.url === '/chunked') {
        // No length announced: the cap must stop the read itself.
        response.writeHead(200);
        const chunk = Buffer.alloc(64 * 1024, 2);
        let sent = 0;
        const more = () => {
          while (sent < 64) {
            sent += 1;
            if (!response.write(chunk)) return void response.once('drain', more);
          }
          response.end();
        };
        return more();
      }
      response.writeHead(200, { 'content-type': 'text/plain' }).end('hello');
    }),
  );
  notHttp = await listen(createNetServer((socket) => socket.end('SSH-2.0-OpenSSH_9.6\r\n')));
  const probe = await listen(createNetServer());
  closedPort = probe.port;
  await probe.close();
});

afterAll(async () => {
  await http.close();
  await notHttp.close();
});

const refusedAddresses = [
  // IPv4: loopback, private, CGNAT, link-local (cloud metadata), unspecified, broadcast, multicast, reserved
  '127.0.0.1',
  '127.255.255.254',
  '10.0.0.1',
  '172.16.5.4',
  '192.168.1.1',
  '100.64.0.1',
  '169.254.169.254',
  '0.0.0.0',
  '255.255.255.255',
  '224.0.0.1',
  '240.0.0.1',
  '192.0.2.1',
  // IPv6: loopback, unspecified, link-local, unique-local, multicast, documentation
  '::1',
  '::',
  'fe80::1',
  'fc00::1',
  'fd12:3456::1',
  'ff02::1',
  '2001:db8::1',
  // IPv6 forms that carry an IPv4 address: mapped, compatible, NAT64
  '::ffff:127.0.0.1',
  '::ffff:7f00:1',
  '::ffff:10.0.0.1',
  '::127.0.0.1',
  '64:ff9b::7f00:1',
];

describe('the policy', () => {
  const policy = egressPolicy('');

  it.each(refusedAddresses)('refuses %s', (address) => {
    expect(isPublicAddress(address)).toBe(false);
    expect(policy.allows(address, address, 80)).toBe(false);
  });

  it('allows public addresses', () => {
    for (const address of ['93.184.215.14', '8.8.8.8', '2606:4700:4700::1111', '::ffff:8.8.8.8'])
      expect(policy.allows(address, address, 443)).toBe(true);
  });

  it.each([
    'http://127.0.0.1/',
    'http://[::1]:8080/',
    'http://2130706433/',
    'http://0x7f000001/',
    'http://0x7f.0.0.1/',
    'http://0177.0.0.1/',
    'http://017700000001/',
    'http://127.1/',
    'http://127.0.1/',
    'http://0/',
    'http://[::ffff:127.0.0.1]/',
    'http://[0:0:0:0:0:ffff:7f00:1]/',
    'http://[::]/',
    'http://[fe80::1]/',
    'https://169.254.169.254/latest/meta-data/',
    'http://[fd00::1]/',
  ])('refuses the literal address of %s, however it is spelled', (url) => {
    expect(refusedLiteral(policy, url)).not.toBeNull();
  });

  it('leaves names to the connection, and passes public literals', () => {
    expect(refusedLiteral(policy, 'http://localhost:8080/')).toBeNull();
    expect(refusedLiteral(policy, 'https://example.com/hook')).toBeNull();
    expect(refusedLiteral(policy, 'https://93.184.215.14/hook')).toBeNull();
  });

  it('allows what the allow-list names: ranges, addresses and host:port pairs', () => {
    const allowed = egressPolicy('10.1.0.0/16, 192.168.7.7, fd00::/8, files.internal:9000, 127.0.0.1:8080');
    expect(allowed.allows('10.1.2.3', '10.1.2.3', 1)).toBe(true);
    expect(allowed.allows('::ffff:10.1.2.3', '10.1.2.3', 1)).toBe(true);
    expect(allowed.allows('10.2.0.1', '10.2.0.1', 1)).toBe(false);
    expect(allowed.allows('192.168.7.7', 'x', 1)).toBe(true);
    expect(allowed.allows('fd00::5', 'x', 1)).toBe(true);
    // A pair allows that name (whatever it resolves to) or that address, on that port only.
    expect(allowed.allows('10.9.9.9', 'files.internal', 9000)).toBe(true);
    expect(allowed.allows('10.9.9.9', 'FILES.internal.', 9000)).toBe(true);
    expect(allowed.allows('10.9.9.9', 'files.internal', 9001)).toBe(false);
    expect(allowed.allows('127.0.0.1', '127.0.0.1', 8080)).toBe(true);
    expect(allowed.allows('127.0.0.1', '2130706433', 8080)).toBe(true);
    expect(allowed.allows('127.0.0.1', '127.0.0.1', 8081)).toBe(false);
    const loopback = egressPolicy(loopbackAllowList);
    expect(loopback.allows('127.0.0.1', 'localhost', 1)).toBe(true);
    expect(loopback.allows('::1', 'localhost', 1)).toBe(true);
    expect(loopback.allows('10.0.0.1', '10.0.0.1', 1)).toBe(false);
  });

  it('refuses an allow-list entry it cannot read', () => {
    for (const entry of ['10.0.0.0/33', 'not an address', 'host:99999', 'http://x/'])
      expect(() => egressPolicy(entry)).toThrow(EgressAllowListError);
  });
});

describe('requests', () => {
  let open: Egress;
  let loopback: Egress;
  beforeAll(() => {
    open = createEgress('');
    loopback = createEgress(loopbackAllowList);
  });
  afterAll(async () => {
    await open.close();
    await loopback.close();
  });

  const get = (egress: Egress, url: string, more: Partial<Parameters<typeof egressRequest>[2]> = {}) =>
    egressRequest(egress.agent, url, { method: 'GET', maxBodyBytes: 1024 * 1024, timeoutMs: 5_000, ...more });

  const failure = (promise: Promise<unknown>) =>
    promise.then(
      () => {
        throw new Error('expected a failure');
      },
      (error: unknown) => {
        expect(error).toBeInstanceOf(EgressError);
        const e = error as EgressError;
        return { code: e.code, message: e.message, retryable: e.retryable };
      },
    );

  it('connects nowhere the policy refuses, however the address is written', async () => {
    const before = http.connections;
    const { port } = http;
    for (const host of ['127.0.0.1', '2130706433', '0x7f000001', '0177.0.0.1', '127.1', '[::ffff:127.0.0.1]'])
      expect(await failure(get(open, `http://${host}:${port}/`))).toMatchObject({
        code: 'EGRESS_REFUSED',
        retryable: false,
      });
    expect(await failure(get(open, `http://[::1]:${port}/`))).toMatchObject({ code: 'EGRESS_REFUSED' });
    expect(http.connections).toBe(before);
  });

  it('lets through what the allow-list names', async () => {
    const answer = await get(loopback, `http://127.0.0.1:${http.port}/`);
    expect(answer.status).toBe(200);
    expect(answer.body.toString()).toBe('hello');
    const pair = createEgress(`127.0.0.1:${http.port}`);
    try {
      expect((await get(pair, `http://2130706433:${http.port}/`)).status).toBe(200);
      expect(await failure(get(pair, `http://127.0.0.1:${notHttp.port}/`))).toMatchObject({
        code: 'EGRESS_REFUSED',
      });
    } finally {
      await pair.close();
    }
  });

  it('tells a caller the same for an open, a closed and a non-HTTP port it refuses', async () => {
    const before = http.connections + notHttp.connections;
    const seen = await Promise.all(
      [http.port, closedPort, notHttp.port].map((port) => failure(get(open, `http://127.0.0.1:${port}/`))),
    );
    expect(seen[0]).toEqual({ code: 'EGRESS_REFUSED', message: expect.any(String), retryable: false });
    expect(seen[1]).toEqual(seen[0]);
    expect(seen[2]).toEqual(seen[0]);
    expect(seen[0]!.message).not.toMatch(/\d/);
    expect(http.connections + notHttp.connections).toBe(before);
  });

  it('words a closed port and a non-HTTP port alike where they are allowed', async () => {
    const closed = await failure(get(loopback, `http://127.0.0.1:${closedPort}/`));
    const garbage = await failure(get(loopback, `http://127.0.0.1:${notHttp.port}/`));
    expect(closed).toEqual({
      code: 'EGRESS_UNREACHABLE',
      message: 'no HTTP answer from the URL',
      retryable: true,
    });
    expect(garbage).toEqual(closed);
  });

  it('resolves a name once and checks every address it resolved to', async () => {
    const lookups: string[] = [];
    const resolving = (addresses: string[]) =>
      createEgress(loopbackAllowList, {
        lookup: async (host) => {
          lookups.push(host);
          return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
        },
      });
    const local = resolving(['127.0.0.1']);
    const mixed = resolving(['93.184.215.14', '10.0.0.1']);
    const strict = createEgress('', { lookup: async () => [{ address: '127.0.0.1', family: 4 }] });
    try {
      expect((await get(local, `http://files.test:${http.port}/`)).status).toBe(200);
      expect(lookups).toEqual(['files.test']);
      const before = http.connections;
      expect(await failure(get(mixed, `http://files.test:${http.port}/`))).toMatchObject({
        code: 'EGRESS_REFUSED',
      });
      expect(await failure(get(strict, `http://rebind.test:${http.port}/`))).toMatchObject({
        code: 'EGRESS_REFUSED',
      });
      expect(http.connections).toBe(before);
    } finally {
      await Promise.all([local.close(), mixed.close(), strict.close()]);
    }
  });

  it('re-checks every redirect hop, and follows none unless asked', async () => {
    const target = await listen(createHttpServer((_q, r) => r.end('inside')));
    const redirector = await listen(
      createHttpServer((request, response) => {
        const hops = Number(new URL(request.url ?? '/', 'http://x').searchParams.get('hops') ?? 0);
        const location = hops > 0 ? `/?hops=${hops - 1}` : `http://127.0.0.1:${target.port}/metadata`;
        response.writeHead(302, { location }).end();
      }),
    );
    // Only the redirector is allowed: its 302 to another loopback port must not be followed.
    const egress = createEgress(`127.0.0.1:${redirector.port}`);
    try {
      expect(
        await failure(get(egress, `http://127.0.0.1:${redirector.port}/`, { redirects: 5 })),
      ).toMatchObject({ code: 'EGRESS_REFUSED' });
      expect(target.connections).toBe(0);
      const unfollowed = await get(egress, `http://127.0.0.1:${redirector.port}/`);
      expect(unfollowed.status).toBe(302);
      expect(
        await failure(get(egress, `http://127.0.0.1:${redirector.port}/?hops=5`, { redirects: 3 })),
      ).toMatchObject({ code: 'EGRESS_REDIRECT_REFUSED' });
      // Allowed at every hop, the chain is followed to its end.
      expect(
        (
          await get(loopback, `http://127.0.0.1:${redirector.port}/?hops=2`, { redirects: 5 })
        ).body.toString(),
      ).toBe('inside');
    } finally {
      await egress.close();
      await target.close();
      await redirector.close();
    }
  });

  it('stops reading an answer at its cap, announced or not', async () => {
    expect(await failure(get(loopback, `http://127.0.0.1:${http.port}/big`))).toMatchObject({
      code: 'EGRESS_TOO_LARGE',
      retryable: false,
    });
    let streamed = 0;
    const cut = await failure(
      get(loopback, `http://127.0.0.1:${http.port}/chunked`, {
        maxBodyBytes: 256 * 1024,
        onResponse: () => (chunk) => {
          streamed += chunk.length;
        },
      }),
    );
    expect(cut.code).toBe('EGRESS_TOO_LARGE');
    expect(streamed).toBeLessThanOrEqual(256 * 1024);
    const whole = await get(loopback, `http://127.0.0.1:${http.port}/chunked`, {
      maxBodyBytes: 8 * 1024 * 1024,
    });
    expect(whole.bytes).toBe(64 * 64 * 1024);
  });

  it('gives up on a peer that never answers within the time cap', async () => {
    const silent = await listen(createNetServer(() => {}));
    try {
      expect(
        await failure(get(loopback, `http://127.0.0.1:${silent.port}/`, { timeoutMs: 300 })),
      ).toMatchObject({ code: 'EGRESS_UNREACHABLE' });
    } finally {
      await silent.close();
    }
  });
});
