/**
 * Tasks: creating (idempotent, with its first steps placed in the same transaction when a worker is
 * free), cancelling, retrying, listing tasks, and a task's run log.
 */
import { Type } from 'typebox';
import { registerRunRoutes } from '../../adapters/inbound/http/runRoutes.ts';
import { registerTaskRoutes } from '../../adapters/inbound/http/tasksRoutes.ts';
import { PostgresTaskStore } from '../../adapters/outbound/postgres/taskStore.ts';
import type { CancelDeps } from '../../core/tasks/cancelTask.ts';
import type { CreateTaskDeps } from '../../core/tasks/createTask.ts';
import { defineFeature } from '../../host/feature.ts';
import { setting, settingsSlice } from '../../host/settings.ts';
import { RecentInFlightCounts } from './inFlightCounts.ts';

export interface Tasks {
  create: CreateTaskDeps;
  cancel: CancelDeps;
  store: PostgresTaskStore;
}

declare module '../../host/provisions.ts' {
  interface Provisions {
    tasks: Tasks;
  }
}

const settings = settingsSlice(
  Type.Object({
    tasksInFlightLimit: setting.integer({
      env: 'TDP_TASKS_IN_FLIGHT_LIMIT',
      default: 100_000,
      description:
        'Unfinished (pending or running) tasks one application may have, unless an operator set its own quota ([scheduling](scheduling.md#quotas)); a create beyond gets 429 `TASKS_IN_FLIGHT_LIMIT` (`0`: no limit).',
    }),
    tasksInFlightRetryAfterSeconds: setting.value({
      default: 5,
      description: "The `Retry-After` of a create refused for the application's tasks in flight.",
    }),
    scheduleToStartDefaultMs: setting.integer({
      env: 'TDP_SCHEDULE_TO_START_DEFAULT_MS',
      default: 0,
      description:
        'How long a capability step may wait for a worker when neither its task nor its workflow sets a limit; past it the step fails with `SCHEDULE_TO_START_TIMEOUT` and the reason (`0`: waits forever; `tdp dev` uses 30000).',
    }),
    cancelGraceMs: setting.value({
      default: 30_000,
      description:
        'After a cancel, running attempts get this long to stop before the execution is cancelled anyway.',
    }),
  }),
);

export const tasksFeature = defineFeature({
  name: 'tasks',
  settings,
  start(host, settings) {
    const { clock, ids } = host;
    const definitions = host.need('definitions');
    const workers = host.need('workers');
    const facts = { store: host.facts, clock, ids, signal: host.afterCommit };
    const store = new PostgresTaskStore(host.sql);
    const tasks: Tasks = {
      create: {
        ...facts,
        definitions: definitions.catalog,
        schemas: definitions.schemas,
        allowInsecureCallbacks: host.settings.allowInsecureCallbacks,
        egress: host.egress.policy,
        engine: host.need('engine').newExecutions,
        placement: { ...workers.dispatch, candidates: workers.candidates },
        tracing: host.tracing,
        inFlight: {
          tasks: new RecentInFlightCounts(store),
          limit: settings.tasksInFlightLimit,
          retryAfterSeconds: settings.tasksInFlightRetryAfterSeconds,
        },
        mapItemLimits: host.need('status').deps.mapItemLimits,
        tasks: store,
        scheduleToStartDefaultMs: settings.scheduleToStartDefaultMs,
        cancelGraceMs: settings.cancelGraceMs,
      },
      cancel: { ...facts, cancelGraceMs: settings.cancelGraceMs },
      store,
    };
    host.provide('tasks', tasks);
    return {
      routes: async (app) => {
        const { authenticator } = host.need('identity');
        const { archived } = host.need('retention');
        registerTaskRoutes(app, {
          authenticator,
          tasks: tasks.store,
          unschedulableReasons: (taskId) => workers.workerStore.pendingReasons(taskId),
          create: tasks.create,
          cancel: tasks.cancel,
          archived,
        });
        registerRunRoutes(app, {
          authenticator,
          runs: tasks.store,
          callbacks: host.need('callbacks').queue,
          clock,
          archived,
        });
      },
    };
  },
});
