import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const children = new Set<ChildProcess>();

export interface WorkerProcess {
  child: ChildProcess;
  exited: Promise<number | null>;
  workerId: string;
}

/** The runtime in its own process (runtimeProcess.ts), on its own SQLite file; resolves once registered. */
export async function startWorkerProcess(
  baseUrl: string,
  workerKey: string,
  dbPath: string,
  nodeId: string,
): Promise<WorkerProcess> {
  const child = spawn(
    process.execPath,
    [
      '--conditions=@tdp/source',
      '--import',
      'tsx',
      fileURLToPath(new URL('./runtimeProcess.ts', import.meta.url)),
      baseUrl,
      workerKey,
      dbPath,
      nodeId,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  children.add(child);
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      children.delete(child);
      resolve(code);
    }),
  );
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const first = await lines.next();
  if (first.done) throw new Error('the worker process ended before registering');
  return { child, exited, workerId: JSON.parse(first.value).workerId as string };
}

/** SIGTERM: the session drains, so the server stops placing steps on it (a killed one keeps them till its TTL). */
export async function stopWorkerProcess(worker: WorkerProcess): Promise<void> {
  worker.child.kill('SIGTERM');
  await worker.exited;
}

export function killAllWorkerProcesses(): void {
  for (const child of children) child.kill('SIGKILL');
}
