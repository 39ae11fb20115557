/**
 * Centrifugo's HTTP server API (`POST /api/<method>`, docs/design/realtime-wire-compatibility.md):
 * publish, broadcast, subscribe, unsubscribe, disconnect, history, info and batch, behind the API key.
 */
import { randomUUID, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Channels } from './channels.ts';
import type { Engine, PublishOptions, StreamPosition } from './engine.ts';
import { readJsonPost, requestUrl } from './http.ts';
import { channelOptions } from './namespaces.ts';
import type { GatewayOptions } from './options.ts';
import { closes, type HistoryRequest, replyErrors, version } from './protocol.ts';

/** The largest request body the API reads. */
const bodyLimit = 1024 * 1024;

type Method = (body: Record<string, unknown>) => Promise<Record<string, unknown>>;

export interface ServerApiDependencies {
  options: Pick<GatewayOptions, 'apiKey' | 'name' | 'channels' | 'jsonMaxDepth'>;
  engine: Engine;
  channels: Channels;
  /** The gateway's publish (it waits for the engine to be running). */
  publish(channel: string, data: unknown, options: PublishOptions): Promise<StreamPosition>;
  /** This node's connections and channels, for `info`. */
  stats(): Record<string, number>;
}

export class ServerApi {
  private readonly nodeId = randomUUID();
  private readonly startedAt = Date.now();

  constructor(private readonly deps: ServerApiDependencies) {}

  /** Answers one API request: `method` is the path after `/api/`. */
  async serve(request: IncomingMessage, response: ServerResponse, method: string): Promise<void> {
    const expected = this.deps.options.apiKey;
    if (!expected) {
      response.writeHead(404).end();
      return;
    }
    const url = requestUrl(request);
    const authorization = request.headers.authorization ?? '';
    const given =
      (request.headers['x-api-key'] as string | undefined) ??
      (authorization.toLowerCase().startsWith('apikey ') ? authorization.slice(7).trim() : undefined) ??
      url.searchParams.get('api_key') ??
      '';
    if (!sameSecret(given, expected)) {
      response.writeHead(401).end();
      return;
    }
    const body = await readJsonPost(request, response, bodyLimit, this.deps.options.jsonMaxDepth);
    if (!body) return;
    const handler = this.method(method);
    if (!handler) {
      response.writeHead(404).end();
      return;
    }
    const outcome = await handler(body).catch(() => ({ error: replyErrors.internal }));
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(outcome));
  }

  /** The API method of that name; only the API's own (`toString` is an object's, not a method). */
  private method(name: string | undefined): Method | undefined {
    return name !== undefined && Object.hasOwn(this.methods, name) ? this.methods[name] : undefined;
  }

  /** The API's methods: `{result}` or `{error}`. */
  private readonly methods: Record<string, Method> = {
    publish: async (body) => {
      if (typeof body.channel !== 'string' || body.channel === '' || body.data === undefined)
        return { error: replyErrors.badRequest };
      return { result: await this.publish(body.channel, body) };
    },
    broadcast: async (body) => {
      if (!Array.isArray(body.channels) || body.data === undefined) return { error: replyErrors.badRequest };
      const responses = [];
      for (const channel of body.channels as unknown[]) {
        if (typeof channel !== 'string' || channel === '') responses.push({ error: replyErrors.badRequest });
        else
          responses.push(
            await this.publish(channel, body).then(
              (result) => ({ result }),
              () => ({ error: replyErrors.internal }),
            ),
          );
      }
      return { result: { responses } };
    },
    subscribe: (body) => this.membership('subscribe', body),
    unsubscribe: (body) => this.membership('unsubscribe', body),
    disconnect: async (body) => {
      if (typeof body.user !== 'string') return { error: replyErrors.badRequest };
      const given = body.disconnect as { code?: number; reason?: string } | undefined;
      await this.deps.engine.sendControl({
        kind: 'disconnect',
        user: body.user,
        code: given?.code ?? closes.forceDisconnect[0],
        reason: given?.reason ?? closes.forceDisconnect[1],
        ...(typeof body.client === 'string' ? { client: body.client } : {}),
      });
      return { result: {} };
    },
    presence: (body) => this.presence(body, 'presence'),
    presence_stats: (body) => this.presence(body, 'presence_stats'),
    history: async (body) => {
      if (typeof body.channel !== 'string' || body.channel === '') return { error: replyErrors.badRequest };
      return this.deps.channels.history(body as HistoryRequest, Number.MAX_SAFE_INTEGER);
    },
    /** Commands in order (or together with `parallel`), answered as `{replies: [{<method>: result} | {error}]}`. */
    batch: async (body) => {
      if (!Array.isArray(body.commands)) return { error: replyErrors.badRequest };
      const run = async (command: unknown): Promise<Record<string, unknown>> => {
        const [method, params] = Object.entries((command ?? {}) as Record<string, unknown>)[0] ?? [];
        const handler = method && method !== 'batch' ? this.method(method) : undefined;
        if (!handler) return { error: replyErrors.methodNotFound };
        if (typeof params !== 'object' || params === null) return { error: replyErrors.badRequest };
        const outcome = await handler(params as Record<string, unknown>).catch(() => ({
          error: replyErrors.internal,
        }));
        return 'error' in outcome ? { error: outcome.error } : { [method!]: outcome.result };
      };
      const commands = body.commands as unknown[];
      if (body.parallel === true) return { replies: await Promise.all(commands.map(run)) };
      const replies = [];
      for (const command of commands) replies.push(await run(command));
      return { replies };
    },
    info: async () => ({
      result: {
        nodes: [
          {
            uid: this.nodeId,
            name: this.deps.options.name ?? 'tdp-gateway',
            version,
            ...this.deps.stats(),
            uptime: Math.floor((Date.now() - this.startedAt) / 1000),
          },
        ],
      },
    }),
  };

  /** A channel's presence on every node, or its counts; 108 where the namespace keeps none. */
  private async presence(
    body: Record<string, unknown>,
    kind: 'presence' | 'presence_stats',
  ): Promise<Record<string, unknown>> {
    if (typeof body.channel !== 'string' || body.channel === '') return { error: replyErrors.badRequest };
    const namespace = channelOptions(this.deps.options, body.channel);
    if (!namespace) return { error: replyErrors.unknownChannel };
    if (!namespace.presence) return { error: replyErrors.notAvailable };
    const present = await this.deps.channels.presence(body.channel);
    if (kind === 'presence') return { result: { presence: present } };
    const entries = Object.values(present);
    return {
      result: { num_clients: entries.length, num_users: new Set(entries.map((e) => e.user)).size },
    };
  }

  /** `subscribe` / `unsubscribe`: a user's connections on every node (or one client). */
  private async membership(
    kind: 'subscribe' | 'unsubscribe',
    body: Record<string, unknown>,
  ): Promise<Record<string, unknown>> {
    if (typeof body.user !== 'string' || typeof body.channel !== 'string' || body.channel === '')
      return { error: replyErrors.badRequest };
    await this.deps.engine.sendControl({
      kind,
      user: body.user,
      channel: body.channel,
      ...(typeof body.client === 'string' ? { client: body.client } : {}),
    });
    return { result: {} };
  }

  private publish(channel: string, body: Record<string, unknown>): Promise<StreamPosition> {
    return this.deps.publish(channel, body.data, {
      skipHistory: body.skip_history === true,
      ...(typeof body.idempotency_key === 'string' ? { idempotencyKey: body.idempotency_key } : {}),
    });
  }
}

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}
