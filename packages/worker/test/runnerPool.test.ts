/** What a capability runner process is started with: the worker's loaders, none of its credentials. */
import { describe, expect, it } from 'vitest';
import { runnerEnv, runnerExecArgv } from '../src/isolation/runnerPool.ts';

describe('a capability runner', () => {
  it('gets none of the worker’s credentials in its environment', () => {
    const env = runnerEnv({
      PATH: '/usr/bin',
      TDP_WORKER_KEY: 'tdpw_secret',
      TDP_ADMIN_TOKEN: 'admin',
      TDP_SECRETS_KEY: 'k',
      TDP_DB_PASSWORD: 'p',
      DATABASE_URL: 'postgres://u:p@127.0.0.1/db',
      TDP_WORKER_DB: '.tdp/worker.db',
      IMAGE_SERVICE_URL: 'https://images.example',
    });
    expect(env).toEqual({
      PATH: '/usr/bin',
      TDP_WORKER_DB: '.tdp/worker.db',
      IMAGE_SERVICE_URL: 'https://images.example',
    });
  });

  it('keeps the worker’s module loaders and conditions, and nothing else of its flags', () => {
    expect(
      runnerExecArgv(
        [
          '--conditions=@tdp/source',
          '--import',
          'tsx',
          '--inspect=9229',
          '--max-old-space-size=8000',
          '-r',
          'x',
        ],
        true,
      ),
    ).toEqual(['--conditions=@tdp/source', '--import', 'tsx', '-r', 'x']);
    // From TypeScript sources the runner needs tsx, even when the worker was started without it.
    expect(runnerExecArgv([], true)).toEqual(['--conditions=@tdp/source', '--import', 'tsx']);
    expect(runnerExecArgv(['--enable-source-maps'], false)).toEqual([]);
  });
});
