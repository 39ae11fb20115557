/**
 * Once per test run: the dashboard's pages built, and a real PostgreSQL (embedded unless DATABASE_URL
 * points at one) with a migrated template database. Each test file clones the template into a database of its own (see database.ts).
 */
import { randomBytes } from 'node:crypto';
import { build } from 'vite';
import type { TestProject } from 'vitest/node';
import { startTemporaryPostgres } from '../packages/cli/src/embeddedPostgres.ts';
import { connectDatabase, migrate } from '../packages/server/src/main.ts';
import { testDashboardDirectory } from './dashboardPages.ts';
import { unfitUserMessages } from './peopleMessages.ts';

export const templateDatabase = 'tdp_test_template';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseAdminUrl: string;
    templateDatabase: string;
    /** Every test database of this run is named with it (so the end of the run finds those left). */
    testDatabasePrefix: string;
  }
}

export default async function setup(project: TestProject) {
  // The server serves the dashboard's built pages; page tests need them current.
  await build({
    configFile: new URL('../packages/dashboard/vite.config.ts', import.meta.url).pathname,
    logLevel: 'warn',
    build: { outDir: testDashboardDirectory, emptyOutDir: true },
  });
  let adminUrl = process.env.DATABASE_URL;
  let stopPostgres = async () => {};
  if (!adminUrl) {
    const postgres = await startTemporaryPostgres();
    adminUrl = postgres.adminUrl;
    stopPostgres = () => postgres.stop();
  }
  const testDatabasePrefix = `tdp_test_${randomBytes(3).toString('hex')}_`;
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
  project.provide('testDatabasePrefix', testDatabasePrefix);
  const databaseAdminUrl = adminUrl;
  return async () => {
    try {
      await checkUndroppedDatabases(databaseAdminUrl, testDatabasePrefix);
    } finally {
      await stopPostgres();
    }
  };
}

/**
 * The messages-for-people check (test/peopleMessages.ts) over the test databases no test dropped (a
 * file that crashed, a helper that forgot): what the suite wrote there is checked too, and they go.
 */
async function checkUndroppedDatabases(adminUrl: string, prefix: string): Promise<void> {
  const admin = connectDatabase({ url: adminUrl, maxConnections: 1 });
  const problems: string[] = [];
  try {
    const left = await admin<{ name: string }[]>`
      SELECT datname AS name FROM pg_database WHERE starts_with(datname, ${prefix})`;
    for (const { name } of left) {
      const sql = connectDatabase({ url: withDatabase(adminUrl, name), maxConnections: 1 });
      const { unfit } = await unfitUserMessages(sql).finally(() => sql.end());
      problems.push(...unfit.map((problem) => `${name}: ${problem}`));
      await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    }
  } finally {
    await admin.end();
  }
  if (problems.length > 0) {
    // Vitest only prints an error thrown here; the run must fail.
    process.exitCode = 1;
    throw new Error(`messages for people that are not for people: ${problems.join('; ')}`);
  }
}

export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}
