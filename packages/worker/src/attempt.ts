/**
 * One attempt, start to end: the input checked, STEP_STARTED, the capability run with its context (progress,
 * checkpoints, files through grants), the output checked, and the final event — or, if the runtime
 * stopped, nothing, so that a restart can resume it.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { failureSentence } from '@tdp/protocol';
import { Check, Errors } from 'typebox/value';
import { type Grant, RejectedError, RequestError, UnavailableError, type WorkerClient } from './client.ts';
import { type HeldGrant, holdGrant } from './heldGrant.ts';
import { inProcess } from './isolation/runnerPool.ts';
import type { EventDraft, LocalAttempt } from './localStore.ts';
import { backoffMs } from './loops.ts';
import { defaultGrantRenewal, type Logger, type WorkerOptions, workRootOf } from './options.ts';
import { type AbortReason, failureDraft, failureOf } from './outcomes.ts';
import { WorkDirectory } from './privateFiles.ts';
import { ProgressThrottle } from './progress.ts';
import { type AttemptLogger, type Capability, type CapabilityContext, CapabilityError } from './sdk.ts';
import { downloadTo, type Transfers, uploadFrom } from './transfer.ts';

/** An attempt being run; its controller is how the rest of the runtime stops it. */
export interface Running {
  local: LocalAttempt;
  controller: AbortController;
  /** When its last attempt heartbeat went out (ms). */
  lastBeatAt: number;
  done: Promise<void>;
}

export interface AttemptDeps {
  options: WorkerOptions;
  transfers: Transfers;
  logger: Logger;
  /** The capability the attempt names, if this worker has it. */
  capability: Capability | undefined;
  /** Records the final event and ends the attempt locally (one transaction). */
  finish: (draft: EventDraft) => void;
  wakeSender: () => void;
}

/** Runs the attempt; rejects only with a local database error (capability errors are results). */
export async function runAttempt(running: Running, resumed: boolean, deps: AttemptDeps): Promise<void> {
  const { local, controller } = running;
  const { options, capability, finish } = deps;
  const store = options.store;
  const startedAt = Date.now();
  if (!capability) {
    finish(
      failureDraft(
        'CAPABILITY_NOT_FOUND',
        `this worker has no ${local.capability}@${local.capabilityVersion}`,
        false,
        'INPUT',
      ),
    );
    return;
  }
  if (!Check(capability.input, local.input)) {
    const first = Errors(capability.input, local.input)[0];
    finish(
      failureDraft(
        'INPUT_INVALID',
        `input ${first?.instancePath || '/'}: ${first?.message ?? 'invalid'}`,
        false,
        'INPUT',
      ),
    );
    return;
  }
  if (!resumed) {
    store.record(local.attemptId, { eventType: 'STEP_STARTED' });
    deps.wakeSender();
  }
  const progress = new ProgressThrottle(options.progressIntervalMs ?? 1_000, (draft) => {
    store.record(local.attemptId, draft);
    deps.wakeSender();
  });
  // The attempt's files are this user's alone (0700), as the folder of all attempts is (runtime start).
  const workDirectory = new WorkDirectory(join(workRootOf(options), local.attemptId));
  const held = new Set<HeldGrant>();
  // Transfers end with the attempt: a runner killed mid-download leaves no download running here.
  const ended = new AbortController();
  const transferSignal = AbortSignal.any([controller.signal, ended.signal]);
  const ctx = capabilityContext(running, resumed, progress, workDirectory, held, transferSignal, deps);
  let draft: EventDraft;
  try {
    const output = await (options.runners ?? inProcess).run(capability, ctx, local.input);
    if (controller.signal.aborted) throw new Error(String(controller.signal.reason));
    if (!Check(capability.output, output)) {
      const first = Errors(capability.output, output)[0];
      draft = failureDraft(
        'OUTPUT_INVALID',
        `output ${first?.instancePath || '/'}: ${first?.message ?? 'invalid'}`,
        false,
        'CAPABILITY',
      );
    } else {
      draft = { eventType: 'STEP_COMPLETED', output, durationMs: Date.now() - startedAt };
    }
  } catch (error) {
    for (const grant of held) grant.release();
    if (controller.signal.reason === 'STOPPED') {
      // Its files stay: a restart may resume from them.
      progress.cancel();
      return;
    }
    draft = failureOf(error, controller.signal);
    // The technical side of the failure, for whoever runs the worker (people see the userMessage).
    const failure = draft.error as { code: string; detail?: string } | undefined;
    if (failure?.detail)
      deps.logger.warn(
        { attemptId: local.attemptId, taskId: local.taskId, code: failure.code, detail: failure.detail },
        'attempt failed',
      );
  } finally {
    ended.abort('ENDED');
  }
  // The attempt is over: no grant of it needs renewing any more.
  for (const grant of held) grant.release();
  // The newest progress goes out before the final event.
  progress.flush();
  draft.durationMs ??= Date.now() - startedAt;
  finish(draft);
  // A resumed attempt's folder may hold files from its run before the restart.
  if (workDirectory.made || resumed) await rm(workDirectory.path, { recursive: true, force: true });
}

function capabilityContext(
  running: Running,
  resumed: boolean,
  progress: ProgressThrottle,
  workDirectory: WorkDirectory,
  held: Set<HeldGrant>,
  transferSignal: AbortSignal,
  deps: AttemptDeps,
): CapabilityContext {
  const { local, controller } = running;
  const store = deps.options.store;
  let files = 0;
  const hold = (grant: Grant) => {
    const holding = holdGrant(grant, {
      policy: deps.options.grantRenewal ?? defaultGrantRenewal,
      // Each renewal is a request of its own, with its own idempotency key.
      renew: (current, n) =>
        askTdp(running, deps, () =>
          deps.options.client.renewGrant(
            local.attemptId,
            current.grantId,
            `renew:${current.grantId}:${n}`,
            local.leaseVersion,
          ),
        ),
      failed: (error) =>
        deps.logger.warn(
          { attemptId: local.attemptId, err: error instanceof Error ? error : new Error(String(error)) },
          'grant renewal failed; trying again before it expires',
        ),
      retryMs: 5_000,
    });
    held.add(holding);
    return holding;
  };
  const release = (holding: HeldGrant) => {
    holding.release();
    held.delete(holding);
  };
  return {
    attemptId: local.attemptId,
    taskId: local.taskId,
    stepKey: local.stepKey,
    stepId: local.stepKey,
    attempt: local.attempt,
    progress: (percent, update) => progress.report(percent, update),
    saveCheckpoint: (data) => store.saveCheckpoint(local.attemptId, data),
    checkpoint: resumed ? local.checkpoint : null,
    signal: controller.signal,
    log: attemptLogger(deps.logger, local),
    get workDirectory() {
      return workDirectory.use();
    },
    download: async (resourceRef) => {
      // A fixed key per resource: after a restart the same grant comes back (if still valid).
      const grant = await requestGrant(running, `download:${resourceRef}`, deps, {
        leaseVersion: local.leaseVersion,
        access: 'DOWNLOAD',
        resourceRef,
      });
      files += 1;
      const path = join(workDirectory.use(), `input-${files}`);
      const holding = hold(grant);
      try {
        await downloadTo(
          deps.transfers,
          holding.fresh,
          path,
          transferSignal,
          deps.options.downloadResumes ?? 3,
        );
      } finally {
        release(holding);
      }
      return path;
    },
    allocateOutput: async (spec) => {
      const grant = await requestGrant(running, `artifact:${spec.relativePath}`, deps, {
        leaseVersion: local.leaseVersion,
        relativePath: spec.relativePath,
        artifactType: spec.artifactType ?? 'FILE',
        mediaType: spec.mediaType,
        maxBytes: spec.maxBytes,
      });
      files += 1;
      const path = join(workDirectory.use(), `output-${files}`);
      // Renewed until uploaded: the step may take longer than the URL lasts.
      const holding = hold(grant);
      return {
        path,
        resourceRef: grant.resourceRef,
        upload: async () => {
          try {
            const bytes = await uploadFrom(
              deps.transfers,
              await holding.fresh(),
              path,
              spec.mediaType,
              transferSignal,
            );
            return { resourceRef: grant.resourceRef, bytes };
          } finally {
            release(holding);
          }
        },
      };
    },
  };
}

/** A grant for the attempt, asked again while TDP is unreachable (up to `grantRetryMs`). */
function requestGrant(
  running: Running,
  key: string,
  deps: AttemptDeps,
  body: Parameters<WorkerClient['grant']>[2],
): Promise<Grant> {
  return askTdp(running, deps, () => deps.options.client.grant(running.local.attemptId, key, body));
}

/** A grant request (or renewal) asked again while TDP is unreachable; its failure is the step's. */
async function askTdp(running: Running, deps: AttemptDeps, ask: () => Promise<Grant>): Promise<Grant> {
  const deadline = Date.now() + (deps.options.grantRetryMs ?? 60_000);
  const signal = running.controller.signal;
  for (let failures = 1; ; failures += 1) {
    try {
      return await ask();
    } catch (error) {
      // TDP restarting or overloaded: the same idempotency key makes asking again safe.
      if (error instanceof UnavailableError && Date.now() < deadline && !signal.aborted) {
        await new Promise((resolve) => setTimeout(resolve, Math.min(backoffMs(failures) / 4, 5_000)));
        continue;
      }
      throw grantFailure(running, error);
    }
  }
}

/**
 * Refusals become the step's failure; a lost lease aborts the attempt. People see the sentence for the
 * refusal's code; the request and TDP's answer go to the failure's `detail` only.
 */
function grantFailure(running: Running, error: unknown): CapabilityError {
  // TDP out of reach, or refusing the worker's key (the runtime waits for one that works): not the
  // step's fault, so it runs again. A refusal of the grant itself (its code) is final, below.
  if (error instanceof UnavailableError || error instanceof RejectedError)
    return new CapabilityError('GRANT_UNAVAILABLE', failureSentence('GRANT_UNAVAILABLE'), {
      retryable: true,
      category: 'RESOURCE',
      detail: error.message,
    });
  if (error instanceof RequestError && error.problem?.code === 'STALE_EXECUTION') {
    running.controller.abort('LEASE_LOST' satisfies AbortReason);
  }
  const code = error instanceof RequestError ? (error.problem?.code ?? 'GRANT_REFUSED') : 'GRANT_REFUSED';
  const detail =
    error instanceof RequestError
      ? `grant request refused (${error.status} ${code}): ${error.problem?.detail ?? error.message}`
      : (error as Error).message;
  return new CapabilityError(code, failureSentence(code), {
    retryable: false,
    category: 'RESOURCE',
    detail,
  });
}

function attemptLogger(logger: Logger, local: LocalAttempt): AttemptLogger {
  const bound = { attemptId: local.attemptId, taskId: local.taskId, stepId: local.stepKey };
  return {
    info: (message, fields) => logger.info({ ...bound, ...fields }, message),
    warn: (message, fields) => logger.warn({ ...bound, ...fields }, message),
    error: (message, fields) => logger.error({ ...bound, ...fields }, message),
  };
}
