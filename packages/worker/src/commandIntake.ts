/**
 * The command stream: kept open (reconnecting with back-off, resuming after the last command id), each
 * command stored once in the local inbox before it is acted on (the server may send one twice), and the
 * acknowledgements no event carries sent by a loop of their own.
 */

import type { WorkerCommand } from '@tdp/protocol';
import { RejectedError, UnavailableError } from './client.ts';
import type { Executor } from './executor.ts';
import { type RuntimeParts, serverRetryMs, Wakeup } from './loops.ts';

export interface CommandIntakeDeps extends RuntimeParts {
  executor: Executor;
  /** The server ended the session (401/403): attempts are lost, a new session starts. */
  sessionLost: (reason: string) => Promise<void>;
  drain: () => Promise<void>;
}

export class CommandIntake {
  private streamAbort: AbortController | null = null;
  private readonly ackWake = new Wakeup();
  /** A command's ack should not wait for the ack loop's next round (set before waking it). */
  private ackSoon = false;

  constructor(private readonly deps: CommandIntakeDeps) {}

  /** Closes the open stream (the session ended, or the runtime stops); the loop reconnects unless stopped. */
  abortStream(): void {
    this.streamAbort?.abort();
  }

  /** Lets a sleeping ack loop see that the runtime stops. */
  wakeAcks(): void {
    this.ackWake.wake();
  }

  async streamLoop(): Promise<void> {
    const { client, store } = this.deps.options;
    const { lifecycle, session } = this.deps;
    let failures = 0;
    let server = client.server;
    while (!lifecycle.stopped) {
      const workerId = session.workerId!;
      this.streamAbort = new AbortController();
      try {
        await client.streamCommands(
          workerId,
          store.lastCommandId(workerId),
          this.streamAbort.signal,
          (command) => {
            failures = 0;
            this.onCommand(workerId, command);
          },
        );
        failures = 0;
      } catch (error) {
        if (error instanceof RejectedError) {
          await this.deps.sessionLost(error.message);
          continue;
        }
        if (!(error instanceof UnavailableError)) throw error;
        failures += 1;
        this.deps.logger.warn({ err: error.message, failures }, 'command stream unavailable; reconnecting');
      }
      if (client.server !== server) {
        this.deps.logger.warn({ from: server, to: client.server }, 'moved to another TDP server');
        server = client.server;
      }
      await lifecycle.sleep(failures === 0 ? 100 : serverRetryMs(failures));
    }
  }

  private onCommand(workerId: string, command: WorkerCommand): void {
    const { executor, session } = this.deps;
    const { commandId, type, ...payload } = command;
    const fresh = this.deps.options.store.receive(workerId, { commandId, type, payload });
    if (fresh && command.type === 'START_ATTEMPT') {
      const local = this.deps.options.store.getAttempt(command.attemptId)!;
      if (session.draining) executor.handBack(local);
      else executor.admit(local, false);
      // Its first event (started, or handed back) carries the ack; one still waiting for capacity is
      // acknowledged by the ack loop's next round, well within the re-send interval.
      return;
    }
    this.ackSoon = true;
    this.ackWake.wake();
    if (!fresh) return;
    if (command.type === 'CANCEL_ATTEMPT') executor.cancel(command.attemptId);
    else if (command.type === 'DRAIN') void this.deps.drain();
  }

  /**
   * Acknowledges what the event sender did not: a round a second, or at once after a command whose
   * ack no event carries (a cancel, a drain, a command sent again).
   */
  async ackLoop(): Promise<void> {
    const { client, store } = this.deps.options;
    const { lifecycle, session } = this.deps;
    let failures = 0;
    while (!lifecycle.stopped) {
      if (!this.ackSoon) await lifecycle.sleep(1_000, this.ackWake);
      this.ackSoon = false;
      const unacked = store.unacked();
      const pending = unacked.slice(0, 500);
      if (pending.length === 0 || !session.workerId) continue;
      try {
        await client.ack(session.workerId, pending);
        store.markAcked(pending);
        failures = 0;
        if (unacked.length > pending.length) this.ackSoon = true;
      } catch (error) {
        if (!(error instanceof UnavailableError) && !(error instanceof RejectedError)) {
          // 400: a command that is not this session's (e.g. from before a re-registration).
          store.markAcked(pending);
          continue;
        }
        // Not written (the server busy, or the key refused: the runtime gets a session back meanwhile):
        // kept, and sent again.
        failures += 1;
        await lifecycle.sleep(serverRetryMs(failures));
        this.ackSoon = true;
      }
    }
  }
}
