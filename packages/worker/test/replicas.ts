/**
 * Requests to `tdp server` processes in the tests that run several replicas (failover.test.ts and the
 * PostgreSQL drills): a JSON call with a token, and a tenant with an application, a worker key and the
 * `echo-wf` workflow (one `test.echo` step) to run.
 */
import { newId } from '@tdp/protocol';
import type { TdpProcess } from '../../../test/tdpProcess.ts';

export interface Reply {
  status: number;
  replayed: boolean;
  body: any;
}

/** A request to `server` with `token`; a body goes as JSON with `key` (or a new one) as its idempotency key. */
export async function call(
  server: TdpProcess,
  method: string,
  path: string,
  token: string,
  body?: unknown,
  key?: string,
): Promise<Reply> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined
        ? {}
        : { 'content-type': 'application/json', 'idempotency-key': key ?? newId() }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(20_000),
  });
  const text = await response.text();
  return {
    status: response.status,
    replayed: response.headers.get('idempotent-replayed') === 'true',
    body: text ? JSON.parse(text) : null,
  };
}

/** A tenant `name` with an application, a worker key and `echo-wf` retried as `retry` says. */
export async function provisionEchoApplication(
  server: TdpProcess,
  adminToken: string,
  name: string,
  retry: { maxAttempts: number; initialBackoffMs: number; maxBackoffMs: number; multiplier: number },
): Promise<{ apiKey: string; workerKey: string }> {
  const tenant = await call(server, 'POST', '/admin/v1/tenants', adminToken, { name });
  const application = await call(
    server,
    'POST',
    `/admin/v1/tenants/${tenant.body.id}/applications`,
    adminToken,
    {
      name: `${name}-app`,
    },
  );
  const apiKey = application.body.apiKey.key as string;
  const workerKey = (await call(server, 'POST', '/admin/v1/worker-credentials', adminToken, {})).body
    .key as string;
  const defined = await call(server, 'POST', '/v1/workflow-definitions', apiKey, {
    name: 'echo-wf',
    version: '1',
    steps: [
      {
        key: 'only',
        capability: 'test.echo',
        capabilityVersion: '1',
        inputMapping: { text: '$.input.text', delayMs: '$.input.delayMs' },
        retry,
      },
    ],
  });
  if (defined.status !== 201) throw new Error(`defining echo-wf answered ${defined.status}`);
  return { apiKey, workerKey };
}
