/**
 * The Temporal engine: its worker, its JetStream bridge and the sweep that starts the workflows Temporal
 * lost (`adapters/temporal/workflowSweep.ts`), in every replica that runs the loops while
 * TEMPORAL_ADDRESS is set (docs/temporal.md). Started in the background and tried again until Temporal
 * answers: the server serves meanwhile, tasks are created and their events wait in JetStream. It
 * provides the engine new executions are driven by (`TDP_ORCHESTRATOR`).
 */
import type { Logger } from 'pino';
import type { TemporalBridge } from '../../adapters/temporal/temporalBridge.ts';
import type { TemporalEngine, TemporalSettings } from '../../adapters/temporal/temporalEngine.ts';
import { defineFeature } from '../../host/feature.ts';
import type { Host } from '../../host/host.ts';
import type { WakeableLoop } from '../../host/loops/wakeableLoop.ts';
import { type OrchestrationEngineName, temporalSettings } from './settings.ts';

export interface Engine {
  /** The engine new executions are driven by. */
  newExecutions: OrchestrationEngineName;
  /** Temporal is set up (TEMPORAL_ADDRESS), whether or not this replica runs its worker. */
  configured: boolean;
  /** Whether this replica's Temporal engine is connected; null when it runs none (the health page). */
  connected(): boolean | null;
}

declare module '../../host/provisions.ts' {
  interface Provisions {
    engine: Engine;
  }
}

interface Running {
  bridge: TemporalBridge;
  engine: TemporalEngine;
  sweep: WakeableLoop;
}

export const temporalFeature = defineFeature({
  name: 'temporal',
  settings: temporalSettings,
  start(host, { orchestrator, temporal }) {
    const events = host.need('events');
    const natsUrl = events.natsUrl;
    if (!temporal || !host.settings.runLoops || !natsUrl) {
      host.provide('engine', {
        newExecutions: orchestrator,
        configured: temporal !== null,
        connected: () => null,
      });
      return {};
    }
    let stopped = false;
    let wake = () => {};
    let running: Running | null = null;
    const starting = (async () => {
      for (let attempt = 0; !stopped; attempt += 1) {
        try {
          running = await connect(host, temporal, {
            natsUrl,
            stream: events.stream,
            subjectPrefix: events.subjectPrefix,
          });
          if (stopped) {
            await stopAll(running);
            running = null;
          }
          return;
        } catch (error) {
          retrying(host.logger, temporal.address, error);
          await new Promise<void>((resolve) => {
            wake = resolve;
            setTimeout(resolve, Math.min(30_000, 500 * 2 ** Math.min(attempt, 6)));
          });
        }
      }
    })();
    host.provide('engine', {
      newExecutions: orchestrator,
      configured: true,
      connected: () => running !== null,
    });
    return {
      stop: async () => {
        stopped = true;
        wake();
        await starting;
        if (running) await stopAll(running);
      },
    };
  },
});

async function connect(
  host: Host,
  temporal: TemporalSettings,
  bus: { natsUrl: string; stream: string; subjectPrefix: string },
): Promise<Running> {
  // Loaded here, not with the server: Temporal's SDK (with its native core) takes a second and 50 MB
  // to import, which a server without Temporal should not pay.
  const [{ TemporalEngine }, { TemporalBridge }, { WorkflowSweep }] = await Promise.all([
    import('../../adapters/temporal/temporalEngine.ts'),
    import('../../adapters/temporal/temporalBridge.ts'),
    import('../../adapters/temporal/workflowSweep.ts'),
  ]);
  const now = () => host.clock.now();
  const engine = await TemporalEngine.start(temporal, host.need('status').deps);
  try {
    const bridge = await TemporalBridge.start({
      ...bus,
      sql: host.sql,
      driver: engine,
      logger: host.logger,
      now,
    });
    const intervalMs = temporal.sweepIntervalMs ?? 60_000;
    const workflows = new WorkflowSweep({
      sql: host.sql,
      driver: engine,
      now,
      idleMs: temporal.sweepIdleMs ?? 60_000,
      leaseMs: intervalMs,
    });
    // With several replicas, one of them sweeps per interval: the one that holds the lease.
    const sweep = host.loop({
      name: 'temporal-sweep',
      maxIdleMs: intervalMs,
      round: () => workflows.round(),
    });
    sweep.start();
    return { bridge, engine, sweep };
  } catch (error) {
    await engine.stop();
    throw error;
  }
}

async function stopAll(running: Running) {
  await running.sweep.stop();
  await running.bridge.stop();
  await running.engine.stop();
}

function retrying(logger: Logger, address: string, error: unknown) {
  logger.warn({ err: error, address }, 'temporal engine: not connected; trying again');
}
