/**
 * A realtime gateway that speaks Centrifugo's JSON client protocol, so that the `centrifuge` SDK
 * connects to it unchanged and Centrifugo can take its place (docs/design/realtime-wire-compatibility.md):
 * WebSocket and unidirectional SSE clients, connection and subscription JWTs (HMAC, or RS256/ES256 from
 * a JWKS URL), server-side subscriptions, publications with offsets and epochs, history and recovery,
 * token refresh and expiry, ping/pong, and Centrifugo's HTTP server API. Channels live in an engine:
 * memory for one node, Redis for several.
 *
 * This class only composes the parts: tokens.ts, session.ts and connections.ts (the sessions of this
 * node, whose network connections all send through sendQueue.ts), commands.ts (the protocol),
 * channels.ts (history, recovery, delivery, presence), control.ts (messages between nodes),
 * webSocketTransport.ts, sseTransport.ts and emulationTransport.ts, origins.ts, serverApi.ts and
 * internalClient.ts.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { Channels } from './channels.ts';
import { Commands } from './commands.ts';
import { Connections } from './connections.ts';
import { applyControl } from './control.ts';
import { EmulationTransport } from './emulationTransport.ts';
import type { Engine, PublishOptions, StreamPosition } from './engine.ts';
import { requestUrl } from './http.ts';
import { type InternalClient, type InternalClientHandlers, openInternalClient } from './internalClient.ts';
import { MemoryEngine } from './memoryEngine.ts';
import { historyFromNamespaces } from './namespaces.ts';
import type { GatewayOptions } from './options.ts';
import { admitHttp, type OriginCheck, originCheck } from './origins.ts';
import { ServerApi } from './serverApi.ts';
import { SseTransport } from './sseTransport.ts';
import { TokenVerifier } from './tokens.ts';
import { WebSocketTransport } from './webSocketTransport.ts';

export type { InternalClient } from './internalClient.ts';
export type { GatewayOptions } from './options.ts';

/** The HTTP paths of client connections (an origin check applies to them). */
const clientPaths = new Set([
  '/connection/uni_sse',
  '/connection/sse',
  '/connection/http_stream',
  '/emulation',
]);

export class Gateway {
  readonly engine: Engine;
  /** Resolves once the engine is running (publications before it wait for it). */
  readonly ready: Promise<void>;
  private readonly channels: Channels;
  private readonly connections: Connections;
  private readonly webSocket: WebSocketTransport;
  private readonly sse: SseTransport;
  private readonly emulation: EmulationTransport;
  private readonly api: ServerApi;
  private readonly originAllowed: OriginCheck;

  constructor(private readonly options: GatewayOptions) {
    const tokens = new TokenVerifier(options);
    this.engine =
      options.engine ??
      new MemoryEngine(
        options.history ??
          (options.channels ? historyFromNamespaces(options) : () => ({ size: 100, ttlMs: 600_000 })),
        options.now,
      );
    this.channels = new Channels(this.engine);
    this.ready = this.engine.start({
      publication: (channel, publication, epoch) => this.channels.deliver(channel, publication, epoch),
      control: (message) => applyControl(message, this.connections, this.channels),
    });
    this.ready.catch(() => {});
    this.connections = new Connections(this.channels, options);
    this.originAllowed = originCheck(options.allowedOrigins);
    const commands = new Commands({ tokens, channels: this.channels, ready: this.ready, options });
    this.webSocket = new WebSocketTransport(this.connections, commands, this.originAllowed);
    this.sse = new SseTransport(this.connections, commands, options.jsonMaxDepth);
    this.emulation = new EmulationTransport(this.connections, commands, options.jsonMaxDepth);
    this.api = new ServerApi({
      options,
      engine: this.engine,
      channels: this.channels,
      publish: (channel, data, publishOptions) => this.publish(channel, data, publishOptions),
      stats: () => this.stats(),
    });
  }

  /** Serves the WebSocket endpoint on `server` at `path`. */
  attach(server: Server, path = '/connection/websocket'): void {
    this.webSocket.attach(server, path);
  }

  /**
   * Serves `/connection/uni_sse`, the emulation transports (`/connection/sse`,
   * `/connection/http_stream`, `/emulation`), the server API `/api/<method>`, and `/health` when the
   * `health` option is set; false for any other path (the caller answers it). A connection from an
   * origin `allowedOrigins` does not list is answered 403.
   */
  handleHttp(request: IncomingMessage, response: ServerResponse): boolean {
    const path = requestUrl(request).pathname;
    if (clientPaths.has(path) && !admitHttp(this.originAllowed, request, response)) return true;
    if (path === '/health' && this.options.health) {
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      return true;
    }
    if (path === '/connection/uni_sse') {
      void this.sse.open(request, response).catch(() => response.destroy());
      return true;
    }
    if (path === '/connection/sse' || path === '/connection/http_stream') {
      const framing = path === '/connection/sse' ? 'sse' : 'http_stream';
      void this.emulation.open(framing, request, response).catch(() => response.destroy());
      return true;
    }
    if (path === '/emulation') {
      void this.emulation.receive(request, response).catch(() => response.destroy());
      return true;
    }
    if (path.startsWith('/api/') || path === '/api') {
      void this.api.serve(request, response, path.slice('/api/'.length)).catch(() => {
        if (!response.headersSent) response.writeHead(500).end();
      });
      return true;
    }
    return false;
  }

  /** Publishes to a channel: appended to its history and pushed to its subscribers on every node. */
  async publish(channel: string, data: unknown, options: PublishOptions = {}): Promise<StreamPosition> {
    await this.ready;
    return this.channels.publish(channel, data, options);
  }

  /**
   * A client inside this process (e.g. a server's SSE stream): it subscribes without tokens, so the
   * caller checks access. Publications reach `onPublication` in order per channel; when a channel's
   * missed publications cannot be recovered (after `since`, or after this node lost some), `onReset`.
   */
  openInternal(user: string, handlers: InternalClientHandlers): InternalClient {
    return openInternalClient(
      { connections: this.connections, channels: this.channels, ready: this.ready },
      user,
      handlers,
    );
  }

  /**
   * Ends `user`'s subscription to `channel` (only `client`'s when given) on every node, as the server
   * API's `unsubscribe` does: the client is told (push `unsubscribe`, code 2000) and gets no more of it.
   */
  async unsubscribe(user: string, channel: string, client?: string): Promise<void> {
    await this.ready;
    await this.engine.sendControl({ kind: 'unsubscribe', user, channel, ...(client ? { client } : {}) });
  }

  /**
   * Closes the connections of this node whose connection token `picks` (e.g. one minted by a revoked
   * key): the SDK reconnects with a new token. Only this node's: each node is told for itself.
   */
  disconnectWhere(picks: (claims: Record<string, unknown>) => boolean): number {
    return this.connections.disconnectWhere(picks);
  }

  /**
   * How many channels starting with `prefix` a connection of this node follows; null when the
   * connection is not on this node (or gone).
   */
  subscriptionCount(client: string, prefix: string): number | null {
    return this.connections.subscriptionCount(client, prefix);
  }

  /** Connections and channels on this node. */
  stats() {
    return this.connections.stats();
  }

  /** Clients of the channel resubscribe and recover (a server-side subscription reconnects). */
  outOfStep(channel: string): void {
    this.channels.outOfStep(channel);
  }

  /** Every watched channel is out of step (the engine lost publications, e.g. a dropped Redis link). */
  resync(): void {
    this.channels.resync();
  }

  async close(): Promise<void> {
    this.connections.shutdown();
    await this.webSocket.close();
    await this.engine.close();
  }
}
