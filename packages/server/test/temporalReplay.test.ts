/**
 * Workflow versioning: every recorded history of the execution workflow (fixtures/temporal-histories,
 * kept by temporalEngine.test.ts with TDP_RECORD_TEMPORAL_HISTORIES=1) replays on today's workflow code.
 * A change that would make a running workflow decide differently from its history — a command added,
 * dropped or reordered without `patched()` — fails here, before a deploy breaks the workflows in flight.
 * No Temporal server: the replay runs in this process, from the histories alone.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { temporal } from '@temporalio/proto';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { beforeAll, describe, expect, it } from 'vitest';
import { bundleExecutionWorkflow } from '../src/adapters/temporal/temporalEngine.ts';
import { historiesDirectory } from './engineRuns.ts';

const histories = (await readdir(historiesDirectory)).filter((name) => name.endsWith('.json')).sort();
let code: string;

beforeAll(async () => {
  try {
    Runtime.install({ logger: new DefaultLogger('WARN'), shutdownSignals: [] });
  } catch {
    // Installed already in this process.
  }
  code = await bundleExecutionWorkflow();
}, 120_000);

describe('the execution workflow replays its recorded histories', () => {
  it('has histories of every path: a DAG, a retry on a timer, a sleep step, a cancel, an adoption', () => {
    expect(histories).toEqual(['adopted.json', 'cancel.json', 'diamond.json', 'retry.json', 'sleep.json']);
  });

  it.each(histories)(
    '%s replays on the current code',
    async (name) => {
      // Made into the protos' own History here: the SDK's historyFromJSON fails on this install (its copy
      // of protobufjs is not the one the protos were built with: "type must be a Type").
      const history = temporal.api.history.v1.History.fromObject(
        JSON.parse(await readFile(join(historiesDirectory, name), 'utf8')),
      );
      // Throws DeterminismViolationError when today's code issues other commands than the history has.
      await Worker.runReplayHistory({ workflowBundle: { code } }, history, name.replace(/\.json$/, ''));
    },
    60_000,
  );
});
