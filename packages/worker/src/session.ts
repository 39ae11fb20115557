/**
 * The worker's server session: registering, taking the session back after a restart (if the server has
 * not ended it), and the runtime state heartbeats report. The instance id and the draining flag are kept
 * in the local database, so a restarted process is the same instance and still draining.
 */
import { availableParallelism, hostname, totalmem } from 'node:os';
import { newId, type WorkerRuntimeState } from '@tdp/protocol';
import { RejectedError } from './client.ts';
import type { Logger, WorkerOptions } from './options.ts';

export class Session {
  private currentId: string | null = null;
  private intervalMs = 10_000;
  private drainingNow: boolean;
  readonly instanceId: string;

  constructor(
    private readonly options: WorkerOptions,
    private readonly logger: Logger,
    private readonly maxConcurrency: number,
  ) {
    this.instanceId = options.store.getMeta('instanceId') ?? newId();
    options.store.setMeta('instanceId', this.instanceId);
    this.drainingNow = options.store.getMeta('draining') === 'true';
  }

  get workerId(): string | null {
    return this.currentId;
  }

  get heartbeatIntervalMs(): number {
    return this.intervalMs;
  }

  get draining(): boolean {
    return this.drainingNow;
  }

  get runtimeState(): WorkerRuntimeState {
    return this.drainingNow ? 'DRAINING' : 'READY';
  }

  /** Takes back the previous session if the server still accepts its heartbeat, else registers. */
  async open(): Promise<void> {
    const previous = this.options.store.getMeta('workerId');
    if (previous) {
      try {
        await this.options.client.heartbeat(previous, this.runtimeState);
        this.currentId = previous;
        this.logger.info({ workerId: previous }, 'worker session resumed');
        return;
      } catch (error) {
        if (!(error instanceof RejectedError)) throw error;
      }
    }
    await this.register();
  }

  async register(): Promise<void> {
    const registered = await this.options.client.register({
      instanceId: this.instanceId,
      name: this.options.name ?? `worker@${hostname()}`,
      nodeId: this.options.nodeId ?? hostname(),
      // A capability's own limit only when it has one, so a server that predates them still accepts us.
      capabilities: this.options.capabilities.map((c) => ({
        name: c.name,
        version: c.version,
        ...(c.maxConcurrency !== undefined ? { maxConcurrency: c.maxConcurrency } : {}),
      })),
      ...(this.options.labels ? { labels: this.options.labels } : {}),
      resources: { cpuMillis: availableParallelism() * 1000, memoryMb: Math.floor(totalmem() / 2 ** 20) },
      maxConcurrency: this.maxConcurrency,
    });
    this.currentId = registered.workerId;
    this.intervalMs = registered.heartbeatIntervalSeconds * 1000;
    this.options.store.setMeta('workerId', registered.workerId);
    // Kept with the session: a resumed session does not register, and still reports where it did.
    this.options.store.setMeta('grpcPort', registered.grpcPort?.toString() ?? null);
    this.logger.info({ workerId: registered.workerId }, 'worker registered');
  }

  /** The gRPC reporting port the server announced at registration (docs/grpc.md); null: none. */
  get grpcPort(): number | null {
    const port = this.options.store.getMeta('grpcPort');
    return port ? Number(port) : null;
  }

  /** Whether the server still holds this session (accepts its heartbeat); false when it refuses it. */
  async stillHeld(): Promise<boolean> {
    try {
      await this.heartbeat();
      return this.currentId !== null;
    } catch (error) {
      if (error instanceof RejectedError) return false;
      throw error;
    }
  }

  async heartbeat(): Promise<void> {
    if (!this.currentId) return;
    await this.options.client.heartbeat(
      this.currentId,
      this.runtimeState,
      this.options.store.heldAttemptIds(),
    );
  }

  /** From here on nothing new is taken, also after a restart (until `drained`). */
  startDraining(): void {
    this.drainingNow = true;
    this.options.store.setMeta('draining', 'true');
  }

  drained(): void {
    this.options.store.setMeta('draining', null);
  }
}
