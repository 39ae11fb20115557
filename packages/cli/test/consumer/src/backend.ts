// An application's backend of the consumer's own, on @tdp/sdk, and a page of it on @tdp/client, both as
// the READMEs show them: publishes a workflow typed by its inputSchema and its capabilities, creates a task
// from the workflow value and awaits its typed result, receives the task's signed callbacks through the
// Express handler, then opens Ada's page: her task list loaded from the real `GET /v1/me/tasks` with a user
// token, and a new task followed live until it finishes. Prints one JSON line with what it saw.
import type { AddressInfo } from 'node:net';
import { bindTaskStore, TaskStore, TdpUserClient } from '@tdp/client';
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
import { Type } from 'typebox';
import WebSocket from 'ws';
import type { greet } from './worker.js';

// The catalogue from the worker's own definitions: a field renamed there breaks this workflow's build.
declare module '@tdp/sdk' {
  interface CapabilityCatalogue extends CatalogueOf<[typeof greet]> {}
}

const baseUrl = process.env.TDP_URL ?? 'http://127.0.0.1:8080';
const tdp = createTdpClient({ baseUrl, apiKey: process.env.TDP_API_KEY ?? '' });

// The input type comes from the TypeBox inputSchema; step outputs from the catalogue.
const workflow = defineWorkflow({
  name: 'consumer-greet',
  version: '1',
  inputSchema: Type.Object({ name: Type.String({ minLength: 1 }) }),
})
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

// The same for a task of the workflow value and its result (never called: checked by tsc alone).
async function refusedByTheTypes() {
  // @ts-expect-error `nom` is not a field of the workflow's inputSchema (the same call with `name` compiles)
  await tdp.createTask(workflow, { name: 'Greet Ada', input: { nom: 'Ada' } });
  const { outputs } = await tdp.waitForResult(workflow, 'some-task', { timeoutMs: 1_000 });
  // @ts-expect-error `nope` is not an output of consumer.greet
  return outputs.greet?.nope;
}
void refusedByTheTypes;

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

// Ada's task, from the workflow value (its name and version; `input` checked), awaited with its outputs.
const created = await tdp.createTask(workflow, {
  name: 'Greet Ada',
  input: { name: 'Ada' },
  ownerId: 'ada',
  callbackUrl,
});
const { task, outputs } = await tdp.waitForResult(workflow, created, { timeoutMs: 60_000 });
// Typed by consumer.greet's output: no cast.
const greeting: string | undefined = outputs.greet?.greeting;
const length: number | undefined = outputs.greet?.length;
await callbackFinished;

// Ada's page, wired as @tdp/client's README shows it (in Node, as her browser would): a user token and
// realtime tokens minted by this backend, her task list loaded from `GET /v1/me/tasks` as it comes.
const { token } = await tdp.createUserToken({ userId: 'ada' });
const user = new TdpUserClient({ baseUrl, token });
const connection = await tdp.createConnectionToken('ada');
const centrifuge = new Centrifuge(connection.url, { token: connection.token, websocket: WebSocket });
const store = new TaskStore();
const live = bindTaskStore({
  centrifuge,
  store,
  loadTasks: async () => (await user.myTasks()).items,
  detailToken: (taskId, clientId) => tdp.createSubscriptionToken({ userId: 'ada', taskId, clientId }),
});
const whenStore = (done: () => boolean) =>
  new Promise<void>((resolve) => {
    const check = () => done() && resolve();
    store.subscribe(check);
    check();
  });
centrifuge.connect();
// LIVE once the snapshot is in: Ada's task ended before the page opened, so only the list can show it.
await whenStore(() => store.connection === 'LIVE');
const listedAfterLoad = store
  .myTasks()
  .map((t) => ({ taskId: t.taskId, lifecycleStatus: t.lifecycleStatus }));

// A task created while the page is open, followed live until it finishes.
const followed = await tdp.createTask(workflow, {
  name: 'Greet Grace',
  input: { name: 'Grace' },
  ownerId: 'ada',
});
await live.follow(followed.task.id);
const isOver = (status: string | undefined) => status === 'SUCCEEDED' || status === 'FAILED';
await whenStore(() => isOver(store.detail(followed.task.id)?.state.lifecycleStatus));
const liveStatus = store.detail(followed.task.id)?.state.lifecycleStatus;

const last = callbacks.at(-1)!;
process.stdout.write(
  `${JSON.stringify({
    taskId: task.id,
    status: task.lifecycleStatus,
    output: outputs.greet,
    greeting,
    length,
    callbackOutput: (last.data.outputs as Record<string, unknown> | null)?.greet,
    listedAfterLoad,
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
