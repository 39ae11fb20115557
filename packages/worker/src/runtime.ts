/**
 * The worker runtime (`tdp worker`): registers, keeps the command stream open, stores every command and
 * every result locally before acting on it, runs capabilities under a concurrency limit, and delivers
 * results with one sender per process. See docs/workers.md for the protocol and source document 000 §5
 * for why each local fact exists.
 *
 * Failure handling:
 * - network errors, timeouts, 429 and 5xx: retried with back-off (1 s doubling to 30 s, with jitter)
 *   while attempts keep running; results wait in the outbox with their event ids;
 * - 401/403: the session is over (its leases are gone): running attempts are aborted and the worker
 *   registers again; if the key itself is refused, the worker stops with an error;
 * - a local database error: fatal. The runtime stops and `done` rejects; it is never taken for "offline".
 */
import { mkdir, rm } from 'node:fs/promises';
import { availableParallelism, hostname, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { newId } from '@tdp/protocol';
import { Check, Errors } from 'typebox/value';
import {
  type Grant,
  RejectedError,
  RequestError,
  UnavailableError,
  type WorkerClient,
  type WorkerCommand,
} from './client.ts';
import type { EventDraft, LocalAttempt, LocalStore } from './localStore.ts';
import { type AttemptLogger, type Capability, type CapabilityContext, CapabilityError } from './sdk.ts';
import { downloadTo, uploadFrom } from './transfer.ts';

export interface Logger {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

export interface WorkerOptions {
  client: WorkerClient;
  store: LocalStore;
  capabilities: Capability[];
  name?: string;
  nodeId?: string;
  labels?: Record<string, string>;
  maxConcurrency?: number;
  /** How long SIGTERM waits for running attempts before handing them back. */
  drainGraceMs?: number;
  logger?: Logger;
  /** Progress reports per attempt are at most this frequent (unless the phase changes). */
  progressIntervalMs?: number;
  /** Where attempts keep their files (one folder each, removed when the attempt ends). */
  workDirectory?: string;
  /** How long a grant request keeps trying while TDP is unreachable (a restart) before the step fails. */
  grantRetryMs?: number;
}

const silent: Logger = { info: () => {}, warn: () => {}, error: () => {} };

/** 1 s doubling to 30 s, each wait between half and all of that (so restarted fleets spread out). */
export function backoffMs(failures: number, random: () => number = Math.random): number {
  const ceiling = Math.min(1_000 * 2 ** Math.max(0, failures - 1), 30_000);
  return ceiling / 2 + random() * (ceiling / 2);
}

/** Why an attempt's signal was aborted; STOPPED (the runtime stopped) records nothing: a restart resumes. */
type AbortReason = 'CANCELED' | 'LEASE_LOST' | 'HANDED_BACK' | 'STOPPED';

interface Running {
  local: LocalAttempt;
  controller: AbortController;
  /** When its last attempt heartbeat went out (ms). */
  lastBeatAt: number;
  done: Promise<void>;
}

export class WorkerRuntime {
  private readonly capabilities = new Map<string, Capability>();
  private readonly logger: Logger;
  private readonly running = new Map<string, Running>();
  private readonly waiting: LocalAttempt[] = [];
  private workerId: string | null = null;
  private heartbeatIntervalMs = 10_000;
  private readonly stopping = new AbortController();
  private streamAbort: AbortController | null = null;
  private draining = false;
  private fatal: Error | null = null;
  private resolveDone!: () => void;
  private rejectDone!: (error: Error) => void;
  /** Settles when the runtime has stopped: rejects if it stopped because of a fatal error. */
  readonly done: Promise<void>;
  private readonly senderWake = new Wakeup();
  private readonly ackWake = new Wakeup();
  /** A command's ack should not wait for the ack loop's next round (set before waking it). */
  private ackSoon = false;
  private readonly instanceId: string;

  constructor(private readonly options: WorkerOptions) {
    for (const capability of options.capabilities)
      this.capabilities.set(`${capability.name}@${capability.version}`, capability);
    this.logger = options.logger ?? silent;
    this.done = new Promise((resolve, reject) => {
      this.resolveDone = resolve;
      this.rejectDone = reject;
    });
    this.done.catch(() => {});
    this.instanceId = options.store.getMeta('instanceId') ?? newId();
    options.store.setMeta('instanceId', this.instanceId);
    this.draining = options.store.getMeta('draining') === 'true';
  }

  get id(): string | null {
    return this.workerId;
  }

  /** Registers (or takes back its session after a restart) and starts every loop. */
  async start(): Promise<void> {
    await this.openSession();
    this.recover();
    void this.guard('stream', () => this.streamLoop());
    void this.guard('sender', () => this.senderLoop());
    void this.guard('acks', () => this.ackLoop());
    void this.guard('heartbeats', () => this.heartbeatLoop());
    void this.guard('attempt heartbeats', () => this.attemptHeartbeatLoop());
  }

  /**
   * Drains: takes nothing new, lets running attempts finish within the grace period, hands back the
   * rest (a retryable failure, so they run elsewhere), delivers what is in the outbox, then stops.
   */
  async drain(): Promise<void> {
    this.draining = true;
    this.options.store.setMeta('draining', 'true');
    await this.sendHeartbeat().catch(() => {});
    for (const local of this.waiting.splice(0)) this.handBack(local);
    const grace = this.options.drainGraceMs ?? 30_000;
    const all = Promise.all([...this.running.values()].map((r) => r.done));
    const timer = new Promise<'late'>((resolve) => setTimeout(() => resolve('late'), grace).unref());
    if ((await Promise.race([all.then(() => 'done' as const), timer])) === 'late') {
      for (const running of this.running.values())
        running.controller.abort('HANDED_BACK' satisfies AbortReason);
      await all;
    }
    await this.flushOutbox(Math.min(grace, 10_000));
    this.options.store.setMeta('draining', null);
    await this.stop();
  }

  /** Stops every loop at once (running attempts are aborted and stay RUNNING locally, for a restart). */
  async stop(): Promise<void> {
    if (this.stopping.signal.aborted) return;
    this.stopping.abort();
    for (const running of this.running.values()) running.controller.abort('STOPPED' satisfies AbortReason);
    this.streamAbort?.abort();
    this.senderWake.wake();
    this.ackWake.wake();
    // `done` carries a fatal error; stopping itself does not fail.
    if (this.fatal) this.rejectDone(this.fatal);
    else this.resolveDone();
  }

  // --- session -------------------------------------------------------------------------------------

  private async openSession(): Promise<void> {
    const previous = this.options.store.getMeta('workerId');
    if (previous) {
      try {
        await this.options.client.heartbeat(previous, this.draining ? 'DRAINING' : 'READY');
        this.workerId = previous;
        this.logger.info({ workerId: previous }, 'worker session resumed');
        return;
      } catch (error) {
        if (!(error instanceof RejectedError)) throw error;
      }
    }
    await this.register();
  }

  private async register(): Promise<void> {
    const registered = await this.options.client.register({
      instanceId: this.instanceId,
      name: this.options.name ?? `worker@${hostname()}`,
      nodeId: this.options.nodeId ?? hostname(),
      capabilities: this.options.capabilities.map((c) => ({ name: c.name, version: c.version })),
      ...(this.options.labels ? { labels: this.options.labels } : {}),
      resources: { cpuMillis: availableParallelism() * 1000, memoryMb: Math.floor(totalmem() / 2 ** 20) },
      maxConcurrency: this.maxConcurrency,
    });
    this.workerId = registered.workerId;
    this.heartbeatIntervalMs = registered.heartbeatIntervalSeconds * 1000;
    this.options.store.setMeta('workerId', registered.workerId);
    this.logger.info({ workerId: registered.workerId }, 'worker registered');
  }

  /** The server ended this session: its attempts are lost; a new session starts. */
  private async sessionLost(reason: string): Promise<void> {
    this.logger.warn(
      { workerId: this.workerId, reason },
      'worker session ended by the server; registering again',
    );
    for (const running of this.running.values()) running.controller.abort('LEASE_LOST' satisfies AbortReason);
    for (const local of this.waiting.splice(0))
      this.options.store.record(local.attemptId, leaseLostDraft(), true);
    this.streamAbort?.abort();
    await this.register();
  }

  private get maxConcurrency(): number {
    return this.options.maxConcurrency ?? Math.max(1, availableParallelism());
  }

  // --- loops ---------------------------------------------------------------------------------------

  /** Runs a loop; a local database error (or any bug) stops the worker loudly. */
  private async guard(name: string, loop: () => Promise<void>): Promise<void> {
    try {
      await loop();
    } catch (error) {
      if (this.stopping.signal.aborted) return;
      this.fatal = error as Error;
      this.logger.error({ loop: name, err: error }, 'worker stopped: a local error is not retried');
      for (const running of this.running.values())
        running.controller.abort('HANDED_BACK' satisfies AbortReason);
      await this.stop();
    }
  }

  /** Waits `ms`, or less if the runtime stops or `wakeup` fires; leaves no listener behind either way. */
  private async sleep(ms: number, wakeup?: Wakeup): Promise<void> {
    if (this.stopping.signal.aborted) return;
    const signal = this.stopping.signal;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        forget?.();
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
      const forget = wakeup?.once(done);
    });
  }

  private async streamLoop(): Promise<void> {
    let failures = 0;
    while (!this.stopping.signal.aborted) {
      const workerId = this.workerId!;
      this.streamAbort = new AbortController();
      try {
        await this.options.client.streamCommands(
          workerId,
          this.options.store.lastCommandId(workerId),
          this.streamAbort.signal,
          (command) => {
            failures = 0;
            this.onCommand(workerId, command);
          },
        );
        failures = 0;
      } catch (error) {
        if (error instanceof RejectedError) {
          await this.sessionLost(error.message);
          continue;
        }
        if (!(error instanceof UnavailableError)) throw error;
        failures += 1;
        this.logger.warn({ err: error.message, failures }, 'command stream unavailable; reconnecting');
      }
      await this.sleep(failures === 0 ? 100 : backoffMs(failures));
    }
  }

  private onCommand(workerId: string, command: WorkerCommand): void {
    const { commandId, type, ...payload } = command;
    const fresh = this.options.store.receive(workerId, { commandId, type, payload });
    if (fresh && type === 'START_ATTEMPT') {
      const local = this.options.store.getAttempt(payload.attemptId as string)!;
      if (this.draining) this.handBack(local);
      else this.admit(local, false);
      // Its first event (started, or handed back) carries the ack; one still waiting for capacity is
      // acknowledged by the ack loop's next round, well within the re-send interval.
      return;
    }
    this.ackSoon = true;
    this.ackWake.wake();
    if (!fresh) return;
    if (type === 'CANCEL_ATTEMPT') {
      const attemptId = payload.attemptId as string;
      const running = this.running.get(attemptId);
      if (running) running.controller.abort('CANCELED' satisfies AbortReason);
      else {
        const index = this.waiting.findIndex((w) => w.attemptId === attemptId);
        if (index >= 0) this.finish(this.waiting.splice(index, 1)[0]!.attemptId, canceledDraft());
      }
    } else if (type === 'DRAIN') {
      void this.drain();
    }
  }

  /**
   * Acknowledges what the event sender did not: a round a second, or at once after a command whose
   * ack no event carries (a cancel, a drain, a command sent again).
   */
  private async ackLoop(): Promise<void> {
    let failures = 0;
    while (!this.stopping.signal.aborted) {
      if (!this.ackSoon) await this.sleep(1_000, this.ackWake);
      this.ackSoon = false;
      const unacked = this.options.store.unacked();
      const pending = unacked.slice(0, 500);
      if (pending.length === 0 || !this.workerId) continue;
      try {
        await this.options.client.ack(this.workerId, pending);
        this.options.store.markAcked(pending);
        failures = 0;
        if (unacked.length > pending.length) this.ackSoon = true;
      } catch (error) {
        if (error instanceof RejectedError) {
          // Commands of an ended session: nothing to acknowledge any more.
          this.options.store.markAcked(pending);
          continue;
        }
        if (!(error instanceof UnavailableError)) {
          // 400: a command that is not this session's (e.g. from before a re-registration).
          this.options.store.markAcked(pending);
          continue;
        }
        failures += 1;
        await this.sleep(backoffMs(failures));
        this.ackSoon = true;
      }
    }
  }

  private async senderLoop(): Promise<void> {
    let failures = 0;
    while (!this.stopping.signal.aborted) {
      const batch = this.options.store.unsent(200);
      if (batch.length === 0) {
        await this.sleep(1_000, this.senderWake);
        continue;
      }
      try {
        await this.deliver(batch);
        failures = 0;
      } catch (error) {
        if (error instanceof RejectedError) {
          // The key is refused, or the session these events belong to is not ours: they cannot be sent.
          this.logger.error({ err: error.message }, 'events refused by the server; dropping them');
          this.options.store.markSent(batch.map((e) => e.eventId));
          continue;
        }
        if (!(error instanceof UnavailableError)) throw error;
        failures += 1;
        const wait = backoffMs(failures);
        this.logger.warn(
          { err: error.message, failures, retryInMs: Math.round(wait) },
          'events not delivered; retrying',
        );
        await this.sleep(wait);
      }
    }
  }

  /** Sends one batch (grouped by the session each attempt belongs to); marks what the server answered. */
  private async deliver(batch: ReturnType<LocalStore['unsent']>): Promise<void> {
    const byWorker = new Map<string, typeof batch>();
    for (const event of batch) {
      const list = byWorker.get(event.workerId) ?? [];
      list.push(event);
      byWorker.set(event.workerId, list);
    }
    for (const [workerId, events] of byWorker) {
      // Commands received so far are acknowledged along with the current session's events.
      const acks = workerId === this.workerId ? this.options.store.unacked().slice(0, 1000) : [];
      const outcomes = await this.options.client.sendEvents(
        workerId,
        events.map((e) => e.body),
        acks,
      );
      if (acks.length > 0) this.options.store.markAcked(acks);
      for (const outcome of outcomes) {
        if (outcome.ok) continue;
        const event = events.find((e) => e.eventId === outcome.eventId);
        this.logger.warn(
          { eventId: outcome.eventId, code: outcome.code, detail: outcome.detail },
          'event refused',
        );
        if (event && (outcome.code === 'STALE_EXECUTION' || outcome.code === 'STEP_NOT_REGISTERED'))
          this.running.get(event.attemptId)?.controller.abort('LEASE_LOST' satisfies AbortReason);
      }
      // Every item got an answer: delivered (accepted, a duplicate, or refused for good).
      this.options.store.markSent(events.map((e) => e.eventId));
    }
  }

  /** Waits (up to `ms`) until the outbox is empty. */
  private async flushOutbox(ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    this.senderWake.wake();
    while (this.options.store.unsentCount() > 0 && Date.now() < deadline && !this.stopping.signal.aborted)
      await new Promise((resolve) => setTimeout(resolve, 25));
  }

  private async sendHeartbeat(): Promise<void> {
    if (!this.workerId) return;
    await this.options.client.heartbeat(this.workerId, this.draining ? 'DRAINING' : 'READY');
  }

  private async heartbeatLoop(): Promise<void> {
    while (!this.stopping.signal.aborted) {
      await this.sleep(this.heartbeatIntervalMs);
      if (this.stopping.signal.aborted) return;
      try {
        await this.sendHeartbeat();
      } catch (error) {
        if (error instanceof RejectedError) await this.sessionLost(error.message);
        else if (!(error instanceof UnavailableError)) throw error;
      }
    }
  }

  /**
   * Attempt heartbeats, batched: every second, one request for the running attempts whose interval (from
   * their START_ATTEMPT, 10 s by default) has passed. The sequence is the clock in ms, so it keeps rising
   * across a restart (the server ignores a sequence not above the last one it saw).
   */
  private async attemptHeartbeatLoop(): Promise<void> {
    while (!this.stopping.signal.aborted) {
      await this.sleep(1_000);
      const now = Date.now();
      const due = [...this.running.values()].filter(
        (r) =>
          r.local.executionToken && now - r.lastBeatAt >= (r.local.heartbeatIntervalSeconds ?? 10) * 1000,
      );
      if (due.length === 0) continue;
      for (const r of due) r.lastBeatAt = now;
      await this.options.client
        .attemptHeartbeats(due.map((r) => ({ executionToken: r.local.executionToken!, heartbeatSeq: now })))
        .catch((error) => this.logger.warn({ err: (error as Error).message }, 'attempt heartbeats not sent'));
    }
  }

  // --- attempts ------------------------------------------------------------------------------------

  /** After a restart: attempts that were running are resumed where possible, else handed back. */
  private recover(): void {
    for (const local of this.options.store.runningAttempts()) {
      const capability = this.capabilities.get(`${local.capability}@${local.capabilityVersion}`);
      if (!this.draining && local.workerId === this.workerId && capability?.resumable)
        this.admit(local, true);
      else this.handBack(local, 'WORKER_RESTARTED');
    }
    if (this.options.store.unsentCount() > 0) this.senderWake.wake();
  }

  private admit(local: LocalAttempt, resumed: boolean): void {
    if (this.running.has(local.attemptId)) return;
    if (this.running.size >= this.maxConcurrency) {
      this.waiting.push(local);
      return;
    }
    const controller = new AbortController();
    const running: Running = { local, controller, lastBeatAt: Date.now(), done: Promise.resolve() };
    this.running.set(local.attemptId, running);
    running.done = this.execute(running, resumed)
      .catch((error) => {
        // Only a local database error gets here (capability errors are results).
        if (!this.fatal) {
          this.fatal = error as Error;
          this.logger.error({ err: error }, 'worker stopped: could not record a result locally');
          void this.stop();
        }
      })
      .finally(() => {
        this.running.delete(local.attemptId);
        const next = this.waiting.shift();
        if (next && !this.draining && !this.stopping.signal.aborted) this.admit(next, false);
      });
  }

  /** A retryable failure, so the step runs again elsewhere. */
  private handBack(local: LocalAttempt, code = 'WORKER_DRAINING'): void {
    this.finish(local.attemptId, {
      eventType: 'STEP_FAILED',
      error: {
        category: 'WORKER',
        code,
        retryable: true,
        userMessage: 'the worker handed the attempt back before finishing it',
      },
    });
  }

  private finish(attemptId: string, draft: EventDraft): void {
    this.options.store.record(attemptId, draft, true);
    this.senderWake.wake();
  }

  private async execute(running: Running, resumed: boolean): Promise<void> {
    const { local, controller } = running;
    const store = this.options.store;
    const startedAt = Date.now();
    const capability = this.capabilities.get(`${local.capability}@${local.capabilityVersion}`);
    if (!capability) {
      this.finish(
        local.attemptId,
        failureDraft(
          'CAPABILITY_NOT_FOUND',
          `this worker has no ${local.capability}@${local.capabilityVersion}`,
          false,
          'INPUT',
        ),
      );
      return;
    }
    if (!Check(capability.input, local.input)) {
      const first = Errors(capability.input, local.input)[0];
      this.finish(
        local.attemptId,
        failureDraft(
          'INPUT_INVALID',
          `input ${first?.instancePath || '/'}: ${first?.message ?? 'invalid'}`,
          false,
          'INPUT',
        ),
      );
      return;
    }
    if (!resumed) {
      store.record(local.attemptId, { eventType: 'STEP_STARTED' });
      this.senderWake.wake();
    }
    const progress = new ProgressThrottle(this.options.progressIntervalMs ?? 1_000, (draft) => {
      store.record(local.attemptId, draft);
      this.senderWake.wake();
    });
    const log = attemptLogger(this.logger, local);
    const workDirectory = join(this.options.workDirectory ?? join(tmpdir(), 'tdp-worker'), local.attemptId);
    await mkdir(workDirectory, { recursive: true });
    let files = 0;
    const ctx: CapabilityContext = {
      attemptId: local.attemptId,
      taskId: local.taskId,
      stepId: local.stepId,
      attempt: local.attempt,
      progress: (percent, update) => progress.report(percent, update),
      saveCheckpoint: (data) => store.saveCheckpoint(local.attemptId, data),
      checkpoint: resumed ? local.checkpoint : null,
      signal: controller.signal,
      log,
      workDirectory,
      download: async (resourceRef) => {
        // A fixed key per resource: after a restart the same grant comes back (if still valid).
        const grant = await this.grant(local, `download:${resourceRef}`, {
          leaseVersion: local.leaseVersion,
          access: 'DOWNLOAD',
          resourceRef,
        });
        files += 1;
        const path = join(workDirectory, `input-${files}`);
        await downloadTo(grant, path, controller.signal);
        return path;
      },
      allocateOutput: async (spec) => {
        const grant = await this.grant(local, `artifact:${spec.relativePath}`, {
          leaseVersion: local.leaseVersion,
          relativePath: spec.relativePath,
          artifactType: spec.artifactType ?? 'FILE',
          mediaType: spec.mediaType,
          maxBytes: spec.maxBytes,
        });
        files += 1;
        const path = join(workDirectory, `output-${files}`);
        return {
          path,
          resourceRef: grant.resourceRef,
          upload: async () => ({
            resourceRef: grant.resourceRef,
            bytes: await uploadFrom(grant, path, spec.mediaType, controller.signal),
          }),
        };
      },
    };
    let draft: EventDraft;
    try {
      const output = await capability.run(ctx, local.input as never);
      if (controller.signal.aborted) throw new Error(String(controller.signal.reason));
      if (!Check(capability.output, output)) {
        const first = Errors(capability.output, output)[0];
        draft = failureDraft(
          'OUTPUT_INVALID',
          `output ${first?.instancePath || '/'}: ${first?.message ?? 'invalid'}`,
          false,
          'CAPABILITY',
        );
      } else {
        draft = { eventType: 'STEP_COMPLETED', output, durationMs: Date.now() - startedAt };
      }
    } catch (error) {
      if (controller.signal.reason === 'STOPPED') {
        // Its files stay: a restart may resume from them.
        progress.cancel();
        return;
      }
      draft = this.failureOf(error, controller.signal);
    }
    // The newest progress goes out before the final event.
    progress.flush();
    draft.durationMs ??= Date.now() - startedAt;
    this.finish(local.attemptId, draft);
    await rm(workDirectory, { recursive: true, force: true });
  }

  /** A grant for the attempt, asked again while TDP is unreachable (up to `grantRetryMs`). */
  private async grant(
    local: LocalAttempt,
    key: string,
    body: Parameters<WorkerClient['grant']>[2],
  ): Promise<Grant> {
    const deadline = Date.now() + (this.options.grantRetryMs ?? 60_000);
    const signal = this.running.get(local.attemptId)?.controller.signal;
    for (let failures = 1; ; failures += 1) {
      try {
        return await this.options.client.grant(local.attemptId, key, body);
      } catch (error) {
        // TDP restarting or overloaded: the same idempotency key makes asking again safe.
        if (error instanceof UnavailableError && Date.now() < deadline && !signal?.aborted) {
          await new Promise((resolve) => setTimeout(resolve, Math.min(backoffMs(failures) / 4, 5_000)));
          continue;
        }
        throw this.grantFailure(local, error);
      }
    }
  }

  /** Refusals become the step's failure; a lost lease aborts the attempt. */
  private grantFailure(local: LocalAttempt, error: unknown): CapabilityError {
    if (error instanceof UnavailableError)
      return new CapabilityError('GRANT_UNAVAILABLE', error.message, {
        retryable: true,
        category: 'RESOURCE',
      });
    if (error instanceof RequestError && error.problem?.code === 'STALE_EXECUTION') {
      this.running.get(local.attemptId)?.controller.abort('LEASE_LOST' satisfies AbortReason);
    }
    const code = error instanceof RequestError ? (error.problem?.code ?? 'GRANT_REFUSED') : 'GRANT_REFUSED';
    return new CapabilityError(code, (error as Error).message, { retryable: false, category: 'RESOURCE' });
  }

  private failureOf(error: unknown, signal: AbortSignal): EventDraft {
    const reason = signal.aborted ? (signal.reason as AbortReason) : null;
    if (reason === 'CANCELED')
      return {
        eventType: 'STEP_FAILED',
        error: { category: 'CANCELLED', code: 'CANCELED', retryable: false },
      };
    if (reason === 'LEASE_LOST') return leaseLostDraft();
    if (reason === 'HANDED_BACK')
      return failureDraft(
        'WORKER_DRAINING',
        'the worker handed the attempt back before finishing it',
        true,
        'WORKER',
      );
    if (error instanceof CapabilityError)
      return failureDraft(
        error.code,
        error.message,
        error.options.retryable ?? false,
        error.options.category ?? 'CAPABILITY',
      );
    return failureDraft('CAPABILITY_CRASHED', (error as Error)?.message ?? String(error), true, 'CAPABILITY');
  }
}

function failureDraft(code: string, message: string, retryable: boolean, category: string): EventDraft {
  return {
    eventType: 'STEP_FAILED',
    error: { category, code, retryable, userMessage: message.slice(0, 2000) },
  };
}

/** The server moved the attempt on: the event is only a record (it will be answered STALE). */
function leaseLostDraft(): EventDraft {
  return failureDraft('LEASE_LOST', 'the attempt lost its lease', true, 'WORKER');
}

function canceledDraft(): EventDraft {
  return { eventType: 'STEP_FAILED', error: { category: 'CANCELLED', code: 'CANCELED', retryable: false } };
}

function attemptLogger(logger: Logger, local: LocalAttempt): AttemptLogger {
  const bound = { attemptId: local.attemptId, taskId: local.taskId, stepId: local.stepId };
  return {
    info: (message, fields) => logger.info({ ...bound, ...fields }, message),
    warn: (message, fields) => logger.warn({ ...bound, ...fields }, message),
    error: (message, fields) => logger.error({ ...bound, ...fields }, message),
  };
}

/**
 * One progress report per interval per attempt, except that a new phase goes out at once; the newest
 * value held back is written by `flush` (before the final event) or when the interval has passed.
 */
export class ProgressThrottle {
  private lastAt = 0;
  private lastPhase: string | undefined;
  private lastPercent = -1;
  private held: EventDraft | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly intervalMs: number,
    private readonly write: (draft: EventDraft) => void,
    private readonly now: () => number = Date.now,
  ) {}

  report(percent: number, update: { phase?: string; message?: string } = {}): void {
    // Progress only rises; a lower value is ignored rather than sent to be refused.
    const value = Math.max(Math.min(100, Math.max(0, percent)), this.lastPercent);
    const draft: EventDraft = {
      eventType: 'STEP_PROGRESS',
      progress: { percent: value },
      ...(update.phase ? { phaseCode: update.phase.slice(0, 64) } : {}),
      ...(update.message ? { message: update.message.slice(0, 500) } : {}),
    };
    const phaseChanged = update.phase !== undefined && update.phase !== this.lastPhase;
    if (phaseChanged || this.now() - this.lastAt >= this.intervalMs) this.send(draft, update.phase);
    else {
      this.held = draft;
      this.timer ??= setTimeout(() => this.flush(), this.intervalMs - (this.now() - this.lastAt));
      this.timer.unref?.();
    }
  }

  /** Drops what is held back (the runtime stopped: nothing more is written). */
  cancel(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.held = null;
  }

  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.held) this.send(this.held, (this.held.phaseCode as string | undefined) ?? this.lastPhase);
  }

  private send(draft: EventDraft, phase: string | undefined): void {
    this.held = null;
    this.lastAt = this.now();
    if (phase !== undefined) this.lastPhase = phase;
    this.lastPercent = (draft.progress as { percent: number }).percent;
    this.write(draft);
  }
}

/** A one-shot wake-up for a sleeping loop. */
class Wakeup {
  private listeners = new Set<() => void>();
  /** Calls `listener` at the next wake; the returned function cancels that. */
  once(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
  wake(): void {
    const listeners = this.listeners;
    this.listeners = new Set();
    for (const listener of listeners) listener();
  }
}
