/**
 * `tdp dev`'s worker: `tdp worker` with the built-in capabilities, as a process of its own, never inside
 * the server, so nothing an attempt does can take the API, the gateway or the demo app down with it.
 * It keeps its own key and local database under $TDP_HOME; if it ends without being asked to, it is
 * started again (after a pause that grows while it keeps ending).
 */
import { type ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { adminClient, ServerProblem } from './adminClient.ts';
import { type DevCredentials, saveCredentials } from './credentials.ts';

/** What the `tdp worker` process tells a parent that started it over IPC (cli main.ts). */
export type WorkerProcessMessage =
  | { type: 'tdp-worker-ready'; workerId: string }
  | { type: 'tdp-worker-failed'; name: string; message: string };

export interface DevWorker {
  readonly workerId: string;
  /** Drains the worker (SIGTERM) and waits for its process to end. */
  stop(): Promise<void>;
}

const maxRestartDelayMs = 30_000;

export async function startDevWorker(
  url: string,
  home: string,
  credentials: DevCredentials,
  extraEnv: NodeJS.ProcessEnv = {},
): Promise<DevWorker> {
  const admin = adminClient(url, credentials.adminToken);
  const issue = async () => {
    try {
      const issued = await admin.call<{ key: string }>('POST', '/admin/v1/worker-credentials', {
        label: 'tdp dev',
      });
      credentials.workerKey = issued.key;
    } catch (error) {
      if (error instanceof ServerProblem) error.message = `could not issue a worker key: ${error.message}`;
      throw error;
    }
    await saveCredentials(home, credentials);
  };
  if (!credentials.workerKey) await issue();
  const env = () => ({
    ...process.env,
    ...extraEnv,
    TDP_URL: url,
    TDP_WORKER_KEY: credentials.workerKey!,
    TDP_WORKER_DB: join(home, 'worker.db'),
    TDP_NODE_ID: 'dev',
    TDP_WORKER_NAME: 'tdp dev worker',
  });

  let started: { child: ChildProcess; workerId: string };
  try {
    started = await spawnWorker(env());
  } catch (error) {
    // A remembered key the server no longer knows (a new database, say): issue another, once.
    if ((error as Error).name !== 'RejectedError') throw error;
    await issue();
    started = await spawnWorker(env());
  }

  let stopping = false;
  let child = started.child;
  let failures = 0;
  /** A restart under way: a stop waits for it, then stops the worker it started. */
  let starting: Promise<void> | null = null;
  const restartLater = (what: string) => {
    failures += 1;
    // One that keeps ending waits longer each time.
    const delay = Math.min(500 * 2 ** (failures - 1), maxRestartDelayMs);
    process.stderr.write(`tdp dev: the worker ${what}; starting it again in ${delay} ms\n`);
    setTimeout(() => {
      if (stopping) return;
      starting = spawnWorker(env())
        .then(
          (next) => {
            child = next.child;
            if (!stopping) watch(child);
          },
          (error: unknown) => {
            if (!stopping) restartLater(`did not start (${(error as Error).message})`);
          },
        )
        .finally(() => {
          starting = null;
        });
    }, delay).unref();
  };
  const watch = (current: ChildProcess) => {
    const startedAt = Date.now();
    current.once('exit', (code, signal) => {
      if (stopping) return;
      if (Date.now() - startedAt > 60_000) failures = 0;
      restartLater(`ended (${signal ?? `exit code ${code}`})`);
    });
  };
  watch(child);

  return {
    workerId: started.workerId,
    stop: async () => {
      stopping = true;
      await starting;
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Starts `tdp worker` and resolves once it has registered; rejects with its error if it cannot. */
function spawnWorker(env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; workerId: string }> {
  // A process group of its own: a Ctrl-C in the terminal stops `tdp dev`, which drains the worker once
  // (SIGTERM); were the worker to get the Ctrl-C too, the second signal would cut its drain short. If
  // `tdp dev` is killed outright, the IPC channel closes, and that drains the worker.
  const child = fork(process.argv[1]!, ['worker'], {
    env,
    execArgv: process.execArgv,
    stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
    detached: true,
  });
  // The banner says the worker is up; only its warnings and errors are printed.
  createInterface({ input: child.stderr! }).on('line', (line) => {
    if (!line.startsWith('{"level":"info"')) process.stderr.write(`${line}\n`);
  });
  return new Promise((resolve, reject) => {
    child.on('message', (message: WorkerProcessMessage) => {
      if (message.type === 'tdp-worker-ready') resolve({ child, workerId: message.workerId });
      if (message.type === 'tdp-worker-failed')
        reject(Object.assign(new Error(message.message), { name: message.name }));
    });
    child.once('exit', (code, signal) =>
      reject(new Error(`the worker process ended as it started (${signal ?? `exit code ${code}`})`)),
    );
  });
}
