/** Whether the test Redis answers; under CI a missing Redis is a failure, not a reason to skip. */
import { Redis } from 'ioredis';

export const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

export async function requireRedis(): Promise<boolean> {
  const probe = new Redis(redisUrl, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  probe.on('error', () => {});
  let available = false;
  try {
    await probe.connect();
    await probe.ping();
    available = true;
  } catch {
    available = false;
  } finally {
    probe.disconnect();
  }
  if (!available && process.env.CI)
    throw new Error(`Redis is required under CI but ${redisUrl} does not answer`);
  return available;
}
