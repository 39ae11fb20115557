/**
 * The chaos suite's child processes (servers and workers of every system), supervised: the suite
 * knows which exits it caused (a SIGKILL of a fault) and which a process took on its own, restarts
 * the latter like a supervisor would, keeps each process's stderr and the warnings and errors it logged
 * (pino's JSON lines on stdout) in a log file under artifacts/chaos-logs/ and their tail in memory, and at the end asks each process to stop with SIGTERM:
 * one that does not exit within the deadline is wedged.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs';
import { createInterface } from 'node:readline';

export const logDirectory = 'artifacts/chaos-logs';

/** A process that exited without being told to. */
export interface OwnExit {
  name: string;
  code: number | null;
  signal: string | null;
  /** The last lines it wrote to stderr or logged at error level and above: the error it died of. */
  stderrTail: string;
}

/** The level of a pino JSON line (0 for any other line). */
function loggedLevel(line: string): number {
  if (!line.startsWith('{"level":')) return 0;
  return Number(/^\{"level":(\d+)/.exec(line)?.[1] ?? 0);
}

/** A logged error as the line exitReason picks: `Name: message` of its err, else its msg. */
function errorLineOf(line: string): string {
  try {
    const entry = JSON.parse(line) as {
      msg?: string;
      err?: { name?: string; message?: string; code?: string };
    };
    const err = entry.err;
    return err?.name
      ? `${err.name}: ${err.message ?? ''}${err.code ? ` (${err.code})` : ''} — ${entry.msg ?? ''}`
      : (entry.msg ?? line);
  } catch {
    return line;
  }
}

/** The line of an exit's stderr that names the error it died of (else its last line). */
export function exitReason(exit: OwnExit): string {
  const lines = exit.stderrTail.split('\n').map((l) => l.trim());
  // The last error line: what it died of comes after what it logged while it still ran.
  return lines.findLast((l) => /^(?:tdp: )?[\w-]*\s?(Error|error)\b[^.(]*:/.test(l)) ?? lines.at(-1) ?? '';
}

export interface Supervised {
  name: string;
  running(): boolean;
  /** SIGKILL, counted as the fault's, not the process's. */
  kill(): Promise<void>;
  start(): void;
  /** SIGTERM, then SIGKILL after `deadlineMs`: false when it had not exited by then (wedged). */
  terminate(deadlineMs: number): Promise<boolean>;
}

export class ProcessGroup {
  readonly ownExits: OwnExit[] = [];
  readonly wedged: string[] = [];
  /** How long each process took from SIGTERM to exit, s (a stuck shutdown shows here, even when it ends). */
  readonly stopSeconds: { name: string; seconds: number }[] = [];
  private readonly members: Supervised[] = [];
  private closing = false;

  constructor(private readonly runName: string) {
    mkdirSync(logDirectory, { recursive: true });
  }

  /**
   * A process of `command args` that is restarted `restartAfterMs` after it exits on its own;
   * `onLine` gets each stdout line.
   */
  add(
    name: string,
    args: string[],
    env: NodeJS.ProcessEnv,
    onLine: (line: string) => void = () => {},
    restartAfterMs = 1_000,
  ): Supervised {
    let child: ChildProcess | null = null;
    let killedByUs = false;
    let tail: string[] = [];
    const log: WriteStream = createWriteStream(`${logDirectory}/${this.runName}-${name}.log`, { flags: 'a' });
    const start = () => {
      killedByUs = false;
      tail = [];
      const started = spawn(process.execPath, ['--conditions=@tdp/source', '--import', 'tsx', ...args], {
        env: { ...process.env, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child = started;
      createInterface({ input: started.stdout! }).on('line', (line) => {
        const level = loggedLevel(line);
        if (level >= 40) log.write(`${line}\n`);
        // A fatal fault is logged (by the process guard) before the exit: it is what the process died of.
        if (level >= 50) tail = [...tail, errorLineOf(line)].slice(-40);
        onLine(line);
      });
      started.stderr!.on('data', (chunk: Buffer) => {
        log.write(chunk);
        tail = [...tail, ...chunk.toString().split('\n').filter(Boolean)].slice(-40);
      });
      started.once('exit', (code, signal) => {
        if (child === started) child = null;
        if (killedByUs || this.closing) return;
        this.ownExits.push({ name, code, signal, stderrTail: tail.join('\n') });
        log.write(`--- exited on its own: code ${code} signal ${signal}; restarting\n`);
        setTimeout(() => {
          if (!this.closing && child === null) start();
        }, restartAfterMs);
      });
    };
    const member: Supervised = {
      name,
      running: () => child !== null,
      start,
      kill: async () => {
        const running = child;
        if (!running) return;
        killedByUs = true;
        const exited = new Promise((resolve) => running.once('exit', resolve));
        running.kill('SIGKILL');
        await exited;
      },
      terminate: async (deadlineMs) => {
        const running = child;
        if (!running) return true;
        killedByUs = true;
        const exited = new Promise<boolean>((resolve) => running.once('exit', () => resolve(true)));
        running.kill('SIGTERM');
        const inTime = await Promise.race([
          exited,
          new Promise<false>((resolve) => setTimeout(() => resolve(false), deadlineMs)),
        ]);
        if (!inTime) {
          running.kill('SIGKILL');
          await exited;
        }
        log.end();
        return inTime;
      },
    };
    this.members.push(member);
    return member;
  }

  /**
   * Stops every process with SIGTERM, `deadlineMs` each: the workers first (a draining worker hands its
   * attempts back to a server), then the rest; records the wedged ones.
   */
  async close(deadlineMs: number): Promise<void> {
    this.closing = true;
    const isWorker = (m: Supervised) => m.name.startsWith('worker');
    for (const batch of [this.members.filter(isWorker), this.members.filter((m) => !isWorker(m))]) {
      const results = await Promise.all(
        batch.map(async (m) => {
          const sentAt = Date.now();
          const inTime = await m.terminate(deadlineMs);
          this.stopSeconds.push({ name: m.name, seconds: (Date.now() - sentAt) / 1000 });
          return inTime;
        }),
      );
      results.forEach((inTime, i) => {
        if (!inTime) this.wedged.push(`${batch[i]!.name} (no exit ${deadlineMs / 1000} s after SIGTERM)`);
      });
    }
  }
}
