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
 * - 401/403: the session is over (its leases are gone), or the key is refused; registering again tells
 *   which. A session over: running attempts are aborted and the worker has a new session. A refused key
 *   (keyRefusal.ts): nothing is dropped and nothing stops — attempts go on, results wait in the outbox,
 *   the worker reports KEY_REFUSED and tries again every `keyRetryMs` (at once after `setWorkerKey`),
 *   resuming its session if the server still holds it. Only at the start does a refused key stop it;
 * - a local database error: fatal. The runtime stops and `done` rejects; it is never taken for "offline".
 */
import { defaultWorkerConcurrency } from '@tdp/protocol';
import { RejectedError, UnavailableError } from './client.ts';
import { CommandIntake } from './commandIntake.ts';
import { Executor } from './executor.ts';
import { drain, Heartbeats } from './heartbeats.ts';
import { defaultKeyRetryMs, KeyRefusal } from './keyRefusal.ts';
import { backoffMs, Lifecycle } from './loops.ts';
import { type Logger, silentLogger, type WorkerOptions, workRootOf } from './options.ts';
import { privateDirectory } from './privateFiles.ts';
import { Sender } from './sender.ts';
import { Session } from './session.ts';
import { type Transfers, workerTransfers } from './transfer.ts';

export { backoffMs } from './loops.ts';
export type { Logger, WorkerOptions } from './options.ts';
export { ProgressThrottle } from './progress.ts';

export interface WorkerStatus {
  workerId: string | null;
  /**
   * READY takes work; DRAINING finishes what it has; KEY_REFUSED waits for a worker key TDP accepts
   * (keeping every result); STOPPED and FAILED (a local error) are over.
   */
  state: 'STARTING' | 'READY' | 'DRAINING' | 'KEY_REFUSED' | 'STOPPED' | 'FAILED';
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
  private readonly key: KeyRefusal;
  /** The connections downloads and uploads use, under the egress policy (transfer.ts). */
  private readonly transfers: Transfers;
  /** The one attempt under way to get a session back after a 401/403 (every loop that saw it waits on it). */
  private regaining: Promise<void> | null = null;
  /** Settles when the runtime has stopped: rejects if it stopped because of a fatal error. */
  readonly done: Promise<void>;

  constructor(private readonly options: WorkerOptions) {
    this.logger = options.logger ?? silentLogger;
    this.done = this.lifecycle.done;
    const maxConcurrency = options.maxConcurrency ?? defaultMaxConcurrency;
    this.session = new Session(options, this.logger, maxConcurrency);
    this.key = new KeyRefusal(this.logger);
    const shared = { options, logger: this.logger, lifecycle: this.lifecycle, session: this.session };
    const sessionLost = (reason: string) => this.sessionLost(reason);
    this.sender = new Sender({
      ...shared,
      leaseLost: (attemptId) => this.executor.abort(attemptId, 'LEASE_LOST'),
      sessionLost,
    });
    this.transfers = workerTransfers(options, options.client.servers);
    this.executor = new Executor({
      ...shared,
      transfers: this.transfers,
      maxConcurrency,
      wakeSender: () => this.sender.wake(),
      stop: () => this.stop(),
    });
    this.intake = new CommandIntake({
      ...shared,
      executor: this.executor,
      sessionLost,
      drain: () => this.drain(),
    });
    this.heartbeats = new Heartbeats({
      ...shared,
      executor: this.executor,
      sessionLost,
      keyRefused: () => this.key.refused,
    });
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
          : this.key.refused
            ? 'KEY_REFUSED'
            : this.session.runtimeState;
    return { workerId: this.session.workerId, state, running: this.executor.runningCount };
  }

  /**
   * The worker key from now on (one TDP refused replaced, or rotated): tried at once. A session belongs
   * to the key that registered it, so under a new key the worker registers a new session; the results of
   * the old one stay in the outbox until a key that owns them works (they are never marked sent).
   */
  setWorkerKey(workerKey: string): void {
    this.options.client.setKey(workerKey);
    this.options.reporting?.setKey?.(workerKey);
    this.sender.retryParked();
    this.key.keyChanged.wake();
  }

  /** Registers (or takes back its session after a restart) and starts every loop. */
  async start(): Promise<void> {
    // The folder of all attempts' files is this user's alone (0700), whatever made it before.
    privateDirectory(workRootOf(this.options));
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
    // Every attempt was aborted above, so no transfer is left to wait for.
    await this.transfers.egress.agent.destroy().catch(() => {});
  }

  /** A 401/403: once at a time, whichever loop saw it first (the others wait for the same outcome). */
  private sessionLost(reason: string): Promise<void> {
    this.regaining ??= this.regainSession(reason).finally(() => {
      this.regaining = null;
    });
    return this.regaining;
  }

  /**
   * Registering tells a session that is over from a key that is refused. Over: its attempts are lost and
   * the new session goes on. Refused: nothing is aborted (the server may still hold the session and its
   * leases); the worker tries again until a key works, and then keeps its session if the server still
   * holds it.
   */
  private async regainSession(reason: string): Promise<void> {
    const retryMs = this.options.keyRetryMs ?? defaultKeyRetryMs;
    for (let failures = 1; !this.lifecycle.stopped; failures += 1) {
      try {
        if (this.key.refused && (await this.session.stillHeld())) break;
        const ended = this.session.workerId;
        await this.session.register();
        this.logger.warn({ workerId: ended, reason }, 'worker session ended by the server; registered again');
        this.executor.abortAll('LEASE_LOST');
        this.executor.loseWaiting();
        this.intake.abortStream();
        break;
      } catch (error) {
        if (error instanceof RejectedError) this.key.refuse(error);
        else if (!(error instanceof UnavailableError)) throw error;
        await this.lifecycle.sleep(Math.min(backoffMs(failures), retryMs), this.key.keyChanged);
      }
    }
    if (this.key.refused && !this.lifecycle.stopped) {
      this.key.accepted();
      this.sender.retryParked();
    }
    this.sender.wake();
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
