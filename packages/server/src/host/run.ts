/**
 * Starts a list of features on a host and stops them in reverse: each feature starts in list order
 * (what it needs from an earlier one is there), then every feature's routes are registered, the server
 * listens, and the loops start. A stop closes the HTTP listener (in-flight requests finish; the
 * features' close hooks run), stops every loop, then each feature's own resources, last to first, and
 * ends the pools.
 */
import type { TObject } from 'typebox';
import type { Feature, StartedFeature } from './feature.ts';
import type { Host } from './host.ts';

interface Running extends StartedFeature {
  name: string;
}

export interface RunningFeatures {
  /** The URL this server answers at (a port of 0 is the one it got). */
  url: string;
  stop(): Promise<void>;
}

export async function runFeatures(
  host: Host,
  features: readonly Feature<TObject>[],
  settings: Record<string, unknown>,
): Promise<RunningFeatures> {
  const running: Running[] = [];
  try {
    for (const feature of features)
      running.push({ name: feature.name, ...(await feature.start(host, settings as never)) });
    for (const { routes } of running) if (routes) await host.app.register(routes);
    const loops = running.flatMap((feature) => feature.loops ?? []);
    for (const loop of loops) host.loops.add(loop);
    host.health.loops = loops;
    await host.app.listen({ host: host.settings.host, port: host.settings.port });
    for (const loop of loops) loop.start();
  } catch (error) {
    await stopAll(host, running).catch(() => {});
    throw error;
  }
  const address = host.app.server.address();
  const port = typeof address === 'object' && address ? address.port : host.settings.port;
  const listening = host.settings.host === '0.0.0.0' ? '127.0.0.1' : host.settings.host;
  let stopping: Promise<void> | null = null;
  return {
    url: `http://${listening}:${port}`,
    stop: () => {
      stopping ??= stopAll(host, running);
      return stopping;
    },
  };
}

async function stopAll(host: Host, running: Running[]): Promise<void> {
  await host.app.close();
  const lastFirst = [...running].reverse();
  for (const feature of lastFirst) await Promise.all((feature.loops ?? []).map((loop) => loop.stop()));
  for (const feature of lastFirst) {
    await feature
      .stop?.()
      .catch((error) => host.logger.warn({ err: error, feature: feature.name }, 'stop failed'));
    host.logger.debug({ feature: feature.name }, 'feature stopped');
  }
  await host.close();
}
