/**
 * Where channels live: their stream positions, their history and the fan-out of publications between
 * gateway nodes. The memory engine serves one node; the Redis engine lets several nodes serve the same
 * channels, with the same positions and history (docs/design/realtime-wire-compatibility.md).
 */

export interface Publication {
  offset: number;
  data: unknown;
  /** When it was published (ms), for the history TTL. */
  at: number;
}

export interface StreamPosition {
  offset: number;
  epoch: string;
}

export interface HistoryOptions {
  size: number;
  ttlMs: number;
  /**
   * Keep history only while someone on this node follows the channel, or followed it within `ttlMs`
   * (so a subscriber cut off by a network blip still recovers). A first subscription never recovers
   * (it loads a snapshot), so a channel nobody follows needs no history: TDP's task detail channels,
   * one per task, would otherwise hold every change of every task for `ttlMs`. Memory engine only.
   */
  whileFollowed?: boolean;
}

export type HistoryResult =
  | { ok: true; publications: Publication[]; position: StreamPosition }
  /** The epoch asked for is not the stream's: its positions are gone (error 112). */
  | { ok: false; position: StreamPosition };

export interface ReadOptions {
  since?: Partial<StreamPosition>;
  /** -1 for all, 0 for none (position only). */
  limit: number;
  reverse?: boolean;
}

/** A client in a channel's presence (Centrifugo's ClientInfo on the wire). */
export interface PresenceEntry {
  user: string;
  client: string;
  conn_info?: unknown;
}

/** A message for every node (the server API's unsubscribe and disconnect reach users on all nodes, join and leave a channel's subscribers). */
export type ControlMessage =
  | { kind: 'subscribe'; user: string; channel: string; client?: string }
  | { kind: 'unsubscribe'; user: string; channel: string; client?: string }
  | { kind: 'disconnect'; user: string; code: number; reason: string; client?: string }
  /** A client joined or left a channel with join/leave on: pushed to its subscribers on every node. */
  | { kind: 'join' | 'leave'; channel: string; info: PresenceEntry };

export interface PublishOptions {
  skipHistory?: boolean;
  idempotencyKey?: string;
}

/** How long an idempotency key returns its first result (as Centrifugo). */
export const idempotencyMs = 5 * 60_000;

export interface EngineHandlers {
  /** A publication of a channel this node watches, from any node, in offset order per channel. */
  publication(channel: string, publication: Publication, epoch: string): void;
  control(message: ControlMessage): void;
}

export interface Engine {
  /** Called once by the gateway before anything else. */
  start(handlers: EngineHandlers): Promise<void>;
  /**
   * Appends to the channel's stream (unless `skipHistory`) and hands it to every node watching it. A
   * repeat of an `idempotencyKey` of the channel within 5 minutes, from any node, publishes nothing and
   * returns the first result.
   */
  publish(channel: string, data: unknown, options?: PublishOptions): Promise<StreamPosition>;
  /** Publications after `since` (ascending), or newest first with `reverse`; another epoch is refused. */
  read(channel: string, options: ReadOptions): Promise<HistoryResult>;
  /** This node starts receiving the channel's publications; resolves once they flow. */
  watch(channel: string): Promise<void>;
  unwatch(channel: string): Promise<void>;
  sendControl(message: ControlMessage): Promise<void>;
  /**
   * Adds clients to the channel's presence, or refreshes them: in the Redis engine an entry expires
   * unless its node refreshes it (so a node that died leaves nobody behind for long).
   */
  addPresence(channel: string, entries: PresenceEntry[]): Promise<void>;
  removePresence(channel: string, client: string): Promise<void>;
  /** The channel's presence on every node, by client id. */
  presence(channel: string): Promise<Record<string, PresenceEntry>>;
  close(): Promise<void>;
}

/** A history read applied to a list of retained publications (oldest first); shared by the engines. */
export function selectHistory(
  retained: Publication[],
  position: StreamPosition,
  options: ReadOptions,
): HistoryResult {
  if (options.since?.epoch && options.since.epoch !== position.epoch) return { ok: false, position };
  if (options.limit === 0) return { ok: true, publications: [], position };
  const since = options.since?.offset;
  let list = options.reverse
    ? retained.filter((p) => since === undefined || p.offset < since).reverse()
    : retained.filter((p) => since === undefined || p.offset > since);
  if (options.limit > 0) list = list.slice(0, options.limit);
  return { ok: true, publications: list, position };
}
