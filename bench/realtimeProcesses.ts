/**
 * The processes of `bench -- realtime`: its sizes, the client processes (bench/realtimeClient.ts) that
 * hold the connections, and the server processes (bench/realtimePeer.ts) measured alone.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { sized } from './support.ts';

export const USERS = sized('BENCH_RT_USERS', 1_000, 50);
export const RATE = sized('BENCH_RT_RATE', 1_000, 200);
export const SECONDS = sized('BENCH_RT_SECONDS', 30, 3);
export const IDLE = sized('BENCH_RT_IDLE', 10_000, 200);
export const BATCH = sized('BENCH_RT_BATCH', 25, 25);
export const CLIENT_PROCESSES = sized(null, 4, 2);

export type Mode = 'tdp' | 'socketio' | 'tdp-idle' | 'socketio-idle';

export function waitFor<T>(child: ChildProcess, type: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const listener = (message: { type: string; error?: string }) => {
      if (message.type === 'error') {
        child.off('message', listener);
        reject(new Error(message.error));
      } else if (message.type === type) {
        child.off('message', listener);
        resolve(message as T);
      }
    };
    child.on('message', listener);
  });
}

/** Client processes, each holding its share of the connections. */
export async function openClients(
  mode: Mode,
  url: string,
  connections: { user: string; token?: string; slow?: boolean }[],
) {
  const children = Array.from({ length: CLIENT_PROCESSES }, () =>
    fork('bench/realtimeClient.ts', [], {
      execArgv: ['--conditions=@tdp/source', '--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    }),
  );
  await Promise.all(
    children.map((child, p) => {
      const ready = waitFor(child, 'ready');
      child.send({
        type: 'start',
        mode,
        url,
        connections: connections.filter((_, i) => i % CLIENT_PROCESSES === p),
      });
      return ready;
    }),
  );
  const tellAll = (type: 'pause' | 'resume') =>
    Promise.all(
      children.map((child) => {
        const answer = waitFor(child, type);
        child.send({ type });
        return answer;
      }),
    );
  return {
    /** The `slow` connections stop reading their sockets (until `resumeSlow`). */
    pauseSlow: () => tellAll('pause'),
    resumeSlow: () => tellAll('resume'),
    report: async () => {
      const reports = await Promise.all(
        children.map((child) => {
          const answer = waitFor<{ latencies: number[]; arrivals?: [string, number][]; received: number }>(
            child,
            'report',
          );
          child.send({ type: 'report' });
          return answer;
        }),
      );
      return {
        latencies: reports.flatMap((r) => r.latencies).sort((a, b) => a - b),
        arrivals: reports.flatMap((r) => r.arrivals ?? []),
        received: reports.reduce((sum, r) => sum + r.received, 0),
      };
    },
    stop: async () => {
      await Promise.all(
        children.map(
          (child) =>
            new Promise((resolve) => {
              child.once('exit', resolve);
              child.send({ type: 'stop' });
            }),
        ),
      );
    },
  };
}

export async function startPeer(mode: 'gateway' | 'socketio', hmacKey = '') {
  const child = fork('bench/realtimePeer.ts', [mode, hmacKey], {
    execArgv: ['--expose-gc', '--conditions=@tdp/source', '--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const { port } = await waitFor<{ port: number }>(child, 'listening');
  return {
    port,
    child,
    memory: async () => {
      const answer = waitFor<{ rss: number; heapUsed: number; external: number }>(child, 'memory');
      child.send({ type: 'memory' });
      return answer;
    },
    stop: () => child.kill('SIGKILL'),
  };
}
