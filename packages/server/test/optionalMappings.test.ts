/**
 * Optional and defaulted input mappings on a real server, real PostgreSQL and a real (test) worker: a
 * required mapping of an input the schema does not require is refused at publish, naming the step, the
 * field and the path; marked optional, the key is left out of the step's input; with a default, the step
 * gets the default; a required input mapped plainly still works; and where nothing was checked (no
 * inputSchema) a missing value fails the step with a message for people, the path kept for developers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { completeWith, type StartCommand, startTestWorker } from '../../../test/testWorker.ts';
import { connectDatabase } from '../src/main.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let sql: ReturnType<typeof connectDatabase>;
let worker: Awaited<ReturnType<typeof startTestWorker>>;
/** The input each task's `render` step was started with. */
const inputs = new Map<string, Record<string, unknown>>();

const inputSchema = {
  type: 'object',
  required: ['title'],
  properties: { title: { type: 'string' }, note: { type: 'string' }, size: { type: 'integer' } },
};

const workflow = (name: string, mapping: Record<string, unknown>, schema: unknown = inputSchema) => ({
  name,
  version: '1',
  inputSchema: schema,
  steps: [{ key: 'render', capability: 'mapping.render', capabilityVersion: '1', inputMapping: mapping }],
});

const publish = (body: unknown) => h.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body });
const submit = (workflowName: string, input: Record<string, unknown>) =>
  h.request('POST', '/v1/tasks', {
    token: app.apiKey,
    headers: { 'idempotency-key': `${workflowName}-${Math.random()}` },
    body: { workflowName, workflowVersion: '1', name: workflowName, input, ownerId: 'mapping-owner' },
  });
const status = async (taskId: string) =>
  (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body;
const endOf = (taskId: string, lifecycle: string) =>
  expect.poll(async () => (await status(taskId)).task.lifecycleStatus, { timeout: 20_000 }).toBe(lifecycle);

/** Publishes `mapping`, runs a task with `input` to success and returns the step's input. */
async function stepInput(name: string, mapping: Record<string, unknown>, input: Record<string, unknown>) {
  expect((await publish(workflow(name, mapping))).status).toBe(201);
  const created = await submit(name, input);
  expect(created.status).toBe(201);
  const taskId = created.body.task.id as string;
  await endOf(taskId, 'SUCCEEDED');
  return inputs.get(taskId);
}

beforeAll(async () => {
  h = await startHarness({ runLoops: true });
  app = await h.createApplication();
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 2 });
  const workerKey = (
    await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
  ).body.key;
  worker = await startTestWorker({
    baseUrl: h.url,
    workerKey,
    nodeId: 'node-mappings',
    capabilities: [{ name: 'mapping.render', version: '1' }],
    handler: async (command: StartCommand, report) => {
      inputs.set(command.taskId, command.input);
      await completeWith({ ok: true })(command, report);
    },
  });
});
afterAll(async () => {
  await worker?.stop();
  await sql?.end();
  await h?.close();
});

describe('optional and defaulted mappings', () => {
  it('refuses at publish a plain mapping of an input the schema does not require, naming step, field and path', async () => {
    const refused = await publish(
      workflow('mapping-refused', { title: '$.input.title', text: '$.input.note' }),
    );
    expect(refused.status).toBe(422);
    expect(refused.headers.get('content-type')).toContain('application/problem+json');
    expect(refused.body.code).toBe('INPUT_MAPPING_NOT_GUARANTEED');
    expect(refused.body.errors).toEqual([
      { path: '/steps/0/inputMapping/text', message: expect.stringContaining('$.input.note') },
    ]);
    expect(refused.body.errors[0].message).toContain('step "render" maps "text"');
    expect(refused.body.errors[0].message).toContain('optional');
    // Nothing was published.
    const read = await h.request('GET', '/v1/workflow-definitions/mapping-refused/versions/1', {
      token: app.apiKey,
    });
    expect(read.status).toBe(404);
  });

  it('refuses a malformed entry as an invalid definition', async () => {
    const bad = await publish(
      workflow('mapping-malformed', { text: { from: '$.input.note', optional: true, default: 'x' } }),
    );
    expect(bad.status).toBe(422);
    expect(bad.body.code).toBe('WORKFLOW_DEFINITION_INVALID');
    expect(bad.body.errors[0].path).toBe('/steps/0/inputMapping/text');
  });

  it('leaves an optional value out of the step input when the task has none', async () => {
    const mapping = { title: '$.input.title', text: { from: '$.input.note', optional: true } };
    expect(await stepInput('mapping-optional', mapping, { title: 'Hello' })).toEqual({ title: 'Hello' });
    const given = await submit('mapping-optional', { title: 'Hi', note: 'n' });
    await endOf(given.body.task.id, 'SUCCEEDED');
    expect(inputs.get(given.body.task.id)).toEqual({ title: 'Hi', text: 'n' });
  });

  it('gives the step the default when the task has no value', async () => {
    const mapping = { title: '$.input.title', size: { from: '$.input.size', default: 3 } };
    expect(await stepInput('mapping-default', mapping, { title: 'Hello' })).toEqual({
      title: 'Hello',
      size: 3,
    });
  });

  it('still maps a required input plainly', async () => {
    expect(await stepInput('mapping-required', { title: '$.input.title' }, { title: 'Hello' })).toEqual({
      title: 'Hello',
    });
  });

  it('without an inputSchema, a missing value fails the step with a message for people; the path is kept for developers', async () => {
    expect((await publish(workflow('mapping-unchecked', { text: '$.input.note' }, {}))).status).toBe(201);
    const taskId = (await submit('mapping-unchecked', {})).body.task.id as string;
    await endOf(taskId, 'FAILED');
    const step = (await status(taskId)).execution.steps[0];
    expect(step.error.code).toBe('INPUT_MAPPING_MISSING');
    expect(step.error.userMessage).not.toContain('$.');
    expect(JSON.stringify(await status(taskId))).not.toContain('$.input.note');
    const [stored] = await sql`SELECT error FROM step WHERE task_id = ${taskId}`;
    expect(stored!.error.detail).toContain('$.input.note');
    expect(stored!.error.detail).toContain('"text"');
  });
});
