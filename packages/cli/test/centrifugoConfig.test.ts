/**
 * `tdp centrifugo-config`: the Centrifugo v6 config TDP needs, from TDP's settings. Centrifugo itself
 * (where scripts/services.sh built it) checks it strictly: no key it does not know.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { centrifugoConfig, defaultSettings } from '@tdp/server';
import { describe, expect, it } from 'vitest';
import { newTokenSecret, requireCentrifugo } from '../../../test/centrifugo.ts';

const root = new URL('../../../', import.meta.url).pathname;
const run = promisify(execFile);
const binary = requireCentrifugo();

async function centrifugoConfigCommand(env: Record<string, string>) {
  try {
    const { stdout } = await run(
      process.execPath,
      ['--conditions=@tdp/source', '--import', 'tsx', 'packages/cli/src/main.ts', 'centrifugo-config'],
      { cwd: root, env: { PATH: process.env.PATH ?? '', ...env } },
    );
    return { code: 0, stdout, stderr: '' };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

describe('tdp centrifugo-config', () => {
  const secret = newTokenSecret();

  it('prints the config centrifugoConfig makes from the variables, and Centrifugo accepts it strictly', async () => {
    const printed = await centrifugoConfigCommand({
      TDP_REALTIME_TOKEN_SECRET: secret,
      CENTRIFUGO_API_KEY: 'the-api-key',
      CENTRIFUGO_ALLOWED_ORIGINS: 'https://app.example.com, https://admin.example.com',
      CENTRIFUGO_REDIS_URL: 'redis://127.0.0.1:6379',
    });
    expect(printed.code).toBe(0);
    const config = JSON.parse(printed.stdout);
    expect(config).toEqual(
      centrifugoConfig({
        tokenSecret: secret,
        apiKey: 'the-api-key',
        realtimeHistory: defaultSettings.realtimeHistory,
        allowedOrigins: ['https://app.example.com', 'https://admin.example.com'],
        redis: { url: 'redis://127.0.0.1:6379', prefix: 'centrifugo' },
      }),
    );
    if (!binary) return;
    const directory = await mkdtemp(join(tmpdir(), 'tdp-centrifugo-config-'));
    try {
      await writeFile(join(directory, 'config.json'), printed.stdout);
      const checked = await run(binary, [
        'checkconfig',
        '--strict',
        '--config',
        join(directory, 'config.json'),
      ]);
      expect(checked.stderr).toBe('');
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  });

  it("lets the dashboard connect: TDP_PUBLIC_URL's origin joins the allowed origins", async () => {
    const printed = await centrifugoConfigCommand({
      TDP_REALTIME_TOKEN_SECRET: secret,
      CENTRIFUGO_API_KEY: 'the-api-key',
      CENTRIFUGO_ALLOWED_ORIGINS: 'https://app.example.com',
      TDP_PUBLIC_URL: 'https://tdp.example.com/some/path',
    });
    expect(printed.code).toBe(0);
    expect(JSON.parse(printed.stdout).client.allowed_origins).toEqual([
      'https://app.example.com',
      'https://tdp.example.com',
    ]);
    const alone = await centrifugoConfigCommand({
      TDP_REALTIME_TOKEN_SECRET: secret,
      CENTRIFUGO_API_KEY: 'the-api-key',
      TDP_PUBLIC_URL: 'https://tdp.example.com',
    });
    expect(JSON.parse(alone.stdout).client.allowed_origins).toEqual(['https://tdp.example.com']);
  });

  it('refuses a short secret and a missing API key, naming the variable, not the value', async () => {
    const short = await centrifugoConfigCommand({
      TDP_REALTIME_TOKEN_SECRET: 'short-secret',
      CENTRIFUGO_API_KEY: 'k',
    });
    expect(short.code).toBe(1);
    expect(short.stderr).toContain('TDP_REALTIME_TOKEN_SECRET must be at least 32 bytes');
    expect(short.stderr).not.toContain('short-secret');
    const noKey = await centrifugoConfigCommand({ TDP_REALTIME_TOKEN_SECRET: secret });
    expect(noKey.code).toBe(1);
    expect(noKey.stderr).toContain('CENTRIFUGO_API_KEY is required');
  });
});
