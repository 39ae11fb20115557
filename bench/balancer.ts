/**
 * A round-robin TCP balancer on 127.0.0.1 in front of a few gateway nodes, as a load balancer is in
 * front of a cluster: each new connection goes to the node with the fewest connections for its weight
 * (so a 3:7 weighting puts 30% of the clients on the first node), and a node that refuses a connection
 * is taken out of the rotation at once and the connection is tried on the next one — a client only
 * sees its own connection close when its node dies, never a refused reconnect while another node is up.
 *
 * A balancer holds two descriptors per connection, so the drills run several in processes of their own
 * (`startBalancers`), as a cluster has several load-balancer instances: one process may open at most
 * `ulimit -n` files, and 10,000 clients through one would need 20,000 (20,000 is this machine's limit).
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import { childProcesses } from './realtimeProcesses.ts';

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

type BalancerMessage = { type: 'start'; upstreams: Upstream[] } | { type: 'routed' | 'stop' };

/** `count` balancer processes over the same upstreams; each keeps its own weighted count. */
export async function startBalancers(count: number, upstreams: Upstream[]) {
  const processes = childProcesses('bench/balancer.ts', count);
  const started = await processes.ask<{ port: number }>('start', 'ready', () => ({ upstreams }));
  return {
    ports: started.map((answer) => answer.port),
    /** Connections handed to each upstream so far, over all the balancers. */
    routed: async () => {
      const answers = await processes.ask<{ routed: number[] }>('routed', 'routed');
      return upstreams.map((_, i) => answers.reduce((sum, a) => sum + a.routed[i]!, 0));
    },
    close: processes.stop,
  };
}

// Run as a balancer process by `startBalancers`.
if (process.send && process.argv[1] === new URL(import.meta.url).pathname) {
  let balancer: Balancer | null = null;
  process.on('disconnect', () => process.exit(0));
  process.on('message', async (message: BalancerMessage) => {
    if (message.type === 'start') {
      balancer = new Balancer(message.upstreams);
      process.send?.({ type: 'ready', port: await balancer.start() });
    } else if (message.type === 'routed') process.send?.({ type: 'routed', routed: balancer?.routed ?? [] });
    else {
      await balancer?.close();
      process.exit(0);
    }
  });
}
