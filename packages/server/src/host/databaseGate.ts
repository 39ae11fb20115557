/**
 * Before the features start (several read the database or LISTEN on it), the server waits for a database
 * host that takes writes. Until then it answers on its port: /healthz (alive), /readyz (503 NOT_READY,
 * saying why: every host a standby, or none reachable) and any other request 503 DATABASE_UNAVAILABLE.
 * So a server started against standbys only, or in the middle of a failover, stays up, says why, and
 * writes nothing; it starts for real once a primary answers.
 */
import { createServer } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { notReady } from '../adapters/inbound/http/healthRoutes.ts';
import { problem } from '../adapters/inbound/http/problems.ts';
import type { Host } from './host.ts';

const probeEveryMs = 1_000;

export async function awaitWritableDatabase(host: Host): Promise<void> {
  const probe = new WritableProbe(host);
  if (await probe.answered(host.settings.readinessDatabaseDeadlineMs)) return;
  host.logger.warn(
    { reason: host.health.databaseUnwritable() ?? 'the database does not answer' },
    'waiting for a database host that takes writes before starting',
  );
  // Port 0 (an embedder's test server) has no address anyone waits on: nothing to answer there.
  const answering = host.settings.port === 0 ? null : await answerWhileWaiting(host);
  try {
    for (;;) {
      const started = performance.now();
      if (await probe.answered(probeEveryMs)) break;
      // A refusal comes at once (a single host down): the next try still waits its turn.
      await sleep(Math.max(0, probeEveryMs - (performance.now() - started)));
    }
  } finally {
    if (answering) await answering();
  }
  host.logger.info('a database host takes writes: starting');
}

/** One statement kept in flight until it answers (a multi-host pool holds it until a primary appears). */
class WritableProbe {
  private pending: Promise<boolean> | null = null;

  constructor(private readonly host: Host) {}

  async answered(withinMs: number): Promise<boolean> {
    this.pending ??= this.host.sql`SELECT 1`.then(
      () => true,
      () => {
        this.pending = null; // refused (a single host down): ask again next time
        return false;
      },
    );
    let timer: NodeJS.Timeout | undefined;
    const waited = await Promise.race([
      this.pending,
      new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), withinMs);
      }),
    ]);
    clearTimeout(timer);
    return waited;
  }
}

/** Answers health requests on the server's port until the returned close. */
async function answerWhileWaiting(host: Host): Promise<() => Promise<void>> {
  const server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    const send = (status: number, type: string, body: unknown) => {
      response.writeHead(status, { 'content-type': type, ...(status === 503 ? { 'retry-after': '1' } : {}) });
      response.end(JSON.stringify(body));
    };
    if (path === '/healthz') return send(200, 'application/json', { status: 'ok' });
    if (path === '/readyz') {
      host.health.check().then(
        (report) => send(503, 'application/problem+json', notReady({ ...report, ready: false }, '/readyz')),
        () => send(503, 'application/problem+json', problem('NOT_READY', 'starting', undefined, '/readyz')),
      );
      return;
    }
    send(
      503,
      'application/problem+json',
      problem('DATABASE_UNAVAILABLE', 'the database is unavailable; retry later', undefined, path),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(host.settings.port, host.settings.host, () => resolve());
  });
  return async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
}
