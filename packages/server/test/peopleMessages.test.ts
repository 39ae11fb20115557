/**
 * Messages for people on the server: every stored error's userMessage is a sentence (an unfit one moves
 * to `detail`), rows stored before are shown as a sentence too, and the suite-wide check over test
 * databases (test/peopleMessages.ts) catches an unfit message wherever it is stored.
 */
import { failureSentence, newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../../../test/database.ts';
import { unfitUserMessages } from '../../../test/peopleMessages.ts';
import { noticeFor, summaryPayload } from '../src/core/facts/projections.ts';
import { sanitiseError } from '../src/core/facts/stateMachine.ts';
import { publicError } from '../src/core/facts/views.ts';
import { connectDatabase } from '../src/main.ts';

const raw =
  'POST /v1/attempts/0190a/grants answered 409: {"type":"urn:tdp:error:RESOURCE_PROVIDER_NOT_CONFIGURED"}';

describe('sanitiseError', () => {
  it('moves a raw answer to detail and stores the sentence for the code as userMessage', () => {
    expect(
      sanitiseError(
        {
          category: 'RESOURCE',
          code: 'RESOURCE_PROVIDER_NOT_CONFIGURED',
          retryable: false,
          userMessage: raw,
        },
        'STEP_FAILED',
      ),
    ).toEqual({
      category: 'RESOURCE',
      code: 'RESOURCE_PROVIDER_NOT_CONFIGURED',
      retryable: false,
      userMessage: failureSentence('RESOURCE_PROVIDER_NOT_CONFIGURED'),
      detail: raw,
    });
  });

  it("keeps a producer's sentence and its own detail, both redacted and bounded", () => {
    const error = sanitiseError(
      {
        category: 'INPUT',
        code: 'PAGE_UNREADABLE',
        retryable: false,
        userMessage: 'Page 3 could not be read.',
        detail: `pdf parser said token=abc123 ${'x'.repeat(3000)}`,
      },
      'STEP_FAILED',
    );
    expect(error.userMessage).toBe('Page 3 could not be read.');
    expect(error.detail).toMatch(/^pdf parser said \[redacted\] x+…$/);
    expect(error.detail!.length).toBeLessThanOrEqual(2000);
  });

  it('shows an error stored before the check as the sentence for its code, never its raw text or detail', () => {
    expect(
      publicError({
        category: 'RESOURCE',
        code: 'STALE_EXECUTION',
        retryable: false,
        userMessage: raw,
        detail: raw,
      }),
    ).toEqual({
      category: 'RESOURCE',
      code: 'STALE_EXECUTION',
      retryable: false,
      userMessage: failureSentence('STALE_EXECUTION'),
    });
  });
});

describe('realtime', () => {
  it('shows a stored raw message as the sentence for its code in the notice and the summary', () => {
    const at = new Date('2026-12-01T12:00:00Z');
    const failure = {
      category: 'STEP',
      code: 'STALE_EXECUTION',
      retryable: false,
      userMessage: raw,
      detail: raw,
    };
    const task = {
      id: 't1',
      version: 5n,
      name: 'Holiday photos',
      lifecycleStatus: 'FAILED',
      failure,
      health: 'HEALTHY',
      createdAt: at,
      updatedAt: at,
      startedAt: at,
      finishedAt: at,
    };
    const execution = { status: 'FAILED', progress: null };
    const after = { task, execution, steps: [] } as never;
    const before = {
      task: { ...task, lifecycleStatus: 'RUNNING', failure: null },
      execution,
      steps: [],
    } as never;
    const notice = noticeFor(before, after, { type: 'TASK_FAILED' } as never, null);
    const sentence = failureSentence('STALE_EXECUTION');
    expect(notice?.message).toBe(`Holiday photos failed: ${sentence}`);
    expect(summaryPayload(after, notice).error).toEqual({ code: 'STALE_EXECUTION', userMessage: sentence });
  });
});

describe("the suite's check of stored messages", () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let sql: ReturnType<typeof connectDatabase>;
  beforeAll(async () => {
    database = await createTestDatabase();
    sql = connectDatabase({ url: database.url, maxConnections: 1 });
  });
  afterAll(async () => {
    await sql.end();
    await database.drop();
  });

  it('finds an unfit userMessage at any depth of any JSON column, and a notice built from one', async () => {
    // A table of its own: the check reads every JSON column of every table, whatever its name.
    await sql`CREATE TABLE people_check (id text PRIMARY KEY, body jsonb NOT NULL)`;
    await sql`INSERT INTO people_check VALUES (${newId()}, ${sql.json({
      data: { failure: { code: 'X', userMessage: raw } },
      notice: { message: 'Holiday photos failed: the provider answered 503' },
    })})`;
    const { unfit } = await unfitUserMessages(sql);
    expect(unfit.sort()).toEqual([
      expect.stringMatching(/^public\.people_check\.body: a JSON body in "POST \/v1\/attempts/),
      expect.stringMatching(/^public\.people_check\.body: an HTTP status in "Holiday photos failed/),
    ]);
    // …so a test database holding it fails its drop(); clean up, or this file's own drop() would fail.
    await sql`DROP TABLE people_check`;
    expect((await unfitUserMessages(sql)).unfit).toEqual([]);
  });
});
