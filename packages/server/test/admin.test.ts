import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { connectDatabase } from '../src/main.ts';

let h: Harness;
let sql: ReturnType<typeof connectDatabase>;

beforeAll(async () => {
  h = await startHarness();
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 1 });
});
afterAll(async () => {
  await sql.end();
  await h.close();
});

describe('admin API and identity', () => {
  it('requires the admin token', async () => {
    expect((await h.request('GET', '/admin/v1/tenants')).status).toBe(401);
    expect((await h.request('GET', '/admin/v1/tenants', { token: `${h.adminToken}x` })).body.code).toBe(
      'UNAUTHENTICATED',
    );
    const app = await h.createApplication();
    // An application key is not an admin token.
    expect((await h.request('GET', '/admin/v1/tenants', { token: app.apiKey })).status).toBe(401);
  });

  it('stores API keys hashed and secrets encrypted, never in plaintext', async () => {
    const tenant = await h.request('POST', '/admin/v1/tenants', {
      token: h.adminToken,
      body: { name: 'acme-secrets' },
    });
    const created = await h.request('POST', `/admin/v1/tenants/${tenant.body.id}/applications`, {
      token: h.adminToken,
      body: {
        name: 'shop',
        resourceProvider: { url: 'https://shop.example/tdp/resources', bearerToken: 'rp-token-123456' },
      },
    });
    expect(created.status).toBe(201);
    const { apiKey, callbackSecret, application } = created.body;
    expect(apiKey.key).toMatch(/^tdp_/);
    expect(callbackSecret).toMatch(/^whsec_/);
    expect(application).toMatchObject({
      resourceProviderUrl: 'https://shop.example/tdp/resources',
      hasResourceProviderToken: true,
    });

    const dump = JSON.stringify(
      await sql`SELECT a.*, k.secret_hash::text AS hash FROM application a JOIN api_key k ON k.application_id = a.id WHERE a.id = ${application.id}`,
    );
    const secretPart = apiKey.key.split('_').slice(2).join('_');
    expect(dump).not.toContain(secretPart);
    expect(dump).not.toContain(callbackSecret);
    expect(dump).not.toContain('rp-token-123456');
    expect(dump).toMatch(/v1\.test1\./);

    // Reading the application never returns secrets.
    const read = await h.request('GET', `/admin/v1/applications/${application.id}`, { token: h.adminToken });
    expect(JSON.stringify(read.body)).not.toContain('whsec_');
    expect(read.body.apiKeys).toHaveLength(1);
    expect(read.body.apiKeys[0]).not.toHaveProperty('key');
  });

  it('rotates API keys with an overlap, and revokes at once', async () => {
    const app = await h.createApplication();
    const ping = (key: string) => h.request('GET', '/v1/tasks', { token: key }).then((r) => r.status);
    expect(await ping(app.apiKey)).toBe(200);

    const rotated = await h.request('POST', `/admin/v1/applications/${app.applicationId}/api-keys`, {
      token: h.adminToken,
      body: { overlapSeconds: 3600, label: 'second' },
    });
    expect(rotated.status).toBe(201);
    const newKey = rotated.body.apiKey.key;
    expect(await ping(newKey)).toBe(200);
    expect(await ping(app.apiKey)).toBe(200);

    h.clock.advance(3601 * 1000);
    expect(await ping(newKey)).toBe(200);
    expect(await ping(app.apiKey)).toBe(401);

    const revoke = await h.request(
      'DELETE',
      `/admin/v1/applications/${app.applicationId}/api-keys/${rotated.body.apiKey.id}`,
      {
        token: h.adminToken,
      },
    );
    expect(revoke.status).toBe(204);
    expect(await ping(newKey)).toBe(401);
    const missing = await h.request('DELETE', `/admin/v1/applications/${app.applicationId}/api-keys/nope`, {
      token: h.adminToken,
    });
    expect(missing.body.code).toBe('API_KEY_NOT_FOUND');
  });

  it('rotates the callback secret keeping the previous one for the overlap', async () => {
    const app = await h.createApplication();
    const rotated = await h.request('POST', `/admin/v1/applications/${app.applicationId}/callback-secret`, {
      token: h.adminToken,
      body: { overlapSeconds: 60 },
    });
    expect(rotated.status).toBe(201);
    expect(rotated.body.callbackSecret).not.toBe(app.callbackSecret);
    const read = await h.request('GET', `/admin/v1/applications/${app.applicationId}`, {
      token: h.adminToken,
    });
    expect(read.body.application.callbackSecretRotating).toBe(true);
  });

  it('validates admin input', async () => {
    const tenant = await h.request('POST', '/admin/v1/tenants', {
      token: h.adminToken,
      body: { name: 'acme-validation' },
    });
    const insecure = await h.request('POST', `/admin/v1/tenants/${tenant.body.id}/applications`, {
      token: h.adminToken,
      body: { name: 'x', resourceProvider: { url: 'http://plain.example', bearerToken: 't' } },
    });
    expect(insecure.status).toBe(400);
    expect(insecure.body.errors[0].path).toBe('/resourceProvider/url');
    const first = await h.request('POST', `/admin/v1/tenants/${tenant.body.id}/applications`, {
      token: h.adminToken,
      body: { name: 'dup' },
    });
    expect(first.status).toBe(201);
    const dup = await h.request('POST', `/admin/v1/tenants/${tenant.body.id}/applications`, {
      token: h.adminToken,
      body: { name: 'dup' },
    });
    expect(dup.body.code).toBe('APPLICATION_NAME_TAKEN');
    const noTenant = await h.request(
      'POST',
      '/admin/v1/tenants/01a22681-415a-7532-b6a9-adfdf4199183/applications',
      {
        token: h.adminToken,
        body: { name: 'x' },
      },
    );
    expect(noTenant.body.code).toBe('TENANT_NOT_FOUND');
  });
});

describe('the development identity of tdp dev', () => {
  it('creates tenant, application and key once, keeps a remembered or fixed key, and refuses a malformed one', async () => {
    const { ensureDevelopmentIdentity } = await import('../src/main.ts');
    const { generateApiKey } = await import('../src/core/identity/apiKeys.ts');
    const first = await ensureDevelopmentIdentity(h.server.identity, {});
    expect(first.apiKey).toMatch(/^tdp_/);
    expect(first.callbackSecret).toMatch(/^whsec_/);
    expect((await h.request('GET', '/v1/tasks', { token: first.apiKey })).status).toBe(200);

    const again = await ensureDevelopmentIdentity(h.server.identity, { rememberedKey: first.apiKey });
    expect(again).toMatchObject({
      tenantId: first.tenantId,
      applicationId: first.applicationId,
      apiKey: first.apiKey,
    });

    const fixed = generateApiKey().plaintext; // as TDP_DEV_API_KEY
    const withFixed = await ensureDevelopmentIdentity(h.server.identity, { fixedKey: fixed });
    expect(withFixed.apiKey).toBe(fixed);
    expect(withFixed.applicationId).toBe(first.applicationId);
    expect((await h.request('GET', '/v1/tasks', { token: fixed })).status).toBe(200);

    await expect(ensureDevelopmentIdentity(h.server.identity, { fixedKey: 'devkey' })).rejects.toThrow(
      /must look like tdp_/,
    );

    // A remembered key that was revoked is replaced; a fixed one that was revoked is an error.
    const keyId = fixed.split('_')[1]!;
    await h.request('DELETE', `/admin/v1/applications/${first.applicationId}/api-keys/${keyId}`, {
      token: h.adminToken,
    });
    const replaced = await ensureDevelopmentIdentity(h.server.identity, { rememberedKey: fixed });
    expect(replaced.apiKey).not.toBe(fixed);
    expect((await h.request('GET', '/v1/tasks', { token: replaced.apiKey })).status).toBe(200);
    await expect(ensureDevelopmentIdentity(h.server.identity, { fixedKey: fixed })).rejects.toThrow(
      /revoked/,
    );
  });
});
