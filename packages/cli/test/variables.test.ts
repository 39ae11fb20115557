/** What `tdp server` and `tdp dev` say at start about `TDP_*` variables nothing reads. */
import { describe, expect, it } from 'vitest';
import { reportUnknownVariables } from '../src/variables.ts';

describe('the unknown-variable report', () => {
  it('warns once, naming each variable no setting and no program of the CLI reads', () => {
    const warnings: { details: object; message: string }[] = [];
    const logger = { warn: (details: object, message: string) => warnings.push({ details, message }) };
    const unknown = reportUnknownVariables(
      {
        TDP_CALLBACK_TIMOUT_MS: '2500',
        TDP_RETRY_UNPLACABLE_MS: '100',
        TDP_CALLBACK_TIMEOUT_MS: '2500',
        TDP_WORKER_KEY: 'tdpw_x',
        TDP_HOME: '/tmp/tdp',
        HOME: '/root',
      },
      logger,
    );
    expect(unknown).toEqual(['TDP_CALLBACK_TIMOUT_MS', 'TDP_RETRY_UNPLACABLE_MS']);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.message).toContain('TDP_CALLBACK_TIMOUT_MS, TDP_RETRY_UNPLACABLE_MS');
    expect(warnings[0]!.details).toEqual({ variables: unknown });
  });

  it('says nothing when every variable is read', () => {
    const warnings: string[] = [];
    reportUnknownVariables(
      { TDP_PORT: '8080', TDP_WORKER_NAME: 'w1', TDP_OPERATOR_TOKEN: 'tdpo_x' },
      { warn: (_d, m) => warnings.push(m) },
    );
    expect(warnings).toEqual([]);
  });
});
