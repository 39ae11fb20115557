/**
 * Once per test run: a real PostgreSQL (embedded unless DATABASE_URL points at one) with a migrated
 * template database. Each test file clones the template into a database of its own (see database.ts).
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres } from '../packages/cli/src/embeddedPostgres.ts';
import { connectDatabase, migrate } from '../packages/server/src/main.ts';

export const templateDatabase = 'tdp_test_template';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseAdminUrl: string;
    templateDatabase: string;
  }
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer()
      .once('error', reject)
      .listen(0, '127.0.0.1', () => {
        const address = probe.address();
        probe.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
      });
  });
}

export default async function setup(project: TestProject) {
  let adminUrl = process.env.DATABASE_URL;
  let teardown = async () => {};
  if (!adminUrl) {
    const home = await mkdtemp(join(tmpdir(), 'tdp-test-pg-'));
    await chmod(home, 0o755);
    const postgres = await startEmbeddedPostgres({
      dataDirectory: join(home, 'postgres'),
      port: await freePort(),
    });
    adminUrl = postgres.adminUrl;
    teardown = async () => {
      await postgres.stop();
      await rm(home, { recursive: true, force: true });
    };
  }
  const admin = connectDatabase({ url: adminUrl, maxConnections: 1 });
  try {
    await admin.unsafe(`DROP DATABASE IF EXISTS ${templateDatabase} WITH (FORCE)`);
    await admin.unsafe(`CREATE DATABASE ${templateDatabase}`);
  } finally {
    await admin.end();
  }
  const template = connectDatabase({ url: withDatabase(adminUrl, templateDatabase), maxConnections: 1 });
  try {
    await migrate(template);
  } finally {
    await template.end();
  }
  project.provide('databaseAdminUrl', adminUrl);
  project.provide('templateDatabase', templateDatabase);
  return teardown;
}

export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}
