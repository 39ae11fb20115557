/**
 * Gateway nodes on the Redis engine for the multi-node tests: each node a `Gateway` on its own HTTP
 * server on 127.0.0.1, resynchronising its clients when the engine says so, and closed together.
 */
import { createServer, type Server } from 'node:http';
import { Gateway, RedisEngine, type RedisEngineOptions } from '../src/index.ts';

export interface Node {
  gateway: Gateway;
  server: Server;
  url: string;
}

export interface RedisNodes {
  readonly list: Node[];
  start(): Promise<Node>;
  /** Closes every node started. */
  close(): Promise<void>;
}

/** Nodes signing with `hmacKey` on engines made from `engine()` (a new Redis target for each). */
export function redisNodes(hmacKey: string, engine: () => Omit<RedisEngineOptions, 'onResync'>): RedisNodes {
  const list: Node[] = [];
  return {
    list,
    start: async () => {
      const gateway: Gateway = new Gateway({
        hmacKey,
        engine: new RedisEngine({ ...engine(), onResync: () => gateway.resync() } as RedisEngineOptions),
      });
      await gateway.ready;
      const server = createServer();
      gateway.attach(server);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const port = (server.address() as { port: number }).port;
      const node = { gateway, server, url: `ws://127.0.0.1:${port}/connection/websocket` };
      list.push(node);
      return node;
    },
    close: async () => {
      for (const node of list) {
        await node.gateway.close();
        await new Promise((resolve) => node.server.close(resolve));
      }
    },
  };
}
