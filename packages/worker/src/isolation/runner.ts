/**
 * A capability runner: a child process of the worker that runs one attempt at a time. It imports the
 * capability module named on its command line, says `ready`, then runs what it is sent. The context it
 * gives a capability forwards every effect to the worker (runnerMessages.ts), which owns the grants,
 * the local database and the connection to TDP.
 *
 * Nothing here catches what a capability throws outside its own promise (a timer, a socket handler):
 * such a throw ends this process, and the worker fails the attempt it was running. That is the point.
 */
import type { Capability, CapabilityContext, OutputFile } from '../sdk.ts';
import { capabilitiesOf } from './capabilityModule.ts';
import { deserializeError, serializeError } from './errors.ts';
import type { FromRunner, RunnerCalls, ToRunner } from './messages.ts';

const send = (message: FromRunner) => process.send?.(message);

const pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
const aborts = new Map<string, AbortController>();
let nextCallId = 1;

function call<M extends keyof RunnerCalls>(
  attemptId: string,
  method: M,
  ...args: RunnerCalls[M]['args']
): Promise<RunnerCalls[M]['result']> {
  const callId = nextCallId++;
  return new Promise((resolve, reject) => {
    pending.set(callId, { resolve: resolve as (value: unknown) => void, reject });
    send({ type: 'call', attemptId, callId, method, args });
  });
}

function contextFor(message: Extract<ToRunner, { type: 'run' }>, signal: AbortSignal): CapabilityContext {
  const { attemptId } = message;
  const log = (level: 'info' | 'warn' | 'error') => (text: string, fields?: Record<string, unknown>) =>
    send({ type: 'log', attemptId, level, message: text, ...(fields ? { fields } : {}) });
  return {
    attemptId,
    taskId: message.meta.taskId,
    stepKey: message.meta.stepKey,
    stepId: message.meta.stepKey,
    attempt: message.meta.attempt,
    workDirectory: message.meta.workDirectory,
    checkpoint: message.checkpoint,
    signal,
    progress: (percent, update) =>
      send({ type: 'progress', attemptId, percent, ...(update ? { update } : {}) }),
    // As JSON, as the worker stores it: a checkpoint that is not JSON fails here, in the capability.
    saveCheckpoint: (data) =>
      send({ type: 'checkpoint', attemptId, data: JSON.parse(JSON.stringify(data ?? null)) }),
    log: { info: log('info'), warn: log('warn'), error: log('error') },
    download: (resourceRef) => call(attemptId, 'download', resourceRef),
    allocateOutput: async (spec): Promise<OutputFile> => {
      const allocated = await call(attemptId, 'allocateOutput', spec);
      return {
        path: allocated.path,
        resourceRef: allocated.resourceRef,
        upload: () => call(attemptId, 'upload', allocated.outputId),
      };
    },
  };
}

async function run(capabilities: Map<string, Capability>, message: Extract<ToRunner, { type: 'run' }>) {
  const { attemptId } = message;
  const controller = new AbortController();
  aborts.set(attemptId, controller);
  try {
    const capability = capabilities.get(message.capability);
    if (!capability) throw new Error(`the capability module does not export ${message.capability}`);
    const output = await capability.run(contextFor(message, controller.signal), message.input as never);
    send({ type: 'result', attemptId, output });
  } catch (error) {
    send({ type: 'failed', attemptId, error: serializeError(error) });
  } finally {
    aborts.delete(attemptId);
  }
}

async function main() {
  const specifier = process.argv[2];
  if (!specifier || !process.send) throw new Error('a capability runner is started by the worker');
  const capabilities = await capabilitiesOf(specifier);
  process.on('message', (message: ToRunner) => {
    if (message.type === 'run') void run(capabilities, message);
    else if (message.type === 'abort') aborts.get(message.attemptId)?.abort(message.reason);
    else if (message.type === 'reply') {
      const waiting = pending.get(message.callId);
      pending.delete(message.callId);
      if (message.error) waiting?.reject(deserializeError(message.error));
      else waiting?.resolve(message.result);
    }
  });
  // The worker going away (its IPC channel closing) ends the runner: it has no one to answer to.
  process.on('disconnect', () => process.exit(0));
  send({ type: 'ready' });
}

void main().catch((error: unknown) => {
  process.stderr.write(`capability runner could not start: ${(error as Error).message}\n`);
  process.exit(70);
});
