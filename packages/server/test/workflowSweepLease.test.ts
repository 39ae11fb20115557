/**
 * The Temporal engine's sweep with several replicas (adapters/temporal/workflowSweep.ts, migration 031):
 * one replica sweeps per interval, holding the lease; its next round goes on at once; another replica
 * takes over once the lease lapsed, from where the walk stopped; a failed start keeps the walk there.
 * The executions are real `temporal` ones (created while no Temporal answers); the driver records.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { onTemporal } from '../../../test/temporal.ts';
import { freePort } from '../../cli/src/embeddedPostgres.ts';
import { WorkflowSweep } from '../src/adapters/temporal/workflowSweep.ts';
import { prepare, step, submit } from './engineRuns.ts';

let h: Harness;
const executions: string[] = [];

beforeAll(async () => {
  h = await startHarness({ runLoops: false, ...onTemporal(`127.0.0.1:${await freePort()}`) });
  await prepare(h, [{ name: 'one', version: '1', steps: [step('only')] }]);
  for (let i = 0; i < 3; i += 1) {
    const created = await submit(h, 'one');
    expect(created.status).toBe(201);
    expect(created.body.execution.orchestration.engine).toBe('temporal');
    executions.push(created.body.execution.id);
  }
  executions.sort();
});
afterAll(async () => {
  await h?.close();
});

function replica(fails: (executionId: string) => boolean = () => false) {
  const started: string[] = [];
  const sweep = new WorkflowSweep({
    sql: h.server.sql,
    driver: {
      start: async ({ executionId }) => {
        if (fails(executionId)) throw new Error('Temporal unreachable');
        started.push(executionId);
      },
    },
    now: () => h.clock.now(),
    idleMs: 0,
    leaseMs: 60_000,
    batch: 2,
  });
  return { sweep, started };
}

it('one replica sweeps per interval; after the lease lapses another goes on from where the walk stopped', async () => {
  const a = replica();
  const b = replica((id) => id === executions[1]);
  expect(await a.sweep.round()).toEqual({ full: true });
  expect(a.started).toEqual(executions.slice(0, 2));
  // A holds the lease: B's round does nothing; A's next round goes on at once, to the end of the walk.
  expect(await b.sweep.round()).toEqual({ full: false });
  expect(b.started).toEqual([]);
  expect(await a.sweep.round()).toEqual({ full: false });
  expect(a.started).toEqual(executions);

  // The lease lapses: B takes it and walks from the start; a start that fails keeps the walk there.
  h.clock.advance(60_001);
  await expect(b.sweep.round()).rejects.toThrow('Temporal unreachable');
  expect(b.started).toEqual(executions.slice(0, 1));
  // B still holds the lease, and A waits; B's next round starts with the one that failed.
  expect(await a.sweep.round()).toEqual({ full: false });
  expect(a.started).toEqual(executions);
  const c = replica();
  h.clock.advance(60_001);
  expect(await c.sweep.round()).toEqual({ full: true });
  expect(c.started).toEqual(executions.slice(1, 3));
});
