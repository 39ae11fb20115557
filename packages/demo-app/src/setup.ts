/**
 * Connecting the demo app to a TDP: its own application (key and callback secret), its resource
 * provider, and the two workflows its orders run. `tdp dev` does this with the admin token.
 */
import { randomBytes } from 'node:crypto';
import { demoWorkflows } from './main.ts';
import { approveFirstSuffix } from './sender.ts';

export interface DemoCredentials {
  applicationId: string;
  apiKey: string;
  callbackSecret: string;
  providerToken: string;
  /** Signs the demo's visitor cookies (base64url); made here, kept with the rest. */
  visitorKey?: string;
}

async function call(url: string, token: string, method: string, body?: unknown) {
  const response = await fetch(url, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await response.text();
  return { status: response.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

/** The demo's application, reusing remembered credentials while TDP still accepts them. */
export async function ensureDemoApplication(
  tdpUrl: string,
  adminToken: string,
  tenantId: string,
  remembered: DemoCredentials | null,
): Promise<DemoCredentials> {
  let credentials = remembered;
  if (credentials) {
    const check = await call(`${tdpUrl}/v1/workflow-definitions?limit=1`, credentials.apiKey, 'GET');
    if (check.status !== 200) credentials = null;
  }
  if (!credentials) {
    const created = await call(`${tdpUrl}/admin/v1/tenants/${tenantId}/applications`, adminToken, 'POST', {
      name: `demo-app-${randomBytes(3).toString('hex')}`,
    });
    if (created.status !== 201) throw new Error(`could not create the demo application: ${created.status}`);
    credentials = {
      applicationId: (created.body.application as { id: string }).id,
      apiKey: (created.body.apiKey as { key: string }).key,
      callbackSecret: created.body.callbackSecret as string,
      providerToken: randomBytes(24).toString('base64url'),
    };
  }
  // Credentials remembered before visitors' cookies were signed get their key now.
  credentials.visitorKey ??= randomBytes(32).toString('base64url');
  for (const definition of workflowDefinitions()) {
    const published = await call(`${tdpUrl}/v1/workflow-definitions`, credentials.apiKey, 'POST', definition);
    if (published.status !== 200 && published.status !== 201)
      throw new Error(
        `could not publish ${definition.name}: ${published.status} ${JSON.stringify(published.body)}`,
      );
  }
  return credentials;
}

/** Points TDP at the running demo app's resource-provider endpoint. */
export async function registerDemoProvider(
  tdpUrl: string,
  adminToken: string,
  credentials: DemoCredentials,
  demoUrl: string,
): Promise<void> {
  const answer = await call(
    `${tdpUrl}/admin/v1/applications/${credentials.applicationId}/resource-provider`,
    adminToken,
    'PUT',
    { url: `${demoUrl}/tdp/grants`, bearerToken: credentials.providerToken },
  );
  if (answer.status >= 300)
    throw new Error(`could not register the demo resource provider: ${answer.status}`);
}

export function workflowDefinitions() {
  const retry = { maxAttempts: 3, initialBackoffMs: 1_000, maxBackoffMs: 10_000, multiplier: 2 };
  const clean = {
    key: 'clean',
    capability: 'archive.clean',
    capabilityVersion: '1',
    inputMapping: { source: '$.input.source' },
    // A worker that loses TDP or the store for a while gets two more tries; a damaged ZIP gets none.
    failurePolicy: 'RETRY_THEN_FAIL_TASK',
    retry,
  };
  const watermark = {
    key: 'watermark',
    capability: 'image.watermark',
    capabilityVersion: '1',
    dependsOn: ['clean'],
    inputMapping: { source: '$.steps.clean.output.archive', text: '$.input.text' },
    failurePolicy: 'RETRY_THEN_FAIL_TASK',
    retry,
  };
  /** After processing, the order's owner approves or rejects the result before the app publishes it. */
  const approve = (after: string) => ({
    key: 'approve',
    kind: 'approval',
    dependsOn: [after],
    approval: { approvers: { owner: true }, required: 1 },
  });
  const { cleanOnly, cleanThenWatermark, version } = demoWorkflows;
  return [
    { name: cleanOnly, version, steps: [clean] },
    { name: cleanThenWatermark, version, steps: [clean, watermark] },
    { name: `${cleanOnly}${approveFirstSuffix}`, version, steps: [clean, approve('clean')] },
    {
      name: `${cleanThenWatermark}${approveFirstSuffix}`,
      version,
      steps: [clean, watermark, approve('watermark')],
    },
  ];
}
