/** Creating, reading, pausing and resuming schedules (the loop that fires them is fireSchedules.ts). */
import type { CreateScheduleRequest, Schedule } from '@tdp/protocol';
import {
  type DefinitionLookup,
  type JsonSchemaValidator,
  publishedWorkflow,
  requireValidInput,
} from '../definitions/ports.ts';
import type { ApplicationPrincipal } from '../identity/ports.ts';
import { fingerprint } from '../shared/canonicalJson.ts';
import { AppError } from '../shared/errors.ts';
import type { Clock, IdGenerator } from '../shared/ports.ts';
import { type CronSpec, cronProblem, isKnownTimeZone, nextFireAfter, nextFiresAfter } from './cron.ts';
import { fireInput } from './firePolicy.ts';
import type { ScheduleRecord, ScheduleStore } from './ports.ts';

export interface ScheduleDeps {
  schedules: ScheduleStore;
  definitions: DefinitionLookup;
  schemas: JsonSchemaValidator;
  clock: Clock;
  ids: IdGenerator;
  /** How many upcoming fire times a schedule's view lists. */
  listedFireTimes: number;
  listLimit: number;
  /** Schedules one application may have, and the shortest time between two fires (`0`: no limit). */
  limits?: { perApplication: number; minIntervalSeconds: number };
}

/** Fire times looked at for the minimum interval: enough for any cron's densest stretch to show. */
const firesChecked = 100;

/** SCHEDULE_TOO_FREQUENT's message when two of the next fires are closer than `minIntervalSeconds`. */
function tooFrequent(spec: CronSpec, now: Date, minIntervalSeconds: number): string | null {
  if (minIntervalSeconds <= 0) return null;
  const fires = nextFiresAfter(spec, now, firesChecked);
  for (let i = 1; i < fires.length; i++) {
    const gapSeconds = (fires[i]!.getTime() - fires[i - 1]!.getTime()) / 1000;
    if (gapSeconds < minIntervalSeconds)
      return `cron: fires ${gapSeconds} s apart at ${fires[i - 1]!.toISOString()}; schedules may fire at most once every ${minIntervalSeconds} s`;
  }
  return null;
}

/** A new schedule must keep the application's limits (422; checked before the insert, not under a lock). */
async function checkLimits(
  deps: ScheduleDeps,
  applicationId: string,
  spec: CronSpec,
  now: Date,
): Promise<void> {
  if (!deps.limits) return;
  const frequent = tooFrequent(spec, now, deps.limits.minIntervalSeconds);
  if (frequent) throw new AppError('SCHEDULE_TOO_FREQUENT', frequent, [{ path: '/cron', message: frequent }]);
  const most = deps.limits.perApplication;
  if (most > 0 && (await deps.schedules.countForApplication(applicationId, most)) >= most)
    throw new AppError('SCHEDULE_LIMIT', `the application has ${most} schedules, its limit`);
}

export interface CreateScheduleResult {
  replayed: boolean;
  body: Schedule;
}

export async function createSchedule(
  deps: ScheduleDeps,
  principal: ApplicationPrincipal,
  idempotencyKey: string,
  request: CreateScheduleRequest,
): Promise<CreateScheduleResult> {
  const requestHash = fingerprint(request);
  const existing = await deps.schedules.findByKey(principal.applicationId, idempotencyKey);
  if (existing) return replay(deps, existing, requestHash, idempotencyKey);
  const problem = cronProblem(request.cron);
  if (problem) {
    throw new AppError('CRON_EXPRESSION_INVALID', `cron: ${problem}`, [{ path: '/cron', message: problem }]);
  }
  if (!isKnownTimeZone(request.timeZone)) {
    throw new AppError('VALIDATION_FAILED', `timeZone: "${request.timeZone}" is not an IANA time zone`, [
      { path: '/timeZone', message: 'not an IANA time zone' },
    ]);
  }
  const startAt = request.startAt ? new Date(request.startAt) : null;
  const endAt = request.endAt ? new Date(request.endAt) : null;
  if (startAt && endAt && endAt.getTime() <= startAt.getTime()) {
    throw new AppError('VALIDATION_FAILED', 'endAt must be after startAt', [
      { path: '/endAt', message: 'must be after startAt' },
    ]);
  }
  const definition = await publishedWorkflow(
    deps.definitions,
    principal.tenantId,
    request.workflowName,
    request.workflowVersion,
  );
  const input = request.input ?? {};
  const id = deps.ids.newId();
  const now = deps.clock.now();
  const spec = { cron: request.cron, timeZone: request.timeZone, startAt, endAt };
  await checkLimits(deps, principal.applicationId, spec, now);
  // The input as its first fire's task would get it (the placeholders filled in).
  const firstInput = fireInput(input, { scheduleId: id, fireAt: nextFireAfter(spec, now) ?? now });
  requireValidInput(deps.schemas, definition, firstInput);
  const schedule: ScheduleRecord = {
    id,
    tenantId: principal.tenantId,
    applicationId: principal.applicationId,
    idempotencyKey,
    requestHash,
    ...spec,
    workflowName: request.workflowName,
    workflowVersion: request.workflowVersion,
    input,
    overlap: request.overlap,
    paused: false,
    nextFireAt: nextFireAfter(spec, now),
    queuedFireAt: null,
    lastFireAt: null,
    lastTaskId: null,
    lastError: null,
    createdAt: now,
    updatedAt: now,
  };
  if (await deps.schedules.insert(schedule)) return { replayed: false, body: toScheduleView(deps, schedule) };
  // A concurrent request with the same key inserted first.
  const winner = await deps.schedules.findByKey(principal.applicationId, idempotencyKey);
  return replay(deps, winner!, requestHash, idempotencyKey);
}

function replay(
  deps: ScheduleDeps,
  existing: ScheduleRecord,
  requestHash: string,
  key: string,
): CreateScheduleResult {
  if (existing.requestHash !== requestHash) {
    throw new AppError(
      'IDEMPOTENCY_KEY_REUSED',
      `Idempotency-Key "${key}" was used for a different request; use a new key for a new schedule`,
    );
  }
  return { replayed: true, body: toScheduleView(deps, existing) };
}

export async function getSchedule(deps: ScheduleDeps, principal: ApplicationPrincipal, id: string) {
  return toScheduleView(deps, await found(deps.schedules.get(principal.applicationId, id), id));
}

export async function listSchedules(deps: ScheduleDeps, principal: ApplicationPrincipal) {
  const rows = await deps.schedules.list(principal.applicationId, deps.listLimit);
  return { schedules: rows.map((row) => toScheduleView(deps, row)) };
}

/** Every application's schedules with their application, for the operator dashboard. */
export async function listAllSchedules(deps: ScheduleDeps, tenants: 'all' | string[]) {
  const rows = await deps.schedules.listAll(deps.listLimit, tenants);
  return rows.map((row) => ({
    ...toScheduleView(deps, row),
    applicationId: row.applicationId,
    tenantId: row.tenantId,
  }));
}

/** Pausing stops the fires; the fire time is kept only for reading. */
export async function pauseSchedule(deps: ScheduleDeps, principal: ApplicationPrincipal, id: string) {
  const current = await found(deps.schedules.get(principal.applicationId, id), id);
  const change = { paused: true, nextFireAt: current.nextFireAt };
  const row = await deps.schedules.setPaused(principal.applicationId, id, change, deps.clock.now());
  return toScheduleView(deps, await found(Promise.resolve(row), id));
}

/** Resuming fires from now on: fire times that passed while paused are not caught up. */
export async function resumeSchedule(deps: ScheduleDeps, principal: ApplicationPrincipal, id: string) {
  const current = await found(deps.schedules.get(principal.applicationId, id), id);
  const now = deps.clock.now();
  const change = {
    paused: false,
    nextFireAt: current.paused ? nextFireAfter(current, now) : current.nextFireAt,
  };
  const row = await deps.schedules.setPaused(principal.applicationId, id, change, now);
  return toScheduleView(deps, await found(Promise.resolve(row), id));
}

async function found(row: Promise<ScheduleRecord | null>, id: string): Promise<ScheduleRecord> {
  const schedule = await row;
  if (!schedule) throw new AppError('SCHEDULE_NOT_FOUND', `schedule ${id} does not exist`);
  return schedule;
}

export function toScheduleView(deps: Pick<ScheduleDeps, 'listedFireTimes'>, s: ScheduleRecord): Schedule {
  const iso = (d: Date | null) => (d ? d.toISOString() : null);
  const upcoming =
    s.paused || !s.nextFireAt
      ? []
      : [s.nextFireAt, ...nextFiresAfter(s, s.nextFireAt, deps.listedFireTimes - 1)].slice(
          0,
          deps.listedFireTimes,
        );
  return {
    id: s.id,
    cron: s.cron,
    timeZone: s.timeZone,
    workflowName: s.workflowName,
    workflowVersion: s.workflowVersion,
    input: s.input,
    overlap: s.overlap,
    startAt: iso(s.startAt),
    endAt: iso(s.endAt),
    paused: s.paused,
    nextFireAt: iso(s.nextFireAt),
    nextFireTimes: upcoming.map((d) => d.toISOString()),
    queuedFireAt: iso(s.queuedFireAt),
    lastFireAt: iso(s.lastFireAt),
    lastTaskId: s.lastTaskId,
    lastError: s.lastError,
    createdAt: s.createdAt.toISOString(),
  };
}
