import type { FastifyInstance } from 'fastify';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { AppError } from '../../../core/shared/errors.ts';

/** The codes of quota and throttle refusals a route throws (the others are counted where they happen). */
const quotaCodes = new Set<string>([
  'TASKS_IN_FLIGHT_LIMIT',
  'MAP_ITEMS_LIMIT',
  'SCHEDULE_LIMIT',
  'SCHEDULE_TOO_FREQUENT',
]);

/** Fine where realtime's targets are (tens of milliseconds): a p99 read from them must be useful. */
const commitBuckets = [
  0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 5, 30,
];

/** The process's metrics, in a registry of its own (no global default registry). */
export class Metrics {
  readonly registry = new Registry();
  readonly httpDuration = new Histogram({
    name: 'tdp_http_request_duration_seconds',
    help: 'HTTP request duration by route and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });
  readonly outboxPublished = new Counter({
    name: 'tdp_outbox_published_total',
    help: 'Domain events published from the outbox',
    registers: [this.registry],
  });
  readonly outboxFailed = new Counter({
    name: 'tdp_outbox_failed_total',
    help: 'Failed outbox publication attempts, by outcome (FAILED = will retry, DEAD = gave up)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly outboxLatency = new Histogram({
    name: 'tdp_outbox_commit_to_publish_seconds',
    help: 'Time from the commit of a domain event to its publication',
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30, 120],
    registers: [this.registry],
  });

  readonly realtimeLatency = new Histogram({
    name: 'tdp_realtime_commit_to_publish_seconds',
    help: "Time from a realtime projection's fact time (its transaction's start) to its publication to the gateway",
    buckets: commitBuckets,
    registers: [this.registry],
  });
  readonly realtimeHandoff = new Histogram({
    name: 'tdp_realtime_handoff_seconds',
    help: "Time from a transaction's commit to the publication of its realtime messages to the gateway by the in-memory hand-off",
    buckets: commitBuckets,
    registers: [this.registry],
  });
  readonly factTransaction = new Histogram({
    name: 'tdp_fact_transaction_seconds',
    help: 'Time of a status transaction, by phase: queue (for a pooled connection), work (its reads and decisions), commit (its writes and COMMIT)',
    labelNames: ['phase'] as const,
    buckets: commitBuckets,
    registers: [this.registry],
  });
  readonly realtimeDead = new Counter({
    name: 'tdp_realtime_dead_total',
    help: 'Realtime messages given up on (refused by the gateway, or failing past the retry limit)',
    registers: [this.registry],
  });
  readonly realtimeCoalesced = new Counter({
    name: 'tdp_realtime_coalesced_total',
    help: 'Progress-only realtime messages not sent because a newer one of the same task followed',
    registers: [this.registry],
  });

  readonly realtimeSlowCoalesced = new Counter({
    name: 'tdp_realtime_slow_client_coalesced_total',
    help: 'Progress messages a slow realtime client did not get because a newer one of the same task replaced them in its queue',
    registers: [this.registry],
  });
  readonly realtimeSlowDisconnects = new Counter({
    name: 'tdp_realtime_slow_client_disconnects_total',
    help: 'Realtime clients disconnected (3008 slow) because their send queue passed its bound',
    registers: [this.registry],
  });

  readonly rateLimited = new Counter({
    name: 'tdp_rate_limited_total',
    help: 'Requests refused with 429 RATE_LIMITED, by credential (application, worker, execution)',
    labelNames: ['credential'] as const,
    registers: [this.registry],
  });

  readonly quotaRefused = new Counter({
    name: 'tdp_quota_refused_total',
    help: 'Requests, connections and map steps refused by a quota or throttle, by code (AUTH_THROTTLED, CONNECTION_LIMIT, TASKS_IN_FLIGHT_LIMIT, MAP_ITEMS_LIMIT, SCHEDULE_LIMIT, SCHEDULE_TOO_FREQUENT)',
    labelNames: ['code'] as const,
    registers: [this.registry],
  });

  readonly retentionSwept = new Counter({
    name: 'tdp_retention_rows_swept_total',
    help: 'Rows the retention sweep deleted, by table (archived task history included)',
    labelNames: ['table'] as const,
    registers: [this.registry],
  });
  readonly retentionArchived = new Counter({
    name: 'tdp_retention_rows_archived_total',
    help: 'Rows written to the archive and checked before they were deleted, by table',
    labelNames: ['table'] as const,
    registers: [this.registry],
  });
  readonly retentionOldestRowAge = new Gauge({
    name: 'tdp_retention_oldest_row_age_seconds',
    help: 'Age of the oldest row of a table, as the last retention round saw it',
    labelNames: ['table'] as const,
    registers: [this.registry],
  });
  readonly retentionFailures = new Counter({
    name: 'tdp_retention_failures_total',
    help: 'Retention rounds that stopped (ARCHIVE: the archive could not be written or read back, nothing was deleted; CHANGED: a batch changed while archived; SWEEP: a delete failed)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'tdp_' });
  }

  instrument(app: FastifyInstance): void {
    // A use case's quota refusal reaches the error handler as its AppError: counted here, once.
    app.addHook('onError', async (_request, _reply, error) => {
      if (error instanceof AppError && quotaCodes.has(error.code))
        this.quotaRefused.inc({ code: error.code });
    });
    app.addHook('onResponse', async (request, reply) => {
      this.httpDuration
        .labels(request.method, request.routeOptions.url ?? 'unmatched', String(reply.statusCode))
        .observe(reply.elapsedTime / 1000);
    });
  }
}
