/** The engine settings: what a start refuses, and what it reads when Temporal is set up. */
import { describe, expect, it } from 'vitest';
import { generateKeyringEntry } from '../src/core/identity/secretBox.ts';
import { ConfigError, configFromEnv } from '../src/main.ts';

/** The engine settings as the server reads them, beside what every start needs. */
function orchestratorFrom(env: NodeJS.ProcessEnv, _overrides: object, natsUrl: string | null) {
  const config = configFromEnv({
    DATABASE_URL: 'postgres://127.0.0.1/tdp',
    TDP_ADMIN_TOKEN: 'adm_0123456789abcdef',
    TDP_SECRET_KEYS: generateKeyringEntry('k1'),
    ...(natsUrl ? { NATS_URL: natsUrl } : {}),
    ...env,
  });
  return { orchestrator: config.orchestrator, temporal: config.temporal };
}

const nats = 'nats://127.0.0.1:4222';

describe('the orchestrator settings', () => {
  it('are native, without Temporal, when nothing is set', () => {
    expect(orchestratorFrom({}, {}, null)).toEqual({ orchestrator: 'native', temporal: null });
  });

  it('read Temporal with its defaults whenever TEMPORAL_ADDRESS is set, also in native mode', () => {
    expect(orchestratorFrom({ TEMPORAL_ADDRESS: ' 127.0.0.1:7233 ' }, {}, nats)).toEqual({
      orchestrator: 'native',
      temporal: {
        address: '127.0.0.1:7233',
        namespace: 'default',
        taskQueue: 'tdp-executions',
        sweepIntervalMs: 60_000,
        sweepIdleMs: 60_000,
      },
    });
    const env = {
      TDP_ORCHESTRATOR: 'temporal',
      TEMPORAL_ADDRESS: 'temporal:7233',
      TEMPORAL_NAMESPACE: 'tdp',
      TEMPORAL_TASK_QUEUE: 'runs',
      TEMPORAL_SWEEP_INTERVAL_MS: '5000',
      TEMPORAL_SWEEP_IDLE_MS: '0',
    };
    expect(orchestratorFrom(env, {}, nats)).toEqual({
      orchestrator: 'temporal',
      temporal: {
        address: 'temporal:7233',
        namespace: 'tdp',
        taskQueue: 'runs',
        sweepIntervalMs: 5_000,
        sweepIdleMs: 0,
      },
    });
  });

  it('refuse settings that do not fit together, with a message that names them', () => {
    const refused = (env: NodeJS.ProcessEnv, natsUrl: string | null) => () =>
      orchestratorFrom(env, {}, natsUrl);
    expect(refused({ TDP_ORCHESTRATOR: 'airflow' }, nats)).toThrow(
      new ConfigError('TDP_ORCHESTRATOR must be native or temporal, not airflow'),
    );
    expect(refused({ TDP_ORCHESTRATOR: 'temporal' }, nats)).toThrow(/TEMPORAL_ADDRESS is required/);
    expect(refused({ TEMPORAL_ADDRESS: 'temporal:7233' }, null)).toThrow(/NATS_URL is required/);
    expect(refused({ TEMPORAL_ADDRESS: 'temporal:7233', TEMPORAL_SWEEP_IDLE_MS: 'soon' }, nats)).toThrow(
      /TEMPORAL_SWEEP_IDLE_MS must be a non-negative integer/,
    );
    expect(refused({ TEMPORAL_ADDRESS: 'temporal:7233', TEMPORAL_SWEEP_INTERVAL_MS: '0' }, nats)).toThrow(
      /TEMPORAL_SWEEP_INTERVAL_MS must be at least 100/,
    );
  });
});
