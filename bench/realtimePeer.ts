/**
 * A server process for `bench -- realtime`, alone so that its memory is its own:
 *
 * - `gateway <hmacKey>`: TDP's gateway (memory engine), as `tdp gateway` runs it: the compiled package
 *   (`packages/gateway/dist`, built by the bench), not its source through tsx, whose transform
 *   (esbuild's `keepNames`) defines a `name` on each function it makes: about 1 KiB more per connection.
 * - `socketio`: a socket.io server where each client joins the room of its user; on `load` it emits
 *   `state` messages to the rooms at a fixed rate (the peer of TDP's relay → gateway path).
 *
 * IPC: `listening` with the port; `memory` → the process's memory after a full GC.
 */
import { createServer } from 'node:http';

/** Not a static import: dist/ exists only once the bench has built it (`tsc -b` type-checks without it). */
const compiledGateway = '../packages/gateway/dist/index.js';

const [mode, hmacKey] = process.argv.slice(2) as ['gateway' | 'socketio', string | undefined];
const server = createServer();

let emit: ((room: string, data: unknown) => void) | null = null;
if (mode === 'gateway') {
  const { Gateway } = (await import(compiledGateway)) as typeof import('../packages/gateway/src/index.ts');
  const gateway = new Gateway({ hmacKey: hmacKey!, history: () => ({ size: 100, ttlMs: 600_000 }) });
  gateway.attach(server);
} else {
  const { Server } = await import('socket.io');
  const ioServer = new Server(server, { transports: ['websocket'], serveClient: false });
  ioServer.on('connection', (socket) => {
    socket.on('join', (user: string, ack: () => void) => {
      void socket.join(user);
      ack();
    });
  });
  emit = (room, data) => ioServer.to(room).emit('state', data);
}

server.listen(0, '127.0.0.1', () => {
  process.send?.({ type: 'listening', port: (server.address() as { port: number }).port });
});

process.on(
  'message',
  async (message: { type: string; users?: string[]; perSecond?: number; seconds?: number }) => {
    if (message.type === 'memory') {
      for (let i = 0; i < 3; i += 1) {
        (globalThis as { gc?: () => void }).gc?.();
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const usage = process.memoryUsage();
      process.send?.({ type: 'memory', rss: usage.rss, heapUsed: usage.heapUsed, external: usage.external });
    } else if (message.type === 'load' && emit) {
      const users = message.users!;
      const total = message.perSecond! * message.seconds!;
      const tickMs = 10;
      const perTick = (message.perSecond! * tickMs) / 1000;
      let sent = 0;
      const startedAt = performance.now();
      await new Promise<void>((resolve) => {
        const tick = () => {
          const due = Math.min(total, Math.floor(((performance.now() - startedAt) / tickMs + 1) * perTick));
          while (sent < due) {
            emit!(users[sent % users.length]!, { sentAt: Date.now(), n: sent });
            sent += 1;
          }
          if (sent >= total) resolve();
          else setTimeout(tick, tickMs);
        };
        tick();
      });
      process.send?.({ type: 'loaded', sent });
    }
  },
);
