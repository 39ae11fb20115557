/**
 * Where attempts run. `inProcess` calls the capability in the worker's own process: for tests and for
 * code that is as trusted as the worker itself. `RunnerPool` runs each attempt in a capability runner, a
 * child process (runner.ts), so that nothing a capability does — a throw from a timer or a socket
 * handler, a native crash, unbounded memory, an endless loop, `process.exit` — takes down the worker or
 * another attempt. Runners are reused between attempts (starting one costs far more than an attempt's
 * round trip); an idle one is kept for a while, a dead one is replaced.
 */
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Capability, CapabilityContext } from '../sdk.ts';
import { moduleUrl } from './capabilityModule.ts';
import { type RunnerLimits, RunnerProcess } from './runnerProcess.ts';

export interface CapabilityRunners {
  run(capability: Capability, ctx: CapabilityContext, input: unknown): Promise<unknown>;
  close(): Promise<void>;
}

export const inProcess: CapabilityRunners = {
  run: (capability, ctx, input) => capability.run(ctx, input as never),
  close: async () => {},
};

export interface IsolationOptions extends Partial<RunnerLimits> {
  /** The module whose exports are the capabilities (a path, a file URL or a package specifier). */
  module: string | URL;
  /** How long an idle runner is kept for the next attempt (default 60 s; one is always kept). */
  idleMs?: number;
}

export const defaultRunnerLimits: RunnerLimits = {
  memoryLimitMb: 2_048,
  timeLimitMs: 60 * 60_000,
  abortGraceMs: 5_000,
};

export class RunnerPool implements CapabilityRunners {
  private readonly idle: { runner: RunnerProcess; timer: NodeJS.Timeout }[] = [];
  private readonly all = new Set<RunnerProcess>();
  private readonly spawnOptions;
  private readonly idleMs: number;
  private closed = false;

  constructor(options: IsolationOptions) {
    const limits = {
      memoryLimitMb: options.memoryLimitMb ?? defaultRunnerLimits.memoryLimitMb,
      timeLimitMs: options.timeLimitMs ?? defaultRunnerLimits.timeLimitMs,
      abortGraceMs: options.abortGraceMs ?? defaultRunnerLimits.abortGraceMs,
    };
    const entry = fileURLToPath(
      new URL(`./runner${extname(fileURLToPath(import.meta.url))}`, import.meta.url),
    );
    this.spawnOptions = {
      entry,
      module: moduleUrl(options.module),
      execArgv: runnerExecArgv(process.execArgv, entry.endsWith('.ts')),
      env: runnerEnv(process.env),
      limits,
    };
    this.idleMs = options.idleMs ?? 60_000;
  }

  /**
   * Starts `count` runners side by side and waits for them: a module that does not load fails the
   * worker's start, and the first attempts after a (re)start do not each wait for a runner to boot.
   */
  async warm(count = 1): Promise<void> {
    const runners = Array.from({ length: Math.max(1, count) }, () => this.spawn());
    try {
      await Promise.all(runners.map((runner) => runner.ready));
    } finally {
      for (const runner of runners) this.release(runner);
    }
  }

  async run(capability: Capability, ctx: CapabilityContext, input: unknown): Promise<unknown> {
    const runner = await this.acquire();
    try {
      return await runner.run(capability, ctx, input);
    } finally {
      this.release(runner);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const { timer } of this.idle.splice(0)) clearTimeout(timer);
    const exits = [...this.all].map((runner) => {
      runner.stop();
      return runner.exited;
    });
    await Promise.all(exits);
  }

  private async acquire(): Promise<RunnerProcess> {
    while (this.idle.length > 0) {
      const { runner, timer } = this.idle.pop()!;
      clearTimeout(timer);
      if (runner.alive) return runner;
    }
    const runner = this.spawn();
    await runner.ready;
    return runner;
  }

  private release(runner: RunnerProcess): void {
    if (!runner.alive) return;
    if (this.closed) {
      runner.stop();
      return;
    }
    // The last idle runner stays; the others end after idleMs without work.
    const timer = setTimeout(() => {
      if (this.idle.length <= 1) return;
      const index = this.idle.findIndex((entry) => entry.runner === runner);
      if (index >= 0) this.idle.splice(index, 1)[0]!.runner.stop();
    }, this.idleMs).unref();
    this.idle.push({ runner, timer });
  }

  private spawn(): RunnerProcess {
    if (this.closed) throw new Error('the capability runners are closed');
    const runner = new RunnerProcess(this.spawnOptions);
    this.all.add(runner);
    void runner.exited.then(() => this.all.delete(runner));
    return runner;
  }
}

/**
 * The worker's module loaders and conditions, so the runner imports what the worker could (a TypeScript
 * capability module under tsx, say); from TypeScript sources the runner itself needs tsx.
 */
export function runnerExecArgv(execArgv: readonly string[], fromSources: boolean): string[] {
  const kept: string[] = [];
  const withValue = new Set([
    '--import',
    '--require',
    '-r',
    '--loader',
    '--experimental-loader',
    '--conditions',
    '-C',
  ]);
  for (let i = 0; i < execArgv.length; i += 1) {
    const arg = execArgv[i]!;
    const name = arg.split('=')[0]!;
    if (!withValue.has(name)) continue;
    if (arg.includes('=')) kept.push(arg);
    else if (i + 1 < execArgv.length) kept.push(arg, execArgv[++i]!);
  }
  if (fromSources && !kept.some((arg) => arg === 'tsx' || arg.endsWith('=tsx')))
    kept.push('--conditions=@tdp/source', '--import', 'tsx');
  return kept;
}

/** The worker's environment without its credentials: a runner holds none. */
export function runnerEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(
    Object.entries(env).filter(
      ([name]) => !/^TDP_.*(KEY|SECRET|PASSWORD|TOKEN)/.test(name) && name !== 'DATABASE_URL',
    ),
  );
}
