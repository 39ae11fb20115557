// An application's backend of the consumer's own, on @tdp/sdk (and @tdp/client for live status):
// publishes a typed workflow, receives the task's signed callbacks through the Express handler, and
// follows the task on the realtime gateway until it finishes. Prints one JSON line with what it saw.
import type { AddressInfo } from 'node:net';
import { bindTaskStore, TaskStore } from '@tdp/client';
import {
  type CallbackEvent,
  type CatalogueOf,
  createTdpClient,
  defineWorkflow,
  expressCallbackHandler,
  TdpApiError,
} from '@tdp/sdk';
import { Centrifuge } from 'centrifuge';
import express from 'express';
import WebSocket from 'ws';
import type { greet } from './worker.js';

// The catalogue from the worker's own definitions: a field renamed there breaks this workflow's build.
declare module '@tdp/sdk' {
  interface CapabilityCatalogue extends CatalogueOf<[typeof greet]> {}
}

const baseUrl = process.env.TDP_URL ?? 'http://127.0.0.1:8080';
const tdp = createTdpClient({ baseUrl, apiKey: process.env.TDP_API_KEY ?? '' });

const workflow = defineWorkflow({ name: 'consumer-greet', version: '1' })
  .step('greet', {
    capability: 'consumer.greet',
    capabilityVersion: '1',
    inputMapping: { name: '$.input.name' },
  })
  .step('again', {
    capability: 'consumer.greet',
    capabilityVersion: '1',
    dependsOn: ['greet'],
    // Checked at build time: `greeting` is an output of consumer.greet (`$.steps.greet.output.nope` is not).
    inputMapping: { name: '$.steps.greet.output.greeting' },
  });
await tdp.publishWorkflowDefinition(workflow);

// What the types refuse (tsc fails here if they stop refusing it): an output consumer.greet has not.
defineWorkflow({ name: 'never-published', version: '1' })
  .step('greet', {
    capability: 'consumer.greet',
    capabilityVersion: '1',
    inputMapping: { name: '$.input.name' },
  })
  .step('again', {
    capability: 'consumer.greet',
    capabilityVersion: '1',
    dependsOn: ['greet'],
    // @ts-expect-error `nope` is not an output of consumer.greet
    inputMapping: { name: '$.steps.greet.output.nope' },
  });

// A problem answer is a typed error with its stable code.
let missingCode = '';
try {
  await tdp.getTask('00000000-0000-7000-8000-000000000000');
} catch (error) {
  if (error instanceof TdpApiError) missingCode = error.code;
}

const callbacks: CallbackEvent[] = [];
let finished!: () => void;
const callbackFinished = new Promise<void>((resolve) => {
  finished = resolve;
});
const app = express();
app.post(
  '/tdp/callback',
  expressCallbackHandler({
    secrets: [process.env.TDP_CALLBACK_SECRET ?? ''],
    onCallback: (event) => {
      callbacks.push(event);
      if (event.data.lifecycleStatus === 'SUCCEEDED') finished();
    },
  }),
);
const listener = app.listen(0, '127.0.0.1');
await new Promise((resolve) => listener.once('listening', resolve));
const callbackUrl = `http://127.0.0.1:${(listener.address() as AddressInfo).port}/tdp/callback`;

const forged = await fetch(callbackUrl, {
  method: 'POST',
  headers: { 'content-type': 'application/json', 'tdp-signature': 't=1,v1=00' },
  body: '{"eventId":"forged"}',
});

const task = await tdp.createTask({
  workflowName: 'consumer-greet',
  workflowVersion: '1',
  name: 'Greet Ada',
  input: { name: 'Ada' },
  ownerId: 'ada',
  callbackUrl,
});

// Live status as Ada's browser would see it: her channel, and the task's detail channel.
const connection = await tdp.createConnectionToken('ada');
const centrifuge = new Centrifuge(connection.url, { token: connection.token, websocket: WebSocket });
const store = new TaskStore();
const live = bindTaskStore({
  centrifuge,
  store,
  loadTasks: async () => [],
  detailToken: (taskId) => tdp.createSubscriptionToken({ userId: 'ada', taskId }),
});
const liveFinished = new Promise<string>((resolve) => {
  const check = () => {
    const status =
      store.detail(task.task.id)?.state.lifecycleStatus ?? store.summary(task.task.id)?.lifecycleStatus;
    if (status === 'SUCCEEDED' || status === 'FAILED') resolve(status);
  };
  store.subscribe(check);
  check();
});
centrifuge.connect();
await live.follow(task.task.id);

const liveStatus = await liveFinished;
await callbackFinished;
const done = await tdp.getTask(task.task.id);
const last = callbacks.at(-1)!;
process.stdout.write(
  `${JSON.stringify({
    status: done.task.lifecycleStatus,
    output: (last.data.outputs as Record<string, unknown> | null)?.greet,
    liveStatus,
    callbacksVerified: callbacks.length,
    lastCallbackStatus: last.data.lifecycleStatus,
    forgedCallbackAnswer: forged.status,
    missingCode,
  })}\n`,
);
live.close();
centrifuge.disconnect();
listener.close();
