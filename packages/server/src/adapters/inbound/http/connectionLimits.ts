/**
 * Open TCP connections per client address on a listener. One client cannot hold every socket of the
 * process: the connection over the limit is answered 429 CONNECTION_LIMIT before its request is read,
 * and closed. Counted per client (clientAddress.ts: an IPv6 /64 is one) in this process (a proxy in front
 * is one address).
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { clientOf } from './clientAddress.ts';
import { problem, rawProblemResponse } from './problems.ts';

/** Sent to a refused connection: a client may try again once one of its connections has closed. */
const retryAfterSeconds = 1;

/** The answer to a refused connection, the same every time. */
const refusal = rawProblemResponse(
  problem('CONNECTION_LIMIT', 'this address holds too many open connections; close one and retry'),
  [`Retry-After: ${retryAfterSeconds}`],
);

/**
 * Refuses a connection from an address that already holds `max` of them (`max` 0: no limit). The
 * server's own connection listeners (HTTP parsing) are moved behind the check, so a refused
 * connection's request is never parsed, let alone handled.
 */
export function limitConnectionsPerAddress(server: Server, max: number, refused: () => void): void {
  if (max <= 0) return;
  const open = new Map<string, number>();
  const serve = server.listeners('connection') as ((socket: Socket) => void)[];
  server.removeAllListeners('connection');
  server.on('connection', (socket: Socket) => {
    const address = clientOf(socket.remoteAddress ?? '');
    const count = open.get(address) ?? 0;
    if (count >= max) {
      refused();
      socket.on('error', () => {});
      socket.end(refusal);
      // A client that never reads its answer does not keep the socket: it is cut after a moment.
      setTimeout(() => socket.destroy(), 1_000).unref();
      return;
    }
    open.set(address, count + 1);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left > 0) open.set(address, left);
      else open.delete(address);
    });
    for (const listener of serve) listener.call(server, socket);
  });
}
