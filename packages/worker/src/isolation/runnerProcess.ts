/**
 * One capability runner seen from the worker: the child process, its readiness, and one attempt at a
 * time run in it — the capability's requests answered with the attempt's real context, its time limit
 * and memory watched, and its death turned into the attempt's failure with a stable code:
 *
 * - CAPABILITY_TIMED_OUT: the attempt ran past the time limit (the runner is killed);
 * - CAPABILITY_OUT_OF_MEMORY: the runner's heap hit its limit, or its resident memory passed it;
 * - CAPABILITY_CRASHED: the runner ended any other way (a throw from a timer, `process.exit`, a signal).
 *
 * All three are retryable: the step's retry policy decides (its `nonRetryableErrorCodes` may name them).
 */
import { type ChildProcess, fork } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { failureSentence } from '@tdp/protocol';
import type { Capability, CapabilityContext, OutputFile } from '../sdk.ts';
import { CapabilityError } from '../sdk.ts';
import { capabilityKey } from './capabilityModule.ts';
import { deserializeError, serializeError } from './errors.ts';
import type { FromRunner, ToRunner } from './messages.ts';

export interface RunnerLimits {
  /** MiB: the runner's V8 heap is capped here, and it is killed when its resident memory passes it. */
  memoryLimitMb: number;
  /** How long one attempt may run before its runner is killed. */
  timeLimitMs: number;
  /** After an abort (cancel, lost lease, stop), how long the capability has to return before a kill. */
  abortGraceMs: number;
}

export interface RunnerSpawn {
  /** The runner's entry file and the capability module it imports. */
  entry: string;
  module: string;
  execArgv: string[];
  env: NodeJS.ProcessEnv;
  limits: RunnerLimits;
}

type KillReason = 'TIMED_OUT' | 'OUT_OF_MEMORY' | 'ABORTED' | 'REFUSED' | 'CLOSED';

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderrTail: string;
}

/** Enough of the runner's stderr to recognise V8's fatal out-of-memory report. */
const stderrTailBytes = 4_096;
const memoryCheckMs = 250;

export class RunnerProcess {
  private readonly child: ChildProcess;
  private killedFor: KillReason | null = null;
  private stderrTail = '';
  /** Settles when the runner says it is ready; rejects if it ends first. */
  readonly ready: Promise<void>;
  /** Settles when the process has ended and its stderr is read. */
  readonly exited: Promise<Exit>;
  private ended = false;
  /** The running attempt's way to hear that the runner ended (one exit reaction, not one per run). */
  private onExit: ((exit: Exit) => void) | null = null;

  constructor(private readonly spawn: RunnerSpawn) {
    this.child = fork(spawn.entry, [spawn.module], {
      execArgv: [...spawn.execArgv, `--max-old-space-size=${spawn.limits.memoryLimitMb}`],
      env: spawn.env,
      stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
      serialization: 'advanced',
    });
    this.child.stderr?.on('data', (chunk: Buffer) => {
      // The capability's own output on stderr stays visible to whoever runs the worker.
      process.stderr.write(chunk);
      this.stderrTail = (this.stderrTail + chunk.toString('utf8')).slice(-stderrTailBytes);
    });
    this.exited = new Promise((resolve) => {
      this.child.once('close', (code, signal) => {
        this.ended = true;
        const exit = { code, signal, stderrTail: this.stderrTail };
        this.onExit?.(exit);
        resolve(exit);
      });
      this.child.once('error', () => this.child.kill('SIGKILL'));
    });
    this.ready = new Promise((resolve, reject) => {
      const onMessage = (message: FromRunner) => {
        if (message.type !== 'ready') return;
        this.child.off('message', onMessage);
        resolve();
      };
      this.child.on('message', onMessage);
      void this.exited.then((exit) =>
        reject(new Error(`the capability runner ended before it was ready (${describeExit(exit)})`)),
      );
    });
    this.ready.catch(() => {});
  }

  get alive(): boolean {
    return !this.ended && this.killedFor === null;
  }

  /** Runs one attempt; settles with the capability's output, or rejects with the attempt's failure. */
  run(capability: Capability, ctx: CapabilityContext, input: unknown): Promise<unknown> {
    const { attemptId, signal } = ctx;
    const { limits } = this.spawn;
    const outputs = new Map<number, OutputFile>();
    let nextOutputId = 1;
    return new Promise<unknown>((resolve, reject) => {
      let settled = false;
      const timers: NodeJS.Timeout[] = [];
      const settle = (outcome: () => void) => {
        if (settled) return;
        settled = true;
        for (const timer of timers) clearTimeout(timer);
        clearInterval(memoryWatch);
        this.onExit = null;
        this.child.off('message', onMessage);
        signal.removeEventListener('abort', onAbort);
        outcome();
      };
      const reply = (callId: number, answer: Promise<unknown>) =>
        answer.then(
          (result) => this.send({ type: 'reply', callId, result }),
          (error: unknown) => this.send({ type: 'reply', callId, error: serializeError(error) }),
        );
      const onMessage = (message: FromRunner) => {
        if (message.type === 'ready' || message.attemptId !== attemptId || settled) return;
        try {
          handle(message);
        } catch (error) {
          // What the runner sent could not be taken (a checkpoint that is not JSON, a malformed
          // progress): the runner is ended, its attempt fails; this process, serving others, goes on.
          this.kill('REFUSED');
          settle(() =>
            reject(
              capabilityFailure(
                'CAPABILITY_CRASHED',
                `the runner sent what the worker could not take: ${(error as Error).message}`,
              ),
            ),
          );
        }
      };
      const handle = (message: Exclude<FromRunner, { type: 'ready' }>) => {
        switch (message.type) {
          case 'progress':
            ctx.progress(message.percent, message.update);
            break;
          case 'checkpoint':
            ctx.saveCheckpoint(message.data);
            break;
          case 'log':
            ctx.log[message.level](message.message, message.fields as Record<string, unknown>);
            break;
          case 'call':
            if (message.method === 'download') reply(message.callId, ctx.download(String(message.args[0])));
            else if (message.method === 'allocateOutput')
              reply(
                message.callId,
                ctx.allocateOutput(message.args[0] as never).then((file) => {
                  const outputId = nextOutputId++;
                  outputs.set(outputId, file);
                  return { outputId, path: file.path, resourceRef: file.resourceRef };
                }),
              );
            else if (message.method === 'upload') {
              const file = outputs.get(Number(message.args[0]));
              reply(
                message.callId,
                file ? file.upload() : Promise.reject(new Error('no such output to upload')),
              );
            }
            break;
          case 'result':
            settle(() => resolve(message.output));
            break;
          case 'failed':
            settle(() => reject(deserializeError(message.error)));
            break;
        }
      };
      const onAbort = () => {
        this.send({ type: 'abort', attemptId, reason: String(signal.reason) });
        timers.push(setTimeout(() => this.kill('ABORTED'), limits.abortGraceMs));
      };
      const memoryWatch = setInterval(() => {
        void residentBytes(this.child.pid).then((bytes) => {
          // A reading that comes back after the attempt ended is not the next attempt's to answer for.
          if (!settled && bytes !== null && bytes > limits.memoryLimitMb * 1024 * 1024)
            this.kill('OUT_OF_MEMORY');
        });
      }, memoryCheckMs);
      timers.push(setTimeout(() => this.kill('TIMED_OUT'), limits.timeLimitMs));
      this.child.on('message', onMessage);
      this.onExit = (exit) => settle(() => reject(this.failureOf(exit)));
      if (this.ended) void this.exited.then((exit) => settle(() => reject(this.failureOf(exit))));
      signal.addEventListener('abort', onAbort, { once: true });
      const { taskId, stepKey, attempt, workDirectory, checkpoint } = ctx;
      this.send({
        type: 'run',
        attemptId,
        capability: capabilityKey(capability),
        input,
        meta: { taskId, stepKey, attempt, workDirectory },
        checkpoint,
      });
      if (signal.aborted) onAbort();
    });
  }

  /** Ends the runner at once (an idle one, or at the worker's close). */
  stop(): void {
    this.kill('CLOSED');
  }

  private kill(reason: KillReason): void {
    if (this.ended || this.killedFor !== null) return;
    this.killedFor = reason;
    this.child.kill('SIGKILL');
  }

  private send(message: ToRunner): void {
    if (!this.ended && this.child.connected) this.child.send(message, () => {});
  }

  private failureOf(exit: Exit): CapabilityError {
    const how = describeExit(exit);
    if (this.killedFor === 'TIMED_OUT')
      return capabilityFailure(
        'CAPABILITY_TIMED_OUT',
        `the attempt ran past the worker's time limit of ${this.spawn.limits.timeLimitMs} ms; its runner was killed`,
      );
    if (this.killedFor === 'OUT_OF_MEMORY' || /heap out of memory|Reached heap limit/i.test(exit.stderrTail))
      return capabilityFailure(
        'CAPABILITY_OUT_OF_MEMORY',
        `the attempt's runner used more than the worker's memory limit of ${this.spawn.limits.memoryLimitMb} MiB (${how})`,
      );
    return capabilityFailure('CAPABILITY_CRASHED', `the attempt's runner process ended (${how})`);
  }
}

const capabilityFailure = (code: string, detail: string) =>
  new CapabilityError(code, failureSentence(code), { retryable: true, category: 'CAPABILITY', detail });

const describeExit = (exit: Exit) =>
  exit.signal ? `signal ${exit.signal}` : `exit code ${exit.code ?? 'unknown'}`;

/** Resident memory from /proc (Linux); null elsewhere or once the process is gone. */
async function residentBytes(pid: number | undefined): Promise<number | null> {
  if (pid === undefined || process.platform !== 'linux') return null;
  try {
    const statm = await readFile(`/proc/${pid}/statm`, 'utf8');
    return Number(statm.split(' ')[1]) * 4096;
  } catch {
    return null;
  }
}
