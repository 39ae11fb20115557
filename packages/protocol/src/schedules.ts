/** Schedules: a cron expression in a time zone that starts tasks of a published workflow (docs/schedules.md). */
import { type Static, Type } from 'typebox';
import { WorkflowName, WorkflowVersion } from './schemas.ts';

const Strict = { additionalProperties: false } as const;
const Timestamp = Type.String({ format: 'date-time' });
const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);

/** What happens to a fire while the schedule's previous task is still running. */
export const ScheduleOverlap = Type.Union([
  Type.Literal('SKIP'),
  Type.Literal('QUEUE_ONE'),
  Type.Literal('ALLOW'),
]);
export type ScheduleOverlap = Static<typeof ScheduleOverlap>;

export const CreateScheduleRequest = Type.Object(
  {
    /** Five fields (minute hour day-of-month month day-of-week) or six with seconds first. */
    cron: Type.String({ minLength: 1, maxLength: 200 }),
    /** An IANA time zone, e.g. "Europe/Paris"; the cron fields are read in it. */
    timeZone: Type.String({ minLength: 1, maxLength: 100 }),
    workflowName: WorkflowName,
    workflowVersion: WorkflowVersion,
    /** The input of every task the schedule starts, checked against the workflow's input schema. */
    input: Type.Optional(Type.Unknown()),
    overlap: ScheduleOverlap,
    /** No fire before this instant (inclusive). */
    startAt: Type.Optional(Timestamp),
    /** No fire at or after this instant. */
    endAt: Type.Optional(Timestamp),
  },
  Strict,
);
export type CreateScheduleRequest = Static<typeof CreateScheduleRequest>;

export const Schedule = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    cron: Type.String(),
    timeZone: Type.String(),
    workflowName: Type.String(),
    workflowVersion: Type.String(),
    input: Type.Unknown(),
    overlap: ScheduleOverlap,
    startAt: NullableTimestamp,
    endAt: NullableTimestamp,
    paused: Type.Boolean(),
    /** The next fire time (null when paused past its end, or ended). */
    nextFireAt: NullableTimestamp,
    /** The next few fire times from now, for people (empty when paused or ended). */
    nextFireTimes: Type.Array(Timestamp),
    /** A QUEUE_ONE fire waiting for the previous task to end. */
    queuedFireAt: NullableTimestamp,
    lastFireAt: NullableTimestamp,
    lastTaskId: Type.Union([Type.String({ format: 'uuid' }), Type.Null()]),
    /** Why the last fire created no task (e.g. the workflow's input schema now refuses the input). */
    lastError: Type.Union([Type.String(), Type.Null()]),
    createdAt: Timestamp,
  },
  Strict,
);
export type Schedule = Static<typeof Schedule>;

export const SchedulePage = Type.Object({ schedules: Type.Array(Schedule) }, Strict);
export type SchedulePage = Static<typeof SchedulePage>;
