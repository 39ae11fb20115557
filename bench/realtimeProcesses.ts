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
    const done = () => {
      child.off('message', listener);
      child.off('exit', exited);
    };
    const listener = (message: { type: string; error?: string }) => {
      if (message.type === 'error') {
        done();
        reject(new Error(message.error));
      } else if (message.type === type) {
        done();
        resolve(message as T);
      }
    };
    // A process that died (an uncaught error) never answers: fail the bench instead of hanging it.
    const exited = (code: number | null, signal: string | null) => {
      done();
      reject(new Error(`${child.spawnargs.at(-1)} exited (${signal ?? code}) before answering '${type}'`));
    };
    child.on('message', listener);
    child.on('exit', exited);
  });
}

/**
 * `count` processes running `script` (a bench module answering IPC messages): `ask` sends each a message
 * (with `extra(p)` for process p) and waits for every answer of type `answer`; `stop` sends `stop` and
 * waits for them to exit.
 */
export function childProcesses(script: string, count: number) {
  const children: ChildProcess[] = Array.from({ length: count }, () =>
    fork(script, [], {
      execArgv: ['--conditions=@tdp/source', '--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    }),
  );
  return {
    ask: <T>(type: string, answer: string, extra: (p: number) => Record<string, unknown> = () => ({})) =>
      Promise.all(
        children.map((child, p) => {
          const answered = waitFor<T>(child, answer);
          child.send({ type, ...extra(p) });
          return answered;
        }),
      ),
    tell: (message: Record<string, unknown>) => {
      for (const child of children) child.send(message);
    },
    stop: () =>
      Promise.all(
        children.map(
          (child) =>
            new Promise((resolve) => {
              if (child.exitCode !== null || child.signalCode !== null) return resolve(null);
              child.once('exit', resolve);
              child.send({ type: 'stop' });
            }),
        ),
      ),
  };
}

/** Client processes, each holding its share of the connections. */
export async function openClients(
  mode: Mode,
  url: string,
  connections: { user: string; token?: string; slow?: boolean }[],
) {
  const processes = childProcesses('bench/realtimeClient.ts', CLIENT_PROCESSES);
  await processes.ask('start', 'ready', (p) => ({
    mode,
    url,
    connections: connections.filter((_, i) => i % CLIENT_PROCESSES === p),
  }));
  return {
    /** The `slow` connections stop reading their sockets (until `resumeSlow`). */
    pauseSlow: () => processes.ask('pause', 'pause'),
    resumeSlow: () => processes.ask('resume', 'resume'),
    report: async () => {
      const reports = await processes.ask<{
        latencies: number[];
        arrivals?: [string, number][];
        received: number;
      }>('report', 'report');
      return {
        latencies: reports.flatMap((r) => r.latencies).sort((a, b) => a - b),
        arrivals: reports.flatMap((r) => r.arrivals ?? []),
        received: reports.reduce((sum, r) => sum + r.received, 0),
      };
    },
    stop: async () => {
      await processes.stop();
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
