import type { TemporalSettings } from './adapters/temporal/temporalEngine.ts';
import { ConfigError, integer } from './configParsing.ts';

/**
 * The orchestration engine for new executions. Temporal is fed from JetStream (the bridge consumes the
 * outbox's events), so `temporal` needs NATS_URL as well as TEMPORAL_ADDRESS. The Temporal settings are
 * read whenever TEMPORAL_ADDRESS is set: executions made in `temporal` mode still finish after a switch
 * back to `native`.
 */
export interface OrchestratorSettings {
  /** The engine new executions are driven by (`TDP_ORCHESTRATOR`); `temporal` needs NATS and Temporal. */
  orchestrator: 'native' | 'temporal';
  /**
   * `TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`, `TEMPORAL_TASK_QUEUE`: where the Temporal engine runs;
   * `TEMPORAL_SWEEP_INTERVAL_MS`, `TEMPORAL_SWEEP_IDLE_MS`: its sweep for lost workflows.
   */
  temporal: TemporalSettings | null;
}

export function orchestratorFrom(
  env: NodeJS.ProcessEnv,
  overrides: Partial<OrchestratorSettings>,
  natsUrl: string | null,
): OrchestratorSettings {
  const orchestrator = overrides.orchestrator ?? env.TDP_ORCHESTRATOR?.trim() ?? 'native';
  if (orchestrator !== 'native' && orchestrator !== 'temporal')
    throw new ConfigError(`TDP_ORCHESTRATOR must be native or temporal, not ${orchestrator}`);
  const address = env.TEMPORAL_ADDRESS?.trim();
  const temporal =
    overrides.temporal !== undefined
      ? overrides.temporal
      : address
        ? {
            address,
            namespace: env.TEMPORAL_NAMESPACE?.trim() || 'default',
            taskQueue: env.TEMPORAL_TASK_QUEUE?.trim() || 'tdp-executions',
            sweepIntervalMs: integer(env, 'TEMPORAL_SWEEP_INTERVAL_MS', 60_000),
            sweepIdleMs: integer(env, 'TEMPORAL_SWEEP_IDLE_MS', 60_000),
          }
        : null;
  if (temporal?.sweepIntervalMs !== undefined && temporal.sweepIntervalMs < 100)
    throw new ConfigError('TEMPORAL_SWEEP_INTERVAL_MS must be at least 100');
  if (orchestrator === 'temporal' && !temporal)
    throw new ConfigError('TEMPORAL_ADDRESS is required with TDP_ORCHESTRATOR=temporal');
  if (temporal && !natsUrl)
    throw new ConfigError('NATS_URL is required with the Temporal engine (its bridge reads JetStream)');
  return { orchestrator, temporal };
}
