/**
 * Once per test run: the dashboard's pages built, and a real PostgreSQL (embedded unless DATABASE_URL
 * points at one) with a migrated template database. Each test file clones the template into a database of its own (see database.ts).
 */
import { build } from 'vite';
import type { TestProject } from 'vitest/node';
import { startTemporaryPostgres } from '../packages/cli/src/embeddedPostgres.ts';
import { connectDatabase, migrate } from '../packages/server/src/main.ts';

export const templateDatabase = 'tdp_test_template';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseAdminUrl: string;
    templateDatabase: string;
  }
}

export default async function setup(project: TestProject) {
  // The server serves the dashboard's built pages; page tests need them current.
  await build({
    configFile: new URL('../packages/dashboard/vite.config.ts', import.meta.url).pathname,
    logLevel: 'warn',
  });
  let adminUrl = process.env.DATABASE_URL;
  let teardown = async () => {};
  if (!adminUrl) {
    const postgres = await startTemporaryPostgres();
    adminUrl = postgres.adminUrl;
    teardown = () => postgres.stop();
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
