/**
 * The bridge from JetStream to Temporal (docs/temporal.md; docs/design/failure-windows.md). A durable pull
 * consumer reads the domain events of executions the Temporal engine drives — a task created or retried
 * (start the execution's workflow), a step's end or a sleep step's begin (signal it), a cancel (cancel
 * it), 32 at a time.
 * A message is acked only after Temporal accepted the call and its id was recorded in
 * `consumer_inbox`; a failed call leaves it unacked, delivered again with back-off. Events of native
 * executions are acked unrecorded.
 * Every call is safe to make twice: the workflow id is the execution id, and the workflow drops a
 * signal it already had.
 */
import { AckPolicy, connect, DeliverPolicy, type JsMsg, type NatsConnection, nanos } from 'nats';
import type { Logger } from 'pino';
import { recordConsumed } from '../outbound/postgres/consumerInbox.ts';
import type { Sql } from '../outbound/postgres/database.ts';
import type { ExecutionDriver } from './temporalEngine.ts';

export const bridgeConsumer = 'tdp-temporal-bridge';
/** Messages handled at once (and unacked at most, for JetStream). */
const inFlight = 32;
const eventTypes = new Set([
  'TASK_CREATED',
  'TASK_RETRIED',
  'STEP_COMPLETED',
  'STEP_FAILED',
  'STEP_WAITING',
  'TASK_CANCEL_REQUESTED',
]);

interface BridgedEvent {
  id: string;
  type: string;
  taskId: string;
  executionId: string;
  stepKey?: string;
  stepAttempt?: number;
  /** The fact's payload: a STEP_WAITING names what the step waits for. */
  data?: { waitingFor?: { kind?: string; until?: string } };
}

export interface BridgeOptions {
  natsUrl: string;
  stream: string;
  subjectPrefix: string;
  sql: Sql;
  driver: ExecutionDriver;
  logger: Logger;
  now: () => Date;
}

export class TemporalBridge {
  private constructor(
    private readonly connection: NatsConnection,
    private readonly done: Promise<void>,
    private readonly close: () => void,
  ) {}

  static async start(options: BridgeOptions): Promise<TemporalBridge> {
    const connection = await connect({
      servers: options.natsUrl,
      name: bridgeConsumer,
      maxReconnectAttempts: -1,
    });
    const manager = await connection.jetstreamManager();
    await manager.consumers.add(options.stream, {
      durable_name: bridgeConsumer,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      // One filter of every event (Debian's NATS 2.9 takes no list of filters); the others are acked unread.
      filter_subject: `${options.subjectPrefix}.*.*.events.>`,
      ack_wait: nanos(30_000),
      max_ack_pending: inFlight,
    });
    const consumer = await connection.jetstream().consumers.get(options.stream, bridgeConsumer);
    const messages = await consumer.consume({ max_messages: inFlight });
    // Messages are handled side by side: no order is needed between them. A step's end is signalled
    // only after the workflow decided that step, so after its start; a cancel that overtakes the start
    // finds no workflow, and the workflow, once started, reads a cancelling execution and stops.
    const handling = new Set<Promise<void>>();
    const done = (async () => {
      for await (const message of messages) {
        const handled = handleMessage(options, message).finally(() => handling.delete(handled));
        handling.add(handled);
        if (handling.size >= inFlight) await Promise.race(handling);
      }
      await Promise.all(handling);
    })();
    return new TemporalBridge(connection, done, () => messages.stop());
  }

  async stop(): Promise<void> {
    this.close();
    await this.done.catch(() => {});
    await this.connection.close();
  }
}

async function handleMessage(options: BridgeOptions, message: JsMsg): Promise<void> {
  try {
    if (!eventTypes.has(message.subject.slice(message.subject.lastIndexOf('.') + 1))) {
      message.ack();
      return;
    }
    const event = message.json<BridgedEvent>();
    // No transaction is held across the call to Temporal (it may take seconds while Temporal is slow,
    // and 32 of them would hold 32 of the pool's connections): the inbox is read first and written
    // after. Two deliveries of one event at once may both forward it; every call is safe to make twice.
    const [row] = await options.sql<{ engine: string | null; consumed: boolean }[]>`
      SELECT e.snapshot->>'engine' AS engine,
             EXISTS (SELECT 1 FROM consumer_inbox
                     WHERE consumer = ${bridgeConsumer} AND event_id = ${event.id}) AS consumed
      FROM execution e WHERE e.id = ${event.executionId}`;
    if (row?.engine === 'temporal' && !row.consumed) {
      await forward(options.driver, event);
      await recordConsumed(options.sql, bridgeConsumer, event.id, options.now());
    }
    message.ack();
  } catch (error) {
    const delayMs = Math.min(30_000, 500 * 2 ** Math.min(10, message.info.deliveryCount - 1));
    options.logger.warn(
      { err: error, subject: message.subject, deliveryCount: message.info.deliveryCount, delayMs },
      'temporal bridge: event not forwarded; delivered again later',
    );
    message.nak(delayMs);
  }
}

async function forward(driver: ExecutionDriver, event: BridgedEvent): Promise<void> {
  switch (event.type) {
    case 'TASK_CREATED':
    case 'TASK_RETRIED':
      return driver.start({ taskId: event.taskId, executionId: event.executionId });
    case 'STEP_COMPLETED':
    case 'STEP_FAILED':
      if (event.stepKey && event.stepAttempt)
        await driver.stepFinished(event.executionId, { stepKey: event.stepKey, attempt: event.stepAttempt });
      return;
    case 'STEP_WAITING': {
      // Only a sleep waits on the engine's timer; the other waits end by TDP's own facts.
      const until = event.data?.waitingFor?.kind === 'sleep' ? event.data.waitingFor.until : undefined;
      if (event.stepKey && event.stepAttempt && until)
        await driver.stepSleeping(event.executionId, {
          stepKey: event.stepKey,
          attempt: event.stepAttempt,
          until,
        });
      return;
    }
    case 'TASK_CANCEL_REQUESTED':
      return driver.cancel(event.executionId);
  }
}
