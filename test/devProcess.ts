/** `tdp dev` (or `npm start`) as a test runs it: a real process, ready once it prints its banner. */
import { type ChildProcess, spawn } from 'node:child_process';

export interface DevProcess {
  child: ChildProcess;
  /** Everything it printed so far, stdout and stderr together. */
  output(): string;
  /** Resolves when every process of the tree has closed its output (npm may exit before `tdp`). */
  closed: Promise<void>;
  /** Ctrl-C (to the whole process group when started `detached`); resolves with everything printed. */
  stop(): Promise<string>;
}

/** Starts `command` and resolves once it printed "Press Ctrl-C to stop."; rejects with its output if not. */
export async function startDevProcess(
  command: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; detached?: boolean; timeoutMs?: number },
): Promise<DevProcess> {
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.env,
    detached: options.detached ?? false,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const collect = (chunk: Buffer) => {
    output += chunk.toString();
  };
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const deadline = Date.now() + (options.timeoutMs ?? 120_000);
  while (!output.includes('Press Ctrl-C to stop.')) {
    if (child.exitCode !== null) throw new Error(`${command} exited early:\n${output}`);
    if (Date.now() > deadline) {
      // The whole tree (npm, tdp, PostgreSQL) when it has a group of its own.
      if (options.detached) process.kill(-child.pid!, 'SIGKILL');
      else child.kill('SIGKILL');
      throw new Error(`${command} did not come up:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    child,
    output: () => output,
    closed,
    stop: async () => {
      // A group is signalled even when its leader (npm) has exited: tdp may still run.
      if (options.detached) {
        try {
          process.kill(-child.pid!, 'SIGINT');
        } catch {} // the group is gone
      } else if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
      await closed;
      return output;
    },
  };
}
