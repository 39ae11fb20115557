/**
 * The client's choice of server among several: a server that fails (5xx, no answer) is left for the next
 * within the same request and the client stays there; a busy one (429) is not left, since every replica
 * would say the same. Two plain HTTP servers stand in for replicas: only the status codes matter here.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { UnavailableError, WorkerClient } from '../src/index.ts';

const servers: Server[] = [];

/** A server answering every request with `status()`; its URL and the requests it got. */
async function replica(status: () => number) {
  const paths: string[] = [];
  const server = createServer((request, response) => {
    paths.push(request.url ?? '');
    response.writeHead(status()).end();
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, paths };
}

afterEach(async () => {
  for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
});

describe('the worker client with several servers', () => {
  it('moves to the next server when one fails, and stays there', async () => {
    let firstStatus = 503;
    const first = await replica(() => firstStatus);
    const second = await replica(() => 204);
    const client = new WorkerClient(`${first.url}, ${second.url}/`, 'tdpw_key', 2_000);
    try {
      await client.heartbeat('w1', 'READY');
      expect(client.server).toBe(second.url);
      firstStatus = 204;
      await client.heartbeat('w1', 'READY');
      expect(first.paths).toHaveLength(1);
      expect(second.paths).toHaveLength(2);
    } finally {
      await client.close();
    }
  });

  it('a server that does not answer at all is left too', async () => {
    const second = await replica(() => 204);
    const client = new WorkerClient(['http://127.0.0.1:1', second.url], 'tdpw_key', 2_000);
    try {
      await client.heartbeat('w1', 'READY');
      expect(client.server).toBe(second.url);
    } finally {
      await client.close();
    }
  });

  it('a busy server (429) is not left; when every server fails, the request fails as unavailable', async () => {
    const busy = await replica(() => 429);
    const other = await replica(() => 204);
    const client = new WorkerClient([busy.url, other.url], 'tdpw_key', 2_000);
    const down = new WorkerClient([(await replica(() => 502)).url, (await replica(() => 503)).url], 'k');
    try {
      await expect(client.heartbeat('w1', 'READY')).rejects.toBeInstanceOf(UnavailableError);
      expect(client.server).toBe(busy.url);
      expect(other.paths).toHaveLength(0);
      await expect(down.heartbeat('w1', 'READY')).rejects.toBeInstanceOf(UnavailableError);
    } finally {
      await client.close();
      await down.close();
    }
  });
});
