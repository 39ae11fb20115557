/**
 * A minimal HTTP worker for tests: registers, follows its SSE command stream, acknowledges commands and
 * runs a handler per START_ATTEMPT, reporting through the attempt inbox.
 */
import { newId } from '../packages/protocol/src/ids.ts';
import { sseEvents } from '../packages/worker/src/sse.ts';

export interface StartCommand {
  commandId: string;
  attemptId: string;
  leaseVersion: number;
  taskId: string;
  stepId: string;
  attempt: number;
  capability: string;
  input: Record<string, unknown>;
}

export type Handler = (
  command: StartCommand,
  report: (events: Record<string, unknown>[]) => Promise<any>,
) => Promise<void>;

export async function startTestWorker(options: {
  baseUrl: string;
  workerKey: string;
  nodeId: string;
  capabilities: { name: string; version: string }[];
  handler: Handler;
  /** Sees every command (START_ATTEMPT, CANCEL_ATTEMPT, DRAIN). */
  onCommand?: (command: StartCommand & { type: string }) => void;
  /** Attempts it runs at once at most (the server's default when absent). */
  maxConcurrency?: number;
}) {
  const headers = { authorization: `Bearer ${options.workerKey}`, 'content-type': 'application/json' };
  const registered = await fetch(`${options.baseUrl}/v1/workers/register`, {
    method: 'POST',
    headers,
    body: JSON.stringify({
      instanceId: newId(),
      name: `test-${options.nodeId}`,
      nodeId: options.nodeId,
      capabilities: options.capabilities,
      ...(options.maxConcurrency ? { maxConcurrency: options.maxConcurrency } : {}),
    }),
  });
  if (registered.status !== 201) throw new Error(`register: ${registered.status} ${await registered.text()}`);
  const { workerId } = (await registered.json()) as { workerId: string };
  const received: StartCommand[] = [];
  const seen = new Set<string>();
  let abort = new AbortController();
  let lastEventId: string | null = null;

  const report = async (events: Record<string, unknown>[]) => {
    const res = await fetch(`${options.baseUrl}/v1/workers/${workerId}/events:batch`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ events }),
    });
    return res.json();
  };

  const follow = async (signal: AbortSignal) => {
    const response = await fetch(`${options.baseUrl}/v1/workers/${workerId}/commands`, {
      headers: {
        authorization: headers.authorization,
        ...(lastEventId ? { 'last-event-id': lastEventId } : {}),
      },
      signal,
    });
    for await (const { id, data } of sseEvents(response.body!)) {
      if (!id) continue;
      lastEventId = id;
      const command = JSON.parse(data) as StartCommand & { type: string };
      if (seen.has(command.commandId)) continue;
      seen.add(command.commandId);
      await fetch(`${options.baseUrl}/v1/workers/${workerId}/commands/${command.commandId}:ack`, {
        method: 'POST',
        headers: { authorization: headers.authorization },
      });
      options.onCommand?.(command);
      if (command.type === 'START_ATTEMPT') {
        received.push(command);
        // A report that fails (the server closed as the test ended) is dropped, as a stopped worker's.
        void options.handler(command, report).catch(() => {});
      }
    }
  };
  let streaming = follow(abort.signal).catch(() => {});

  return {
    workerId,
    received,
    report,
    /** Drops the stream and reconnects with Last-Event-ID, as after a network blip. */
    reconnect: async () => {
      abort.abort();
      await streaming;
      abort = new AbortController();
      streaming = follow(abort.signal).catch(() => {});
    },
    /** One session heartbeat, e.g. after a test moved the server's clock past the session TTL. */
    heartbeat: async () => {
      await fetch(`${options.baseUrl}/v1/workers/${workerId}/heartbeat`, {
        method: 'POST',
        headers: { authorization: headers.authorization },
      });
    },
    /** Drains (no new work) and drops the command stream. */
    stop: async () => {
      await fetch(`${options.baseUrl}/v1/workers/${workerId}/heartbeat`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ runtimeState: 'DRAINING' }),
      });
      abort.abort();
    },
  };
}

/** An attempt-inbox event of `command`'s attempt (a fresh event id each call). */
export const attemptEvent = (
  command: Pick<StartCommand, 'attemptId' | 'leaseVersion'>,
  eventType: 'STEP_STARTED' | 'STEP_PROGRESS' | 'STEP_COMPLETED' | 'STEP_FAILED',
  sourceSeq: number,
  extra: Record<string, unknown> = {},
) => ({
  attemptId: command.attemptId,
  leaseVersion: command.leaseVersion,
  eventId: newId(),
  eventType,
  sourceSeq,
  ...extra,
});

export const completeWith =
  (output: unknown): Handler =>
  async (command, report) => {
    await report([
      attemptEvent(command, 'STEP_STARTED', 1),
      attemptEvent(command, 'STEP_COMPLETED', 2, { output, durationMs: 5 }),
    ]);
  };

export const failWith =
  (error: { category: string; code: string; retryable: boolean }): Handler =>
  async (command, report) => {
    await report([attemptEvent(command, 'STEP_FAILED', 1, { error })]);
  };

/** A flaky dependency: the first attempt fails retryably (an upstream timeout), every later one completes. */
export const failFirstThenComplete =
  (output: unknown, onCall: () => void = () => {}): Handler =>
  async (command, report) => {
    onCall();
    const run =
      command.attempt === 1
        ? failWith({ category: 'DEPENDENCY', code: 'UPSTREAM_TIMEOUT', retryable: true })
        : completeWith(output);
    await run(command, report);
  };
