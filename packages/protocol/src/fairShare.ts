/**
 * Fair share's wire shapes (docs/scheduling.md): the concurrency keys and rate limits a workflow or a
 * step declares, a key's state as the API lists it, and a create's debounce and singleton keys with what
 * they did.
 */
import { type Static, Type } from 'typebox';

const Strict = { additionalProperties: false } as const;

/**
 * A concurrency key: no more than `limit` steps carrying the same key run at once. `key` names the key in
 * the tenant (shared by every workflow that names it; its limit can be changed at run time); `value` says
 * which slot pool a task's step falls in: `$.input.<path>` (e.g. one pool per customer), `$.tenant`,
 * `$.application`, `$.owner`, or a literal (one pool for all). Without `value`, one pool for the whole key.
 */
export const ConcurrencyKey = Type.Object(
  {
    key: Type.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z][A-Za-z0-9_.-]*$' }),
    value: Type.Optional(Type.String({ minLength: 1, maxLength: 500 })),
    limit: Type.Integer({ minimum: 1, maximum: 1_000_000 }),
  },
  Strict,
);
export type ConcurrencyKey = Static<typeof ConcurrencyKey>;
export const ConcurrencyKeys = Type.Array(ConcurrencyKey, { maxItems: 5 });

/** A tenant's concurrency key (or rate limit) as `GET /v1/concurrency-keys` lists it. */
export const ConcurrencyKeyState = Type.Object({
  name: Type.String(),
  limit: Type.Union([Type.Integer(), Type.Null()], {
    description: 'The limit set at run time; null: the declared one applies.',
  }),
  declaredLimit: Type.Union([Type.Integer(), Type.Null()]),
  intervalMs: Type.Union([Type.Integer(), Type.Null()], {
    description: "A rate limit's interval (its limit is starts per interval); null: a concurrency key.",
  }),
  paused: Type.Boolean(),
  running: Type.Integer({ description: 'Steps holding a slot of one of its pools now.' }),
  waiting: Type.Integer({ description: 'Steps waiting for a slot.' }),
});
export type ConcurrencyKeyState = Static<typeof ConcurrencyKeyState>;

/**
 * A rate limit: no more than `limit` starts per `intervalMs` of steps carrying the same key (a token
 * bucket per pool, refilled evenly). `key` and `value` name the pool as a concurrency key's do; `limit`
 * can be changed and the key paused at run time like a concurrency key's.
 */
export const RateLimit = Type.Object(
  {
    key: Type.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z][A-Za-z0-9_.-]*$' }),
    value: Type.Optional(Type.String({ minLength: 1, maxLength: 500 })),
    limit: Type.Integer({ minimum: 1, maximum: 1_000_000 }),
    /** From 100 ms to one day. */
    intervalMs: Type.Integer({ minimum: 100, maximum: 86_400_000 }),
  },
  Strict,
);
export type RateLimit = Static<typeof RateLimit>;
export const RateLimits = Type.Array(RateLimit, { maxItems: 5 });

/** A debounce or singleton key: the application's own name for one kind of submission (docs/scheduling.md). */
const TaskKey = Type.String({ minLength: 1, maxLength: 200 });

/**
 * Debounce: the task's first steps wait out `windowMs`; another create with the same key within the
 * window keeps the `last` (the waiting task is cancelled, the new one waits a whole window) or the
 * `first` (nothing is created; the answer is the waiting task).
 */
export const CreateTaskDebounce = Type.Object(
  {
    key: TaskKey,
    windowMs: Type.Integer({ minimum: 1, maximum: 86_400_000 }),
    keep: Type.Union([Type.Literal('last'), Type.Literal('first')]),
  },
  Strict,
);
export type CreateTaskDebounce = Static<typeof CreateTaskDebounce>;

/**
 * Singleton: one unfinished task per key. While one is, a create with the key is refused (`refuse`: 409
 * SINGLETON_RUNNING) or creates a task whose steps wait to be placed until the key is free (`wait`).
 */
export const CreateTaskSingleton = Type.Object(
  { key: TaskKey, whenRunning: Type.Union([Type.Literal('refuse'), Type.Literal('wait')]) },
  Strict,
);
export type CreateTaskSingleton = Static<typeof CreateTaskSingleton>;

/**
 * Fairness within the application: tasks of one `key` (a customer, say) take fair turns beside the
 * application's other keys' tasks, `weight` turns to a weight of 1's (docs/scheduling.md). The weight
 * only shares out the application's own turns: it gains nothing against other applications or tenants.
 */
export const CreateTaskFairness = Type.Object(
  {
    key: Type.String({ minLength: 1, maxLength: 200 }),
    weight: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 1000 })),
  },
  Strict,
);
export type CreateTaskFairness = Static<typeof CreateTaskFairness>;

/**
 * What a create with `debounce` did: `created` (no task was waiting with the key), `replaced` (the waiting
 * `replacedTaskId` was cancelled for this one) or `dropped` (nothing created; `taskId` is the waiting one).
 */
export const DebounceOutcome = Type.Object({
  outcome: Type.Union([Type.Literal('created'), Type.Literal('replaced'), Type.Literal('dropped')]),
  taskId: Type.String(),
  replacedTaskId: Type.Optional(Type.String()),
});
export type DebounceOutcome = Static<typeof DebounceOutcome>;

/**
 * What a create with `singleton` did: the task holds the key (`holder`), or (`waiting`, with `wait`) its
 * steps wait to be placed until the key is free; `heldBy` is the task holding it now.
 */
export const SingletonOutcome = Type.Object({
  outcome: Type.Union([Type.Literal('holder'), Type.Literal('waiting')]),
  heldBy: Type.Optional(Type.String()),
});
export type SingletonOutcome = Static<typeof SingletonOutcome>;
