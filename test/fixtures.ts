/** Shared fixtures for tests and benchmarks. */

/** The demo workflow: clean a ZIP, then watermark its images. */
export function zipWorkflow(name = 'zip-clean-watermark', version = '1') {
  return {
    name,
    version,
    inputSchema: {
      type: 'object',
      required: ['sourceZip'],
      properties: {
        sourceZip: { type: 'string', minLength: 1 },
        watermarkText: { type: 'string', maxLength: 100 },
      },
      additionalProperties: false,
    },
    steps: [
      {
        key: 'clean',
        capability: 'archive.clean',
        capabilityVersion: '1',
        inputMapping: { source: '$.input.sourceZip' },
      },
      {
        key: 'watermark',
        capability: 'image.watermark',
        capabilityVersion: '2',
        dependsOn: ['clean'],
        // watermarkText is optional in the schema, so the mapping says what to use without it.
        inputMapping: {
          archive: '$.steps.clean.output.archive',
          text: { from: '$.input.watermarkText', default: 'TDP' },
        },
      },
    ],
  };
}

/**
 * A one-step workflow `live` whose capability no worker offers, so its tasks stay where they are while a
 * realtime test watches them; and a `createTask(ownerId)` for it.
 */
export async function publishLiveWorkflow(
  h: { request(method: string, path: string, options?: object): Promise<{ body: any }> },
  apiKey: string,
  newKey: () => string,
): Promise<(ownerId: string) => Promise<string>> {
  await h.request('POST', '/v1/workflow-definitions', {
    token: apiKey,
    body: {
      name: 'live',
      version: '1',
      steps: [{ key: 'only', capability: 'nobody.live', capabilityVersion: '1' }],
    },
  });
  return async (ownerId: string) =>
    (
      await h.request('POST', '/v1/tasks', {
        token: apiKey,
        headers: { 'idempotency-key': newKey() },
        body: { workflowName: 'live', workflowVersion: '1', name: 'live task', ownerId },
      })
    ).body.task.id as string;
}
