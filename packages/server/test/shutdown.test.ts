/**
 * `tdp server` exits within its shutdown deadline even when something it waits for will never settle:
 * here, a query on a database connection that stopped answering (packets no longer pass; nothing is
 * closed), as under the wedged COMMITs of a connection storm.
 */
import { describe, expect, it } from 'vitest';
import { createTestDatabase } from '../../../test/database.ts';
import { TcpProxy } from '../../../test/tcpProxy.ts';
import { tdpProcess } from '../../../test/tdpProcess.ts';
import { freePort } from '../../cli/src/embeddedPostgres.ts';

describe('shutting down', () => {
  it('a server whose database stopped answering mid-query exits with 1 at its shutdown deadline', async () => {
    const database = await createTestDatabase();
    const target = new URL(database.url);
    const proxy = new TcpProxy(target.hostname, Number(target.port || 5432));
    await proxy.start();
    const through = new URL(database.url);
    through.port = String(proxy.port);
    const tdp = tdpProcess({
      databaseUrl: through.toString(),
      port: await freePort(),
      env: { TDP_SHUTDOWN_DEADLINE_MS: '2000' },
    });
    try {
      await tdp.start();
      proxy.freeze();
      // Within a second the scheduler's next round sends a query that is never answered, and the
      // shutdown waits for that round.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(await tdp.stop('SIGTERM', 15_000)).toBe(1);
    } finally {
      await tdp.kill();
      await proxy.cut();
      await database.drop();
    }
  }, 60_000);
});
