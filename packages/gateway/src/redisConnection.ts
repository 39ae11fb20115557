/**
 * Where the Redis engine's Redis is: one URL, or a master that Redis Sentinel names (and moves on
 * failover). Both of the engine's connections, commands and pub/sub, are made from the same target, so
 * after a failover both follow Sentinel to the promoted replica.
 */
import type { RedisOptions } from 'ioredis';

export interface RedisSentinelAddress {
  host: string;
  port: number;
}

/** A master found through Sentinel: the sentinels to ask, the name they know it by, and credentials. */
export interface RedisSentinelTarget {
  sentinels: RedisSentinelAddress[];
  masterName: string;
  /** The master's (and its replicas') ACL user and password. */
  username?: string;
  password?: string;
  /** The sentinels' own ACL user and password (`requirepass` of sentinel.conf). */
  sentinelUsername?: string;
  sentinelPassword?: string;
}

/** One Redis by URL (`redis://[user:password@]host:port[/db]`, or `rediss://`). */
export interface RedisUrlTarget {
  url: string;
  /** Used when the URL names none (Centrifugo's `engine.redis.user` and `password`). */
  username?: string;
  password?: string;
}

export type RedisTarget = RedisUrlTarget | RedisSentinelTarget;

export const isSentinelTarget = (target: RedisTarget): target is RedisSentinelTarget =>
  'sentinels' in target && Array.isArray(target.sentinels);

/** A bad sentinel list (or master name); the message names what is wrong. */
export class RedisTargetError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RedisTargetError';
  }
}

/**
 * `host:port` (or `[v6]:port`) addresses, comma-separated or as a list, into sentinel addresses; a
 * missing or bad port, or an empty entry, throws RedisTargetError naming it.
 */
export function parseSentinelAddresses(value: string | string[]): RedisSentinelAddress[] {
  const items = (Array.isArray(value) ? value : value.split(',')).map((item) => item.trim());
  if (items.length === 0 || items.every((item) => item === ''))
    throw new RedisTargetError('no sentinel address (host:port, comma-separated)');
  return items.map((item) => {
    const match = /^(?:\[([^\]]+)\]|([^:\s[\]]+)):(\d{1,5})$/.exec(item);
    const port = match ? Number(match[3]) : Number.NaN;
    if (!match || port < 1 || port > 65_535)
      throw new RedisTargetError(`"${item}" is not a sentinel address (host:port, e.g. 127.0.0.1:26379)`);
    return { host: (match[1] ?? match[2])!, port };
  });
}

/** A Sentinel master name as sentinel.conf's `sentinel monitor <name>` accepts it. */
export function checkMasterName(name: string): string {
  if (!/^[A-Za-z0-9._-]+$/.test(name))
    throw new RedisTargetError(`"${name}" is not a Sentinel master name (letters, digits, ".", "_", "-")`);
  return name;
}

/**
 * ioredis options of one engine connection. Commands fail fast while Redis is away (a subscribe is
 * answered with a temporary error the SDK retries; the server's relay publishes again later), rather
 * than waiting in memory for as long as a failover takes.
 */
export function connectionOptions(target: RedisTarget): RedisOptions {
  const common: RedisOptions = {
    lazyConnect: true,
    enableOfflineQueue: true,
    maxRetriesPerRequest: 2,
    // Reconnect soon: until Sentinel has promoted a replica the old master's address is refused.
    retryStrategy: (times) => Math.min(times * 100, 1_000),
    // A master demoted while connected (a failover it survived) answers writes with READONLY:
    // reconnect, which asks Sentinel for the new master, and send the command again there.
    reconnectOnError: (error) => (error.message.startsWith('READONLY') ? 2 : false),
  };
  const credentials = {
    ...(target.username ? { username: target.username } : {}),
    ...(target.password ? { password: target.password } : {}),
  };
  if (!isSentinelTarget(target)) return { ...common, ...credentials };
  return {
    ...common,
    ...credentials,
    sentinels: target.sentinels,
    name: checkMasterName(target.masterName),
    role: 'master',
    ...(target.sentinelUsername ? { sentinelUsername: target.sentinelUsername } : {}),
    ...(target.sentinelPassword ? { sentinelPassword: target.sentinelPassword } : {}),
    // Every sentinel down: ask again every second rather than give up.
    sentinelRetryStrategy: (times) => Math.min(times * 100, 1_000),
    // No `failoverDetector`: its `+switch-master` cuts short a reconnect already asking the sentinels,
    // and ioredis then gives the connection up for good (a node that never came back in the
    // redis-failover drill). A master demoted without dying is left at its first write (READONLY,
    // above); a subscriber on it still hears what the new master publishes, through replication.
  };
}
