/**
 * A command stream whose transport fails to write reports the error and leaves no rejection behind:
 * an unhandled rejection is a process fault (the guard marks the server not ready), and a throw would
 * reach the committer that handed the commands over.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { WorkerCommandRecord } from '../src/core/facts/records.ts';
import { CommandHub, CommandStream } from '../src/core/workers/commands.ts';

const command = (id: string): WorkerCommandRecord => ({
  id,
  workerId: 'w1',
  type: 'START_ATTEMPT',
  payload: {},
  createdAt: new Date(0),
});

const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);
process.on('unhandledRejection', onUnhandled);
afterEach(() => {
  unhandled.length = 0;
});

function brokenStream(open: WorkerCommandRecord[]) {
  const hub = new CommandHub();
  const errors: unknown[] = [];
  const stream = new CommandStream(
    {
      store: { openCommands: async () => open },
      hub,
      clock: { now: () => new Date(1_000) },
      resendAfterMs: 30_000,
      pollIntervalMs: 600_000,
    },
    'w1',
    () => {
      throw new Error('socket closed');
    },
    (error) => errors.push(error),
  );
  return { hub, stream, errors };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 20));

describe('a command stream on a failing transport', () => {
  it('reports a failed write of handed-over commands, before and after its first read', async () => {
    const { hub, stream, errors } = brokenStream([]);
    stream.start();
    hub.deliver([command('c1')]); // queued behind the first read
    await settle();
    hub.deliver([command('c2')]); // written at once
    await settle();
    stream.close();
    expect(errors.map((e) => (e as Error).message)).toEqual(['socket closed', 'socket closed']);
    expect(unhandled).toEqual([]);
  });

  it('reports a failed write of the commands it read', async () => {
    const { stream, errors } = brokenStream([command('c1')]);
    stream.start();
    await settle();
    stream.close();
    expect(errors).toHaveLength(1);
    expect(unhandled).toEqual([]);
  });
});
