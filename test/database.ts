import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import { connectDatabase } from '../packages/server/src/main.ts';
import { withDatabase } from './globalSetup.ts';
import { danglingReferences } from './integrity.ts';
import { unfitUserMessages } from './peopleMessages.ts';

/**
 * A fresh, migrated database for one test file (a copy of the template), dropped by `drop()` — which
 * first fails if a row written per task points at nothing (the references no foreign key enforces), or
 * if a message for people stored anywhere in it is not fit for them (test/peopleMessages.ts). A database
 * never dropped is checked at the end of the run (test/globalSetup.ts).
 */
export async function createTestDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const adminUrl = inject('databaseAdminUrl');
  const name = `${inject('testDatabasePrefix')}${randomBytes(6).toString('hex')}`;
  const admin = connectDatabase({ url: adminUrl, maxConnections: 1 });
  try {
    await admin.unsafe(`CREATE DATABASE ${name} TEMPLATE ${inject('templateDatabase')}`);
  } finally {
    await admin.end();
  }
  return {
    url: withDatabase(adminUrl, name),
    drop: async () => {
      const own = connectDatabase({ url: withDatabase(adminUrl, name), maxConnections: 1 });
      const [dangling, messages] = await Promise.all([
        danglingReferences(own),
        unfitUserMessages(own),
      ]).finally(() => own.end());
      const sql = connectDatabase({ url: adminUrl, maxConnections: 1 });
      try {
        await sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await sql.end();
      }
      if (dangling.length > 0)
        throw new Error(`rows point at nothing (a write-path bug): ${dangling.join('; ')}`);
      if (messages.unfit.length > 0)
        throw new Error(`messages for people that are not for people: ${messages.unfit.join('; ')}`);
    },
  };
}
