import { newId } from '@tdp/protocol';
import { AckPolicy, connect, DeliverPolicy, type NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, zipWorkflow } from '../../../test/harness.ts';
import { natsUrl, requireNats } from '../../../test/nats.ts';
import { JetStreamPublisher, subjectFor } from '../src/adapters/outbound/nats/jetStreamPublisher.ts';

// Under CI a missing NATS server is a failure, not a reason to skip.
const available = await requireNats();

describe.skipIf(!available)('NATS JetStream publisher', () => {
  const suffix = newId().replaceAll('-', '').slice(-12);
  const stream = `TDP_TEST_${suffix.toUpperCase()}`;
  const prefix = `tdptest${suffix}`;
  let publisher: JetStreamPublisher;
  let nc: NatsConnection;

  beforeAll(async () => {
    nc = await connect({ servers: natsUrl });
    // A stream and subject prefix of its own, so it never overlaps a real TDP_EVENTS stream on this server.
    publisher = await JetStreamPublisher.connect({ url: natsUrl, stream, subjectPrefix: prefix });
  });
  afterAll(async () => {
    const manager = await nc.jetstreamManager();
    await manager.streams.delete(stream).catch(() => {});
    await publisher.close();
    await nc.close();
  });

  it('creates the stream when missing, publishes to the tenant/application subject, and JetStream drops a repeated event id', async () => {
    const event = {
      id: newId(),
      type: 'TASK_CREATED',
      tenantId: newId(),
      applicationId: newId(),
      occurredAt: new Date().toISOString(),
      payload: { taskId: 't-1', taskVersion: '1' },
    };
    expect(subjectFor(event, prefix)).toBe(
      `${prefix}.${event.tenantId}.${event.applicationId}.events.TASK_CREATED`,
    );
    await publisher.publish(event);
    await publisher.publish(event); // the outbox re-publishes after a crash: same id

    const manager = await nc.jetstreamManager();
    const info = await manager.streams.info(stream);
    expect(info.state.messages).toBe(1);

    await manager.consumers.add(stream, {
      durable_name: 'test',
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
    });
    const consumer = await nc.jetstream().consumers.get(stream, 'test');
    const message = await consumer.next({ expires: 5_000 });
    expect(message).not.toBeNull();
    expect(message!.subject).toBe(subjectFor(event, prefix));
    expect(message!.headers?.get('Nats-Msg-Id')).toBe(event.id);
    expect(message!.json()).toEqual(event.payload);
    message!.ack();
  });
});

describe.skipIf(!available)('a server configured with NATS_URL', () => {
  it('streams the TASK_CREATED event of a new task to JetStream', async () => {
    const prefix = `tdpsrv${newId().replaceAll('-', '').slice(-10)}`;
    const stream = `${prefix.toUpperCase()}_EVENTS`;
    const h = await startHarness({ runLoops: true, nats: { url: natsUrl, subjectPrefix: prefix } });
    const nc = await connect({ servers: natsUrl });
    try {
      const app = await h.createApplication();
      await h.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body: zipWorkflow() });
      const created = await h.request('POST', '/v1/tasks', {
        token: app.apiKey,
        headers: { 'idempotency-key': 'nats-1' },
        body: {
          workflowName: 'zip-clean-watermark',
          workflowVersion: '1',
          name: 'n',
          input: { sourceZip: 'z' },
        },
      });
      const manager = await nc.jetstreamManager();
      await manager.consumers.add(stream, {
        durable_name: 'reader',
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
      });
      const message = await (await nc.jetstream().consumers.get(stream, 'reader')).next({ expires: 10_000 });
      expect(message?.subject).toBe(`${prefix}.${app.tenantId}.${app.applicationId}.events.TASK_CREATED`);
      expect(message?.json()).toMatchObject({
        taskId: created.body.task.id,
        executionId: created.body.execution.id,
      });
      message?.ack();
      await manager.streams.delete(stream);
    } finally {
      await nc.close();
      await h.close();
    }
  });
});
