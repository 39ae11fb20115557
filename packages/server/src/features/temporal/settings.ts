/**
 * The orchestration engine for new executions. Temporal is fed from JetStream (the bridge consumes the
 * outbox's events), so `temporal` needs NATS_URL as well as TEMPORAL_ADDRESS. The Temporal settings are
 * read whenever TEMPORAL_ADDRESS is set: executions made in `temporal` mode still finish after a switch
 * back to `native`.
 */
import { Type } from 'typebox';
import type { TemporalSettings } from '../../adapters/temporal/temporalEngine.ts';
import { ConfigError, integerVariable, setting, settingsSlice } from '../../host/settings.ts';

export type OrchestrationEngineName = 'native' | 'temporal';

function temporalFrom(env: NodeJS.ProcessEnv): TemporalSettings | undefined {
  const address = env.TEMPORAL_ADDRESS?.trim();
  if (!address) return undefined;
  return {
    address,
    namespace: env.TEMPORAL_NAMESPACE?.trim() || 'default',
    taskQueue: env.TEMPORAL_TASK_QUEUE?.trim() || 'tdp-executions',
    sweepIntervalMs: integerVariable(env, 'TEMPORAL_SWEEP_INTERVAL_MS', 60_000),
    sweepIdleMs: integerVariable(env, 'TEMPORAL_SWEEP_IDLE_MS', 60_000),
  };
}

export const temporalSettings = settingsSlice(
  Type.Object({
    orchestrator: setting.custom<OrchestrationEngineName>({
      variables: ['TDP_ORCHESTRATOR'],
      typeName: '`native` or `temporal`',
      default: 'native',
      description:
        'The engine new executions are driven by; `temporal` needs `TEMPORAL_ADDRESS` and `NATS_URL`.',
      parse: (env) => {
        const value = env.TDP_ORCHESTRATOR?.trim();
        if (!value) return undefined;
        if (value !== 'native' && value !== 'temporal')
          throw new ConfigError(`TDP_ORCHESTRATOR must be native or temporal, not ${value}`);
        return value;
      },
    }),
    temporal: setting.custom<TemporalSettings | null>({
      variables: {
        TEMPORAL_ADDRESS: {
          type: 'host:port',
          default: '—',
          description: 'Where Temporal answers (docs/temporal.md); unset: no Temporal engine.',
        },
        TEMPORAL_NAMESPACE: { type: 'string', default: 'default', description: 'Its namespace.' },
        TEMPORAL_TASK_QUEUE: { type: 'string', default: 'tdp-executions', description: 'Its task queue.' },
        TEMPORAL_SWEEP_INTERVAL_MS: {
          default: '60000',
          description: 'How often the sweep looks for workflows Temporal lost (at least 100).',
        },
        TEMPORAL_SWEEP_IDLE_MS: {
          default: '60000',
          description: 'An execution unchanged for this long is looked at by the sweep.',
        },
      },
      typeName: 'integer ≥ 0',
      default: null,
      description: 'Where the Temporal engine runs, and its sweep for lost workflows.',
      parse: temporalFrom,
    }),
  }),
  (settings, all) => {
    const { orchestrator, temporal } = settings;
    if (temporal?.sweepIntervalMs !== undefined && temporal.sweepIntervalMs < 100)
      throw new ConfigError('TEMPORAL_SWEEP_INTERVAL_MS must be at least 100');
    if (orchestrator === 'temporal' && !temporal)
      throw new ConfigError('TEMPORAL_ADDRESS is required with TDP_ORCHESTRATOR=temporal');
    if (temporal && !all.natsUrl)
      throw new ConfigError('NATS_URL is required with the Temporal engine (its bridge reads JetStream)');
  },
);
