/**
 * The server's requests on a tenant's behalf under the egress policy (docs/security.md): callbacks,
 * notification webhooks (the same poster) and resource-provider calls. A listener on 127.0.0.1 must
 * receive nothing while loopback is not allowed, and an allow-list entry lets it through; what the tenant
 * reads in the delivery log is the same for a refused open, closed or non-HTTP port; a URL that names a
 * refused address literally is refused at input with 422 `EGRESS_REFUSED`.
 */
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { createEgress, type Egress } from '@tdp/egress';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness, zipWorkflow } from '../../../test/harness.ts';
import { callbackPoster } from '../src/adapters/outbound/http/callbackPoster.ts';
import { httpResourceProvider } from '../src/adapters/outbound/http/resourceProvider.ts';
import { type ClaimedCallback, sendDueCallbacks } from '../src/core/callbacks/sendCallbacks.ts';

interface Listener {
  port: number;
  connections: number;
  requests: number;
  close(): Promise<void>;
}

async function listen(server: HttpServer | NetServer): Promise<Listener> {
  const sockets = new Set<Socket>();
  const listener = {
    port: 0,
    connections: 0,
    requests: 0,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
  server.on('connection', (socket: Socket) => {
    listener.connections += 1;
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
  });
  server.on('request', () => {
    listener.requests += 1;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  listener.port = (server.address() as { port: number }).port;
  return listener;
}

let receiver: Listener;
let notHttp: Listener;
let closedPort: number;

beforeAll(async () => {
  receiver = await listen(
    createHttpServer((request, response) => {
      request.resume();
      request.on('end', () => {
        if (request.url === '/grants') {
          response.writeHead(200, { 'content-type': 'application/json' });
          return void response.end(JSON.stringify({ url: 'https://storage.example/f', method: 'GET' }));
        }
        response.writeHead(401).end();
      });
    }),
  );
  notHttp = await listen(createNetServer((socket) => socket.end('SSH-2.0-OpenSSH_9.6\r\n')));
  const probe = await listen(createNetServer());
  closedPort = probe.port;
  await probe.close();
});

afterAll(async () => {
  await Promise.all([receiver.close(), notHttp.close()]);
});

/** Sends one delivery to `url` through the real poster; returns what the delivery log would keep. */
async function deliverOnce(egress: Egress, url: string): Promise<string> {
  const outcomes: string[] = [];
  const delivery: ClaimedCallback = {
    id: 'd1',
    claimId: 'c1',
    attempts: 1,
    applicationId: 'app',
    taskId: 't',
    executionId: 'e',
    url,
    payload: { eventId: 'x', sequence: 1 },
  };
  const batch = [delivery];
  await sendDueCallbacks(
    {
      queue: {
        claim: async () => batch.splice(0),
        delivered: async (_c, _id, status) => void outcomes.push(`DELIVERED HTTP ${status}`),
        failed: async (_c, _id, _a, error) => void outcomes.push(`FAILED ${error}`),
        dead: async (_c, _id, error) => void outcomes.push(`DEAD ${error}`),
      },
      clock: { now: () => new Date() },
      signingSecrets: async () => ['whsec_test'],
      post: callbackPoster(2_000, egress),
      random: () => 0,
    },
    10,
  );
  return outcomes[0]!;
}

describe('callbacks and webhooks', () => {
  it('reach no loopback receiver, however its address is written, and go DEAD at once', async () => {
    const egress = createEgress([]);
    try {
      const { port } = receiver;
      for (const host of ['127.0.0.1', '[::1]', '2130706433', '0x7f000001', '0177.0.0.1', 'localhost']) {
        const logged = await deliverOnce(egress, `http://${host}:${port}/hook`);
        expect(logged).toBe(
          'DEAD EGRESS_REFUSED: the URL’s address is not one TDP may reach (egress policy)',
        );
      }
      expect(receiver.connections).toBe(0);
    } finally {
      await egress.close();
    }
  });

  it('log the same for a refused open, closed and non-HTTP port', async () => {
    const egress = createEgress([]);
    const before = receiver.connections + notHttp.connections;
    try {
      const logged = await Promise.all(
        [receiver.port, closedPort, notHttp.port].map((port) =>
          deliverOnce(egress, `http://127.0.0.1:${port}/`),
        ),
      );
      expect(new Set(logged).size).toBe(1);
      expect(logged[0]).not.toMatch(/\d{2,}|ECONN|fetch/);
      expect(receiver.connections + notHttp.connections).toBe(before);
    } finally {
      await egress.close();
    }
  });

  it('reach what the allow-list names, and word a closed and a non-HTTP port alike there', async () => {
    const egress = createEgress([
      `127.0.0.1:${receiver.port}`,
      `127.0.0.1:${closedPort}`,
      `127.0.0.1:${notHttp.port}`,
    ]);
    try {
      expect(await deliverOnce(egress, `http://127.0.0.1:${receiver.port}/hook`)).toBe('DEAD HTTP 401');
      expect(receiver.requests).toBe(1);
      const closed = await deliverOnce(egress, `http://127.0.0.1:${closedPort}/`);
      const garbage = await deliverOnce(egress, `http://127.0.0.1:${notHttp.port}/`);
      expect(closed).toBe('FAILED EGRESS_UNREACHABLE: no HTTP answer from the URL');
      expect(garbage).toBe(closed);
    } finally {
      await egress.close();
    }
  });
});

describe('the resource-provider call', () => {
  it('reaches no provider on loopback unless allowed, and a refusal is final', async () => {
    const before = receiver.connections;
    const refused = createEgress([]);
    const allowed = createEgress(['127.0.0.0/8']);
    try {
      for (const host of ['127.0.0.1', 'localhost', '2130706433']) {
        const reply = await httpResourceProvider(2_000, refused).request(
          `http://${host}:${receiver.port}/grants`,
          'token',
          { purpose: 'DOWNLOAD' },
          'key-1',
        );
        expect(reply).toEqual({
          kind: 'refused',
          detail:
            'the provider URL: EGRESS_REFUSED: the URL’s address is not one TDP may reach (egress policy)',
        });
      }
      expect(receiver.connections).toBe(before);
      const reply = await httpResourceProvider(2_000, allowed).request(
        `http://127.0.0.1:${receiver.port}/grants`,
        'token',
        { purpose: 'DOWNLOAD' },
        'key-1',
      );
      expect(reply).toMatchObject({ kind: 'answered', body: { url: 'https://storage.example/f' } });
    } finally {
      await Promise.all([refused.close(), allowed.close()]);
    }
  });
});

describe('input checks', () => {
  let h: Harness;
  let app: Awaited<ReturnType<Harness['createApplication']>>;
  beforeAll(async () => {
    // The policy as `tdp server` has it: nothing beyond public addresses.
    h = await startHarness({ allowInsecureCallbacks: true, egressAllow: [] });
    app = await h.createApplication();
    await h.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body: zipWorkflow() });
  });
  afterAll(async () => {
    await h.close();
  });

  const submit = (callbackUrl: string) =>
    h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': `k-${Math.random()}` },
      body: {
        workflowName: 'zip-clean-watermark',
        workflowVersion: '1',
        name: 'Egress check',
        input: { sourceZip: 'asset://z1', watermarkText: 'x' },
        callbackUrl,
      },
    });

  it.each([
    'http://127.0.0.1:9/hook',
    'http://[::1]/hook',
    'http://2130706433/hook',
    'http://0x7f000001/hook',
    'http://0177.0.0.1/hook',
    'http://169.254.169.254/latest/meta-data/',
    'http://10.0.0.8/hook',
    'http://[fd00::1]/hook',
  ])('refuses a task whose callbackUrl is %s with 422 EGRESS_REFUSED', async (url) => {
    const answer = await submit(url);
    expect(answer.status).toBe(422);
    expect(answer.body).toMatchObject({ code: 'EGRESS_REFUSED', errors: [{ path: '/callbackUrl' }] });
  });

  it('accepts a name (checked when connecting) and a public address', async () => {
    expect((await submit('http://localhost:9/hook')).status).toBe(201);
    expect((await submit('https://93.184.215.14/hook')).status).toBe(201);
  });

  it("refuses an application's resource provider on a refused address", async () => {
    const answer = await h.request('PUT', `/admin/v1/applications/${app.applicationId}/resource-provider`, {
      token: h.adminToken,
      body: { url: 'http://127.1:8080/grants', bearerToken: 'provider-secret-token' },
    });
    expect(answer.status).toBe(422);
    expect(answer.body).toMatchObject({
      code: 'EGRESS_REFUSED',
      errors: [{ path: '/resourceProvider/url' }],
    });
  });
});
