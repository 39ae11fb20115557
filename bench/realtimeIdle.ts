/**
 * Idle memory for `bench -- realtime`: IDLE connections held open on the gateway alone (compiled, as
 * `tdp gateway` runs it), on Centrifugo and on socket.io; memory per connection from the server
 * process's RSS (and for Node the heap after a full GC), before and after.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { promisify } from 'node:util';
import { SignJWT } from 'jose';
import { type CentrifugoProcess, newTokenSecret, startCentrifugo } from '../test/centrifugo.ts';
import { IDLE, openClients, startPeer } from './realtimeProcesses.ts';

export interface Idle {
  rssPerConnection: number;
  /** Node's heap and external memory (null for Centrifugo, a Go process). */
  heapPerConnection: number | null;
}

/** A Centrifugo process's resident memory, from /proc (what `ps` shows as RSS). */
async function centrifugoRss(centrifugo: CentrifugoProcess): Promise<number> {
  const status = await readFile(`/proc/${centrifugo.pid}/status`, 'utf8');
  const kib = /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1];
  if (!kib) throw new Error(`no VmRSS in /proc/${centrifugo.pid}/status`);
  return Number(kib) * 1024;
}

/** IDLE connections held open, each with the user channel its token subscribes (not for socket.io). */
export async function idleConnections(hmacKey: string) {
  const key = new TextEncoder().encode(hmacKey);
  return Promise.all(
    Array.from({ length: IDLE }, async (_, u) => ({
      user: `user-${u}`,
      token: await new SignJWT({ sub: `user-${u}`, channels: [`task_user:t/user-${u}`] })
        .setProtectedHeader({ alg: 'HS256' })
        .setExpirationTime('1h')
        .sign(key),
    })),
  );
}

/** `packages/gateway/dist`, what `tdp gateway` runs (incremental: quick when nothing changed). */
async function buildGateway(): Promise<void> {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  await promisify(execFile)(process.execPath, [tsc, '-b', 'packages/gateway/tsconfig.build.json']);
}

export async function idleMemory(system: 'gateway' | 'socketio'): Promise<Idle> {
  if (system === 'gateway') await buildGateway();
  const hmacKey = 'bench-idle-secret-of-a-decent-length';
  const peer = await startPeer(system, hmacKey);
  try {
    const before = await peer.memory();
    const clients =
      system === 'gateway'
        ? await openClients(
            'tdp-idle',
            `ws://127.0.0.1:${peer.port}/connection/websocket`,
            await idleConnections(hmacKey),
          )
        : await openClients(
            'socketio-idle',
            `http://127.0.0.1:${peer.port}`,
            Array.from({ length: IDLE }, (_, u) => ({ user: `user-${u}` })),
          );
    const after = await peer.memory();
    await clients.stop();
    return {
      rssPerConnection: (after.rss - before.rss) / IDLE,
      heapPerConnection: (after.heapUsed + after.external - before.heapUsed - before.external) / IDLE,
    };
  } finally {
    peer.stop();
  }
}

export async function idleCentrifugoMemory(binary: string): Promise<Idle> {
  const tokenSecret = newTokenSecret();
  const centrifugo = await startCentrifugo({ binary, tokenSecret });
  try {
    const before = await centrifugoRss(centrifugo);
    const clients = await openClients('tdp-idle', centrifugo.wsUrl, await idleConnections(tokenSecret));
    const after = await centrifugoRss(centrifugo);
    await clients.stop();
    return { rssPerConnection: (after - before) / IDLE, heapPerConnection: null };
  } finally {
    await centrifugo.stop();
  }
}
