/**
 * A round-robin TCP balancer on 127.0.0.1 in front of a few gateway nodes, as a load balancer is in
 * front of a cluster: each new connection goes to the node with the fewest connections for its weight
 * (so a 3:7 weighting puts 30% of the clients on the first node), and a node that refuses a connection
 * is taken out of the rotation at once and the connection is tried on the next one — a client only
 * sees its own connection close when its node dies, never a refused reconnect while another node is up.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export interface Upstream {
  port: number;
  weight: number;
}

export class Balancer {
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  private readonly down = new Set<number>();
  /** Connections handed to each upstream so far (by index). */
  readonly routed: number[];
  port = 0;

  constructor(private readonly upstreams: Upstream[]) {
    this.routed = upstreams.map(() => 0);
  }

  async start(): Promise<number> {
    const server = createServer((client) => {
      this.track(client);
      client.pause();
      this.route(client, new Set());
    });
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', resolve);
    });
    this.port = (server.address() as { port: number }).port;
    return this.port;
  }

  /** Upstreams still in the rotation. */
  live(): number[] {
    return this.upstreams.map((_, i) => i).filter((i) => !this.down.has(i));
  }

  private pick(tried: Set<number>): number | null {
    let best: number | null = null;
    for (const i of this.live()) {
      if (tried.has(i)) continue;
      const load = this.routed[i]! / this.upstreams[i]!.weight;
      if (best === null || load < this.routed[best]! / this.upstreams[best]!.weight) best = i;
    }
    return best;
  }

  private route(client: Socket, tried: Set<number>): void {
    const target = this.pick(tried);
    if (target === null || client.destroyed) {
      client.destroy();
      return;
    }
    tried.add(target);
    this.routed[target]! += 1;
    const upstream = connect(this.upstreams[target]!.port, '127.0.0.1');
    let connected = false;
    upstream.once('connect', () => {
      connected = true;
      this.track(upstream);
      client.pipe(upstream).pipe(client);
      client.resume();
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    upstream.on('error', () => {
      if (connected) return upstream.destroy();
      // Refused: the node is gone (a health check would find it too, only later).
      this.routed[target]! -= 1;
      this.down.add(target);
      this.route(client, tried);
    });
  }

  private track(socket: Socket): void {
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}
