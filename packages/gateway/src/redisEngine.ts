/**
 * The Redis engine: several gateway nodes serve the same channels. Per channel, Redis keeps the stream
 * position (a hash: epoch and top offset) and the history (a Redis stream, bounded by size, each entry
 * stamped so the TTL is applied on read); a Lua script numbers, appends and fans a publication out over
 * Redis pub/sub in one step, so every node sees a channel's publications in offset order. Nodes
 * subscribe to the pub/sub channels of the channels their clients follow.
 *
 * Presence is cluster-wide, kept as Centrifugo's Redis presence is: per channel a hash (client id →
 * client info) and a sorted set of each entry's expiry; a node refreshes its clients' entries while they
 * stay (Connections, every `presenceUpdateIntervalMs`), and a read first drops the entries past their
 * expiry, so the clients of a node that died disappear within `presenceTtlMs`.
 *
 * When the pub/sub connection drops, the publications of that moment are lost to this node: it tells
 * the gateway (every watched channel is "out of step"), whose clients then recover from the history.
 *
 * Redis may be found through Sentinel (redisConnection.ts). On failover both connections follow it to
 * the promoted replica, and the pub/sub one takes the path of any drop above. Replication is
 * asynchronous, so the replica may lack the last publications, and offsets would then be handed out
 * again: each channel's position records the Redis server (`run_id`) that wrote it, and one written by
 * another server gets a new epoch and loses its history, so clients reload a snapshot rather than
 * "recover" past publications that no longer exist.
 */
import { Redis } from 'ioredis';
import {
  type ControlMessage,
  type Engine,
  type EngineHandlers,
  type HistoryOptions,
  type HistoryResult,
  idempotencyMs,
  type PresenceEntry,
  type Publication,
  type PublishOptions,
  type ReadOptions,
  type StreamPosition,
  selectHistory,
} from './engine.ts';
import { newEpoch } from './memoryEngine.ts';
import { connectionOptions, isSentinelTarget, type RedisTarget } from './redisConnection.ts';

/** Where Redis is (`url`, or `sentinels` and `masterName`) and how the engine keeps channels there. */
export type RedisEngineOptions = RedisTarget & RedisEngineSettings;

export interface RedisEngineSettings {
  /** Key prefix, so that several deployments (or tests) share one Redis. */
  prefix?: string;
  history: (channel: string) => HistoryOptions;
  /** How long a channel's position outlives its last publication (Centrifugo: history_meta_ttl). */
  metaTtlMs?: number;
  now?: () => number;
  /** The pub/sub connection came back after a drop: what was published meanwhile did not arrive. */
  onResync?: () => void;
  /** How long a presence entry lasts unless refreshed (Centrifugo's presence_ttl, 60 s). */
  presenceTtlMs?: number;
}

// KEYS: presence hash, expiry set. ARGV: expire at (ms), key ttl (ms), then client id and info pairs.
const addPresenceScript = `
for i = 3, #ARGV, 2 do
  redis.call('hset', KEYS[1], ARGV[i], ARGV[i + 1])
  redis.call('zadd', KEYS[2], ARGV[1], ARGV[i])
end
redis.call('pexpire', KEYS[1], ARGV[2])
redis.call('pexpire', KEYS[2], ARGV[2])
`;

// KEYS: presence hash, expiry set. ARGV: now (ms). Drops the expired entries, returns the rest (HGETALL).
const presenceScript = `
local expired = redis.call('zrangebyscore', KEYS[2], '-inf', ARGV[1])
if #expired > 0 then
  redis.call('zremrangebyscore', KEYS[2], '-inf', ARGV[1])
  for _, client in ipairs(expired) do redis.call('hdel', KEYS[1], client) end
end
return redis.call('hgetall', KEYS[1])
`;

// KEYS[1] and KEYS[2] of the scripts below: the channel's meta hash ('e' epoch, 's' top offset, 'r' the
// run_id of the Redis server that wrote it) and its history stream. `channelEpoch` returns the epoch,
// made when the channel has none, and made anew (the history dropped) when another server wrote the
// position: a replica promoted by Sentinel, or a restarted Redis, may lack the last publications.
// A position without 'r' (written before it was recorded) is adopted as it is.
const epochOfChannel = `
local run = string.match(redis.call('info', 'server'), 'run_id:(%x+)')
local function channelEpoch(newEpoch)
  local meta = redis.call('hmget', KEYS[1], 'e', 'r')
  if not meta[1] then
    redis.call('hset', KEYS[1], 'e', newEpoch, 's', 0, 'r', run)
    return newEpoch, true
  end
  if meta[2] == run then return meta[1], false end
  if meta[2] then
    redis.call('del', KEYS[2])
    redis.call('hset', KEYS[1], 'e', newEpoch, 'r', run)
    return newEpoch, true
  end
  redis.call('hset', KEYS[1], 'r', run)
  return meta[1], false
end
`;

// KEYS: meta hash, history stream, pub/sub channel, idempotency result. ARGV: data, size, history ttl
// (ms), meta ttl (ms), a new epoch (used if the channel needs one), now (ms), skip history ("1"), how
// long the idempotency result is kept (ms; "" without a key).
// Returns {offset, epoch}, the first publish's for a repeated key. The message fanned out is
// "<offset>:<epoch>:<at>:<data>".
const publishScript = `${epochOfChannel}
if ARGV[8] ~= '' then
  local known = redis.call('get', KEYS[4])
  if known then
    local offset, epoch = string.match(known, '^(%d+):(.*)$')
    return {tonumber(offset), epoch}
  end
end
local epoch = channelEpoch(ARGV[5])
local offset = 0
if ARGV[7] ~= '1' then
  offset = redis.call('hincrby', KEYS[1], 's', 1)
  redis.call('xadd', KEYS[2], 'MAXLEN', ARGV[2], '*', 'o', offset, 't', ARGV[6], 'd', ARGV[1])
  redis.call('pexpire', KEYS[2], ARGV[3])
end
redis.call('pexpire', KEYS[1], ARGV[4])
redis.call('publish', KEYS[3], offset .. ':' .. epoch .. ':' .. ARGV[6] .. ':' .. ARGV[1])
if ARGV[8] ~= '' then redis.call('set', KEYS[4], offset .. ':' .. epoch, 'PX', ARGV[8]) end
return {offset, epoch}
`;

// KEYS: meta hash, history stream. ARGV: a new epoch, meta ttl (ms), "1" to include the entries (a
// subscribe without recovery only needs the position). Returns {offset, epoch, entries}.
const readScript = `${epochOfChannel}
local epoch, made = channelEpoch(ARGV[1])
if made then redis.call('pexpire', KEYS[1], ARGV[2]) end
local offset = redis.call('hget', KEYS[1], 's')
if ARGV[3] ~= '1' then return {tonumber(offset), epoch, {}} end
return {tonumber(offset), epoch, redis.call('xrange', KEYS[2], '-', '+')}
`;

type Scripted = Redis & {
  tdpPublish(...args: (string | number)[]): Promise<[number, string]>;
  tdpRead(...args: (string | number)[]): Promise<[number, string, [string, string[]][]]>;
  tdpAddPresence(...args: (string | number)[]): Promise<null>;
  tdpPresence(...args: (string | number)[]): Promise<string[]>;
};

export class RedisEngine implements Engine {
  private readonly commands: Scripted;
  private readonly subscriber: Redis;
  private readonly prefix: string;
  private handlers: EngineHandlers | null = null;
  private readonly now: () => number;
  private droppedSince = false;
  private closing = false;
  /** The Redis channels this node follows (its watched channels' and the control channel). */
  private readonly followed = new Set<string>();

  constructor(private readonly options: RedisEngineOptions) {
    this.prefix = options.prefix ?? 'tdp.gateway';
    this.now = options.now ?? Date.now;
    // Both connections through Sentinel when it names the master: after a failover both move.
    const connect = () =>
      isSentinelTarget(options)
        ? new Redis(connectionOptions(options))
        : new Redis(options.url, connectionOptions(options));
    this.commands = connect() as Scripted;
    this.subscriber = connect();
    this.commands.defineCommand('tdpPublish', { numberOfKeys: 4, lua: publishScript });
    this.commands.defineCommand('tdpRead', { numberOfKeys: 2, lua: readScript });
    this.commands.defineCommand('tdpAddPresence', { numberOfKeys: 2, lua: addPresenceScript });
    this.commands.defineCommand('tdpPresence', { numberOfKeys: 2, lua: presenceScript });
    // Errors surface on the commands that fail; a connection error alone is not worth a crash.
    this.commands.on('error', () => {});
    this.subscriber.on('error', () => {});
    // ioredis gives a connection up for good when a reconnect's set-up fails in a way it does not
    // retry (a Sentinel lookup cut short): connect again, as a node must never stay off Redis.
    for (const connection of [this.commands, this.subscriber])
      connection.on('end', () => {
        if (this.closing) return;
        this.droppedSince = true;
        setTimeout(() => {
          if (!this.closing) connection.connect().catch(() => {});
        }, 1_000).unref();
      });
  }

  private key(
    kind: 'meta' | 'history' | 'pub' | 'presence.data' | 'presence.expire' | 'idempotency',
    channel: string,
  ): string {
    return `${this.prefix}.${kind}.${channel}`;
  }

  private get controlChannel(): string {
    return `${this.prefix}.control`;
  }

  async start(handlers: EngineHandlers): Promise<void> {
    this.handlers = handlers;
    await Promise.all([this.commands.connect(), this.subscriber.connect()]);
    const pubPrefix = `${this.prefix}.pub.`;
    this.subscriber.on('message', (redisChannel: string, message: string) => {
      if (redisChannel === this.controlChannel) {
        this.handlers?.control(JSON.parse(message) as ControlMessage);
        return;
      }
      if (!redisChannel.startsWith(pubPrefix)) return;
      const channel = redisChannel.slice(pubPrefix.length);
      const first = message.indexOf(':');
      const second = message.indexOf(':', first + 1);
      const third = message.indexOf(':', second + 1);
      const publication: Publication = {
        offset: Number(message.slice(0, first)),
        at: Number(message.slice(second + 1, third)),
        data: JSON.parse(message.slice(third + 1)),
      };
      this.handlers?.publication(channel, publication, message.slice(first + 1, second));
    });
    this.subscriber.on('close', () => {
      this.droppedSince = true;
    });
    this.subscriber.on('ready', () => {
      if (!this.droppedSince) return;
      this.droppedSince = false;
      // Subscribed again before the clients are told to recover: ioredis's own re-subscription comes
      // after `ready`, and none comes after a connection it had given up. (SUBSCRIBE twice is harmless.)
      const channels = [...this.followed];
      (channels.length > 0 ? this.subscriber.subscribe(...channels) : Promise.resolve())
        .catch(() => {})
        .finally(() => this.options.onResync?.());
    });
    this.followed.add(this.controlChannel);
    await this.subscriber.subscribe(this.controlChannel);
  }

  async publish(channel: string, data: unknown, options: PublishOptions = {}): Promise<StreamPosition> {
    const history = this.options.history(channel);
    const key = options.idempotencyKey;
    const [offset, epoch] = await this.commands.tdpPublish(
      this.key('meta', channel),
      this.key('history', channel),
      this.key('pub', channel),
      // In Redis, so that a publish repeated through another node is recognised too.
      this.key('idempotency', key ? `${channel}.${key}` : channel),
      JSON.stringify(data),
      history.size,
      history.ttlMs,
      Math.max(this.options.metaTtlMs ?? 30 * 24 * 3600_000, history.ttlMs),
      newEpoch(),
      this.now(),
      options.skipHistory ? '1' : '0',
      key ? idempotencyMs : '',
    );
    return { offset: Number(offset), epoch };
  }

  async read(channel: string, options: ReadOptions): Promise<HistoryResult> {
    const [offset, epoch, entries] = await this.commands.tdpRead(
      this.key('meta', channel),
      this.key('history', channel),
      newEpoch(),
      this.options.metaTtlMs ?? 30 * 24 * 3600_000,
      options.limit === 0 ? '0' : '1',
    );
    const oldest = this.now() - this.options.history(channel).ttlMs;
    const retained: Publication[] = [];
    for (const [, fields] of entries) {
      const entry: Record<string, string> = {};
      for (let i = 0; i + 1 < fields.length; i += 2) entry[fields[i]!] = fields[i + 1]!;
      const at = Number(entry.t);
      if (at >= oldest) retained.push({ offset: Number(entry.o), at, data: JSON.parse(entry.d ?? 'null') });
    }
    return selectHistory(retained, { offset: Number(offset), epoch }, options);
  }

  async watch(channel: string): Promise<void> {
    const key = this.key('pub', channel);
    this.followed.add(key);
    await this.subscriber.subscribe(key);
  }

  async unwatch(channel: string): Promise<void> {
    const key = this.key('pub', channel);
    this.followed.delete(key);
    await this.subscriber.unsubscribe(key);
  }

  async sendControl(message: ControlMessage): Promise<void> {
    await this.commands.publish(this.controlChannel, JSON.stringify(message));
  }

  async addPresence(channel: string, entries: PresenceEntry[]): Promise<void> {
    if (entries.length === 0) return;
    const ttlMs = this.options.presenceTtlMs ?? 60_000;
    await this.commands.tdpAddPresence(
      this.key('presence.data', channel),
      this.key('presence.expire', channel),
      this.now() + ttlMs,
      ttlMs,
      ...entries.flatMap((entry) => [entry.client, JSON.stringify(entry)]),
    );
  }

  async removePresence(channel: string, client: string): Promise<void> {
    await this.commands
      .multi()
      .hdel(this.key('presence.data', channel), client)
      .zrem(this.key('presence.expire', channel), client)
      .exec();
  }

  async presence(channel: string): Promise<Record<string, PresenceEntry>> {
    const flat = await this.commands.tdpPresence(
      this.key('presence.data', channel),
      this.key('presence.expire', channel),
      this.now(),
    );
    const entries: Record<string, PresenceEntry> = {};
    for (let i = 0; i + 1 < flat.length; i += 2)
      entries[flat[i]!] = JSON.parse(flat[i + 1]!) as PresenceEntry;
    return entries;
  }

  async close(): Promise<void> {
    this.closing = true;
    this.subscriber.disconnect();
    this.commands.disconnect();
  }
}
