/**
 * The worker runtime (`tdp worker`): registers, keeps the command stream open, stores every command and
 * every result locally before acting on it, runs capabilities under a concurrency limit, and delivers
 * results with one sender per process. See docs/workers.md for the protocol and
 * docs/design/failure-windows.md for why each local fact exists. This class only composes the parts:
 *
 * - session.ts: registration, taking the session back after a restart, the runtime state;
 * - commandIntake.ts: the command stream, the local inbox (each command once) and acknowledgements;
 * - executor.ts and attempt.ts: which attempts run, and running one (progress, grants, cancellation);
 * - sender.ts: the single sender over the local outbox (localStore.ts);
 * - heartbeats.ts: session and attempt heartbeats, and the drain.
 *
 * Failure handling:
 * - network errors, timeouts and 5xx: with several server URLs the client first moves to the next
 *   replica (client.ts); when none answers (or on a 429), retried with back-off (1 s doubling to 30 s,
 *   with jitter) while attempts keep running; results wait in the outbox with their event ids;
 * - 401/403: the session is over (its leases are gone): running attempts are aborted and the worker
 *   registers again; if the key itself is refused, the worker stops with an error;
 * - a local database error: fatal. The runtime stops and `done` rejects; it is never taken for "offline".
 */
import { defaultWorkerConcurrency } from '@tdp/protocol';
import { CommandIntake } from './commandIntake.ts';
import { Executor } from './executor.ts';
import { drain, Heartbeats } from './heartbeats.ts';
import { Lifecycle } from './loops.ts';
import { type Logger, silentLogger, type WorkerOptions } from './options.ts';
import { Sender } from './sender.ts';
import { Session } from './session.ts';

export { backoffMs } from './loops.ts';
export type { Logger, WorkerOptions } from './options.ts';
export { ProgressThrottle } from './progress.ts';

export interface WorkerStatus {
  workerId: string | null;
  /** READY takes work; DRAINING finishes what it has; STOPPED and FAILED (a local error) are over. */
  state: 'STARTING' | 'READY' | 'DRAINING' | 'STOPPED' | 'FAILED';
  running: number;
}

/** Attempts run at once when the options do not say (the wire contract's default). */
export const defaultMaxConcurrency = defaultWorkerConcurrency;

export class WorkerRuntime {
  private readonly logger: Logger;
  private readonly lifecycle = new Lifecycle();
  private readonly session: Session;
  private readonly executor: Executor;
  private readonly sender: Sender;
  private readonly intake: CommandIntake;
  private readonly heartbeats: Heartbeats;
  /** Settles when the runtime has stopped: rejects if it stopped because of a fatal error. */
  readonly done: Promise<void>;

  constructor(private readonly options: WorkerOptions) {
    this.logger = options.logger ?? silentLogger;
    this.done = this.lifecycle.done;
    const maxConcurrency = options.maxConcurrency ?? defaultMaxConcurrency;
    this.session = new Session(options, this.logger, maxConcurrency);
    const shared = { options, logger: this.logger, lifecycle: this.lifecycle, session: this.session };
    this.sender = new Sender({
      ...shared,
      leaseLost: (attemptId) => this.executor.abort(attemptId, 'LEASE_LOST'),
    });
    this.executor = new Executor({
      ...shared,
      maxConcurrency,
      wakeSender: () => this.sender.wake(),
      stop: () => this.stop(),
    });
    const sessionLost = (reason: string) => this.sessionLost(reason);
    this.intake = new CommandIntake({
      ...shared,
      executor: this.executor,
      sessionLost,
      drain: () => this.drain(),
    });
    this.heartbeats = new Heartbeats({ ...shared, executor: this.executor, sessionLost });
  }

  get id(): string | null {
    return this.session.workerId;
  }

  /** The gRPC reporting port the server announced (docs/grpc.md); null: none yet, or off. */
  get grpcPort(): number | null {
    return this.session.grpcPort;
  }

  /** What a health check reports: the session, whether it takes work, and how much runs now. */
  status(): WorkerStatus {
    const state = this.lifecycle.failed
      ? 'FAILED'
      : this.lifecycle.stopped
        ? 'STOPPED'
        : this.session.workerId === null
          ? 'STARTING'
          : this.session.runtimeState;
    return { workerId: this.session.workerId, state, running: this.executor.runningCount };
  }

  /** Registers (or takes back its session after a restart) and starts every loop. */
  async start(): Promise<void> {
    await this.session.open();
    this.executor.recover();
    void this.guard('stream', () => this.intake.streamLoop());
    void this.guard('sender', () => this.sender.loop());
    void this.guard('acks', () => this.intake.ackLoop());
    void this.guard('heartbeats', () => this.heartbeats.sessionLoop());
    void this.guard('attempt heartbeats', () => this.heartbeats.attemptLoop());
  }

  /**
   * Drains: takes nothing new, lets running attempts finish within the grace period, hands back the
   * rest (a retryable failure, so they run elsewhere), delivers what is in the outbox, then stops.
   */
  async drain(): Promise<void> {
    const parts = { session: this.session, executor: this.executor, sender: this.sender };
    await drain(parts, this.options.drainGraceMs ?? 30_000);
    await this.stop();
  }

  /** Stops every loop at once (running attempts are aborted and stay RUNNING locally, for a restart). */
  async stop(): Promise<void> {
    if (!this.lifecycle.stop()) return;
    this.executor.abortAll('STOPPED');
    this.intake.abortStream();
    this.sender.wake();
    this.intake.wakeAcks();
    this.lifecycle.settle();
  }

  /** The server ended this session: its attempts are lost; a new session starts. */
  private async sessionLost(reason: string): Promise<void> {
    this.logger.warn(
      { workerId: this.session.workerId, reason },
      'worker session ended by the server; registering again',
    );
    this.executor.abortAll('LEASE_LOST');
    this.executor.loseWaiting();
    this.intake.abortStream();
    await this.session.register();
  }

  /** Runs a loop; a local database error (or any bug) stops the worker loudly. */
  private async guard(name: string, loop: () => Promise<void>): Promise<void> {
    try {
      await loop();
    } catch (error) {
      if (this.lifecycle.stopped) return;
      this.lifecycle.fail(error as Error);
      this.logger.error({ loop: name, err: error }, 'worker stopped: a local error is not retried');
      this.executor.abortAll('HANDED_BACK');
      await this.stop();
    }
  }
}
