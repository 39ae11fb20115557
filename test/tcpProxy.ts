import { connect, createServer, type Server, type Socket } from 'node:net';
import { Transform } from 'node:stream';

/** A connection whose bytes to the server are withheld from the first chunk that held a pattern on. */
export interface HeldConnection {
  /** The client closed its side (e.g. the driver destroyed a connection that owed it an answer). */
  clientClosed: Promise<void>;
}

/** A TCP proxy the test can cut and restore, to put a real database "out" without stopping it. */
export class TcpProxy {
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  private hold: { pattern: Buffer; found: (held: HeldConnection) => void } | null = null;
  private cutReply: { pattern: Buffer; done: () => void } | null = null;
  /** New connections are accepted and left hanging (see `freeze`). */
  private hangNewConnections = false;
  port = 0;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  async start(port = 0): Promise<number> {
    const server = createServer((client) => {
      // A connection accepted just before a cut would otherwise outlive it (and hold close() open).
      if (this.server !== server) {
        client.destroy();
        return;
      }
      if (this.hangNewConnections) {
        this.sockets.add(client);
        client.on('close', () => this.sockets.delete(client));
        client.on('error', () => client.destroy());
        client.pause();
        return;
      }
      const upstream = connect(this.targetPort, this.targetHost);
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
        socket.on('error', () => socket.destroy());
      }
      client.pipe(this.toServer(client)).pipe(upstream).pipe(this.toClient(client, upstream)).pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', resolve);
    });
    const address = server.address();
    this.port = typeof address === 'object' && address ? address.port : port;
    return this.port;
  }

  /**
   * Stops passing bytes on every open connection, leaving them open: the database seems to stop
   * answering (a hung COMMIT, a network that drops packets) rather than to go away.
   */
  freeze(options: { newConnections?: boolean } = {}): void {
    // With `newConnections`, connections opened from now on hang too (a network that passes nothing).
    if (options.newConnections) this.hangNewConnections = true;
    for (const socket of this.sockets) {
      socket.unpipe();
      socket.pause();
    }
  }

  /**
   * The next client→server chunk that contains `pattern` (e.g. a COMMIT, or a query of the driver's) is
   * not passed on, nor anything after it on that connection: the server never sees it, so it never
   * answers, while the connection stays open.
   */
  holdWhen(pattern: string): Promise<HeldConnection> {
    return new Promise((resolve) => {
      this.hold = { pattern: Buffer.from(pattern), found: resolve };
    });
  }

  private toServer(client: Socket): Transform {
    let holding = false;
    return new Transform({
      transform: (chunk: Buffer, _encoding, done) => {
        const hold = this.hold;
        if (!holding && hold && chunk.includes(hold.pattern)) {
          this.hold = null;
          holding = true;
          const clientClosed = new Promise<void>((resolve) =>
            client.destroyed ? resolve() : client.once('close', () => resolve()),
          );
          hold.found({ clientClosed });
        }
        done(null, holding ? undefined : chunk);
      },
    });
  }

  /**
   * The next server→client chunk that contains `pattern` (e.g. `HTTP/1.1 201`) is dropped and its
   * connection cut: the server did the work, the client never hears of it (a connection lost after the
   * request was sent). Resolves when it happened.
   */
  cutReplyWhen(pattern: string): Promise<void> {
    return new Promise((resolve) => {
      this.cutReply = { pattern: Buffer.from(pattern), done: resolve };
    });
  }

  private toClient(client: Socket, upstream: Socket): Transform {
    return new Transform({
      transform: (chunk: Buffer, _encoding, done) => {
        const cut = this.cutReply;
        if (cut && chunk.includes(cut.pattern)) {
          this.cutReply = null;
          client.destroy();
          upstream.destroy();
          cut.done();
          return done();
        }
        done(null, chunk);
      },
    });
  }

  /** New connections pass bytes again (those frozen stay frozen). */
  thaw(): void {
    this.hangNewConnections = false;
  }

  /** Drops every connection and refuses new ones. */
  async cut(): Promise<void> {
    const server = this.server;
    this.server = null;
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  }

  async restore(): Promise<void> {
    if (!this.server) await this.start(this.port);
  }
}
