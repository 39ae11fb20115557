import type { Logger } from 'pino';
import type { TemporalBridge } from '../adapters/temporal/temporalBridge.ts';
import type { TemporalEngine } from '../adapters/temporal/temporalEngine.ts';
import type { ServerConfig } from '../config.ts';
import type { WakeableLoop } from '../loops/wakeableLoop.ts';
import { type Adapters, natsStream } from './adapters.ts';
import type { UseCases } from './useCases.ts';

/**
 * The Temporal engine's worker, its JetStream bridge and the sweep that starts the workflows Temporal
 * lost (workflowSweep.ts), in every replica that runs the loops while
 * TEMPORAL_ADDRESS is set (docs/temporal.md). Started in the background and tried again until Temporal
 * answers: the server serves meanwhile, tasks are created and their events wait in JetStream.
 */
export function startTemporal(
  config: ServerConfig,
  adapters: Adapters,
  uses: UseCases,
): { stop(): Promise<void>; connected(): boolean } | null {
  const { temporal, natsUrl } = config;
  if (!temporal || !config.runLoops || !natsUrl) return null;
  let stopped = false;
  let wake = () => {};
  let running: Running | null = null;
  const connect = async () => {
    // Loaded here, not with the server: Temporal's SDK (with its native core) takes a second and 50 MB
    // to import, which a server without Temporal should not pay.
    const [{ TemporalEngine }, { TemporalBridge }, { createWorkflowSweepLoop, WorkflowSweep }] =
      await Promise.all([
        import('../adapters/temporal/temporalEngine.ts'),
        import('../adapters/temporal/temporalBridge.ts'),
        import('../adapters/temporal/workflowSweep.ts'),
      ]);
    const engine = await TemporalEngine.start(temporal, uses.status);
    try {
      const bridge = await TemporalBridge.start({
        natsUrl,
        stream: natsStream(config.natsSubjectPrefix),
        subjectPrefix: config.natsSubjectPrefix,
        sql: adapters.sql,
        driver: engine,
        logger: adapters.logger,
        now: () => adapters.clock.now(),
      });
      const sweep = createWorkflowSweepLoop(
        new WorkflowSweep({
          sql: adapters.sql,
          driver: engine,
          now: () => adapters.clock.now(),
          idleMs: temporal.sweepIdleMs ?? 60_000,
          leaseMs: temporal.sweepIntervalMs ?? 60_000,
        }),
        {
          logger: adapters.logger,
          now: () => adapters.clock.now(),
          intervalMs: temporal.sweepIntervalMs ?? 60_000,
          retry: config.loopRetry,
        },
      );
      sweep.start();
      return { bridge, engine, sweep };
    } catch (error) {
      await engine.stop();
      throw error;
    }
  };
  const starting = (async () => {
    for (let attempt = 0; !stopped; attempt += 1) {
      try {
        running = await connect();
        if (stopped) {
          await stopBoth(running);
          running = null;
        }
        return;
      } catch (error) {
        retrying(adapters.logger, temporal.address, error);
        await new Promise<void>((resolve) => {
          wake = resolve;
          setTimeout(resolve, Math.min(30_000, 500 * 2 ** Math.min(attempt, 6)));
        });
      }
    }
  })();
  return {
    connected: () => running !== null,
    stop: async () => {
      stopped = true;
      wake();
      await starting;
      if (running) await stopBoth(running);
    },
  };
}

interface Running {
  bridge: TemporalBridge;
  engine: TemporalEngine;
  sweep: WakeableLoop;
}

async function stopBoth(running: Running) {
  await running.sweep.stop();
  await running.bridge.stop();
  await running.engine.stop();
}

function retrying(logger: Logger, address: string, error: unknown) {
  logger.warn({ err: error, address }, 'temporal engine: not connected; trying again');
}
