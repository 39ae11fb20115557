/**
 * Rate limits: `limit` starts per `intervalMs` in each pool of a key, a token bucket per pool that
 * holds up to `limit` tokens and refills evenly (`limit` per interval). A key names its pools as a
 * concurrency key does (`concurrencyKeys.ts`: the same values, the same resolution); its run-time
 * limit and pause are a concurrency key's too. Pure: placement (`orchestration/placement.ts`) asks the
 * store to take the tokens, and the store (`rateLimitTables.ts`) does the bucket arithmetic here.
 */
import type { ConcurrencyKey, FieldError, RateLimit, StepDefinition } from '@tdp/protocol';
import { type KeyedTask, keyValueSource, poolValue, startsOnWorkers } from './concurrencyKeys.ts';
import { schemaGuarantees } from './mappingGuarantees.ts';

/** A step's rate limit resolved for one task: the pool whose bucket it takes a token of. */
export interface RatedKey {
  name: string;
  value: string;
  /** The limit the definition declares; a limit set through the API takes its place. */
  declaredLimit: number;
  intervalMs: number;
}

/** A pool's bucket as stored: its tokens when last refilled. */
export interface Bucket {
  tokens: number;
  refilledAt: Date;
}

/**
 * The rate limits each step that runs on workers starts under (each map item takes its own token): the
 * workflow's, then the step's own. Steps
 * without any carry no field, so definitions without rate limits keep their content hash.
 */
export function applyRateLimits(
  steps: StepDefinition[],
  requested: { rateLimits?: RateLimit[] }[],
  workflowLimits: RateLimit[] | undefined,
): StepDefinition[] {
  return steps.map((step, index) => {
    const limits = [...(workflowLimits ?? []), ...(requested[index]?.rateLimits ?? [])];
    if (!startsOnWorkers(step) || limits.length === 0) return step;
    return { ...step, rateLimits: limits };
  });
}

/**
 * Publish's checks (the schema already holds `limit` ≥ 1 and `intervalMs` to 100 ms..1 day): rate
 * limits only on capability and map steps, no key twice on a step, one limit and interval per key name across
 * the workflow, no name that is also the workflow's concurrency key (a key's run-time limit would mean
 * two things), and a value TDP can read that the input schema guarantees. Each is checked where it is
 * declared.
 */
export function rateLimitErrors(
  requested: {
    rateLimits?: RateLimit[] | undefined;
    concurrency?: ConcurrencyKey[] | undefined;
    steps: { rateLimits?: RateLimit[]; concurrency?: ConcurrencyKey[] }[];
  },
  steps: StepDefinition[],
  inputSchema: Record<string, unknown>,
): FieldError[] {
  const errors: FieldError[] = [];
  requested.steps.forEach((step, index) => {
    if (step.rateLimits?.length && !startsOnWorkers(steps[index]!))
      errors.push({
        path: `/steps/${index}/rateLimits`,
        message: `step ${steps[index]!.key}: only a capability or map step starts under rate limits`,
      });
  });
  const declared: [RateLimit, string][] = [
    ...(requested.rateLimits ?? []).map((l, i): [RateLimit, string] => [l, `/rateLimits/${i}`]),
    ...requested.steps.flatMap((step, index) =>
      (step.rateLimits ?? []).map((l, i): [RateLimit, string] => [l, `/steps/${index}/rateLimits/${i}`]),
    ),
  ];
  const workflowNames = (requested.rateLimits ?? []).map((l) => l.key);
  const stepNames = (i: number) => [
    ...workflowNames,
    ...(requested.steps[i]?.rateLimits ?? []).map((l) => l.key),
  ];
  const twice = (names: string[], i: number) => names.indexOf(names[i]!) !== i;
  workflowNames.forEach((name, i) => {
    if (twice(workflowNames, i))
      errors.push({ path: `/rateLimits/${i}`, message: `the workflow names rate limit ${name} twice` });
  });
  requested.steps.forEach((step, index) => {
    const names = stepNames(index);
    (step.rateLimits ?? []).forEach((l, i) => {
      if (twice(names, workflowNames.length + i))
        errors.push({
          path: `/steps/${index}/rateLimits/${i}`,
          message: `step ${steps[index]!.key} names rate limit ${l.key} twice`,
        });
    });
  });
  const concurrencyNames = new Set([
    ...(requested.concurrency ?? []).map((k) => k.key),
    ...requested.steps.flatMap((s) => (s.concurrency ?? []).map((k) => k.key)),
  ]);
  const rates = new Map<string, RateLimit>();
  for (const [limit, path] of declared) {
    const known = rates.get(limit.key);
    if (known && (known.limit !== limit.limit || known.intervalMs !== limit.intervalMs))
      errors.push({
        path,
        message: `rate limit ${limit.key} is declared as ${rateText(known)} and ${rateText(limit)}; a key has one rate`,
      });
    if (!known) rates.set(limit.key, limit);
    if (concurrencyNames.has(limit.key))
      errors.push({
        path,
        message: `${limit.key} is both a concurrency key and a rate limit; give each its own name`,
      });
    const source = keyValueSource(limit.value);
    if (source === 'invalid')
      errors.push({
        path,
        message: `rate limit ${limit.key}: value ${limit.value} is not $.input.<path>, $.tenant, $.application, $.owner or a literal`,
      });
    else if (source.kind === 'input' && !schemaGuarantees(inputSchema, source.path))
      errors.push({
        path,
        message: `rate limit ${limit.key}: the inputSchema does not guarantee ${limit.value} (make it required)`,
      });
  }
  return errors;
}

/** The buckets a step of this task takes a token of, one per rate limit. */
export function resolveRateLimits(definition: StepDefinition, task: KeyedTask): RatedKey[] {
  return (definition.rateLimits ?? []).map((l) => ({
    name: l.key,
    value: poolValue(keyValueSource(l.value), task),
    declaredLimit: l.limit,
    intervalMs: l.intervalMs,
  }));
}

/**
 * A bucket at `at`: refilled by the time since its last refill (`limit` tokens per interval, never
 * above `limit`), then one token taken if it has one. Refused: when the next token comes. A clock
 * behind the bucket's (another replica's) refills nothing rather than taking tokens back.
 */
export function takeToken(
  bucket: Bucket,
  rate: { limit: number; intervalMs: number },
  at: Date,
): { ok: true; tokens: number } | { ok: false; tokens: number; nextAt: Date } {
  const elapsed = Math.max(0, at.getTime() - bucket.refilledAt.getTime());
  const tokens = Math.min(rate.limit, bucket.tokens + (elapsed * rate.limit) / rate.intervalMs);
  if (tokens >= 1) return { ok: true, tokens: tokens - 1 };
  const wait = Math.ceil(((1 - tokens) * rate.intervalMs) / rate.limit);
  return { ok: false, tokens, nextAt: new Date(at.getTime() + wait) };
}

/** How a step held by a rate limit says so: "openai rate 10 per 1m: next start at 12:00:03Z". */
export function rateLimitReason(
  key: { name: string; value: string },
  rate: { limit: number; intervalMs: number },
  nextAt: Date,
) {
  const pool = key.value === '' ? key.name : `${key.name} ${key.value}`;
  const time = nextAt.toISOString().slice(11).replace('.000Z', 'Z');
  return `${pool} rate ${rateText(rate)}: next start at ${time}`;
}

/** "10 per 1m", "5 per 1500ms": the interval in the largest unit it is a whole number of. */
function rateText(rate: { limit: number; intervalMs: number }) {
  const units: [string, number][] = [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ];
  const [unit, size] = units.find(([, size]) => rate.intervalMs % size === 0) ?? ['ms', 1];
  return `${rate.limit} per ${rate.intervalMs / size}${unit}`;
}
