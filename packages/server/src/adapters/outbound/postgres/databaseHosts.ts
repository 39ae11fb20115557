/**
 * The hosts of a `DATABASE_URL` and which of them takes writes. A URL may name several
 * (`postgres://u:p@db-a:5432,db-b:5432/tdp`), a primary and its standbys: each new connection goes to the
 * host last seen taking writes, and while none is known, to each host in turn. What a host is comes from
 * its start-up answer (PostgreSQL 14 and later report `in_hot_standby` and `default_transaction_read_only`
 * there), so finding the primary after a promotion costs no query of its own; the driver's
 * `target_session_attrs=read-write` check still closes any connection that lands on a read-only host.
 */
import type { Socket } from 'node:net';

export interface DatabaseHost {
  host: string;
  port: number;
}

/** What a connection's start-up told of its host. */
export type HostOutcome = 'writable' | 'read-only' | 'unreachable';

/** The hosts of a postgres:// URL, in order (several when it names `host:port,host:port`). */
export function databaseHosts(url: string): DatabaseHost[] {
  const authority = /^[a-z][a-z0-9+.-]*:\/\/(?:[^@/?#]*@)?([^/?#]*)/i.exec(url)?.[1] ?? '';
  const hosts = authority.split(',').map((part) => {
    const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(part);
    const [host, port] = bracketed
      ? [bracketed[1], bracketed[2]]
      : [part.replace(/:\d*$/, ''), /:(\d+)$/.exec(part)?.[1]];
    return { host: decodeURIComponent(host || 'localhost'), port: Number(port || 5432) };
  });
  return hosts.length > 0 ? hosts : [{ host: 'localhost', port: 5432 }];
}

/** After a failed connection, the next one to the same host waits this long (the driver would retry at once). */
const retryAfterMs = 250;

export class DatabaseHostChoice {
  private readonly outcomes: (HostOutcome | null)[];
  private readonly failedAt: number[];
  private writable: number | null = null;
  private next = 0;

  constructor(
    readonly hosts: DatabaseHost[],
    private readonly now: () => number = () => performance.now(),
  ) {
    this.outcomes = hosts.map(() => null);
    this.failedAt = hosts.map(() => Number.NEGATIVE_INFINITY);
  }

  /** The host for a new connection, and how long to wait before connecting to it. */
  pick(): { index: number; host: DatabaseHost; waitMs: number } {
    let index = this.writable;
    if (index === null) {
      index = this.next;
      this.next = (this.next + 1) % this.hosts.length;
    }
    const waitMs = Math.max(0, Math.ceil(this.failedAt[index]! + retryAfterMs - this.now()));
    return { index, host: this.hosts[index]!, waitMs };
  }

  report(index: number, outcome: HostOutcome): void {
    this.outcomes[index] = outcome;
    if (outcome === 'writable') {
      this.writable = index;
      this.failedAt[index] = Number.NEGATIVE_INFINITY;
      return;
    }
    this.failedAt[index] = this.now();
    if (this.writable === index) {
      this.writable = null;
      this.next = (index + 1) % this.hosts.length;
    }
  }

  /** Why no host takes writes (for readiness); null while one does, or before every host was tried. */
  unwritable(): string | null {
    if (this.writable !== null || this.outcomes.some((o) => o === null)) return null;
    if (this.outcomes.every((o) => o === 'read-only'))
      return this.hosts.length === 1
        ? 'the database host is read-only (a standby)'
        : `every database host is read-only (a standby): ${this.names()}`;
    return `no database host takes writes: ${this.outcomes
      .map((outcome, i) => `${this.name(i)} ${outcome === 'read-only' ? 'read-only' : 'unreachable'}`)
      .join(', ')}`;
  }

  private name(index: number): string {
    const { host, port } = this.hosts[index]!;
    return `${host.includes(':') ? `[${host}]` : host}:${port}`;
  }

  private names(): string {
    return this.hosts.map((_, i) => this.name(i)).join(', ');
  }
}

const PARAMETER_STATUS = 0x53; // 'S'
const READY_FOR_QUERY = 0x5a; // 'Z'
const ERROR_RESPONSE = 0x45; // 'E'

/**
 * Reads a connection's start-up answer (up to its first ReadyForQuery) for what its host is, and calls
 * `outcome` once: `writable`, `read-only`, or `unreachable` when the connection fails or closes before
 * that (a refused connection, a host still starting up or shutting down). Call the returned function
 * from the driver's first write: a listener added earlier would start the data flowing too soon.
 */
export function watchStartup(socket: Socket, outcome: (outcome: HostOutcome) => void): () => void {
  let told = false;
  const tell = (result: HostOutcome) => {
    if (told) return;
    told = true;
    socket.off('data', read);
    outcome(result);
  };
  const parameters = new Map<string, string>();
  let pending: Buffer = Buffer.alloc(0);
  const read = (data: Buffer) => {
    pending = pending.length === 0 ? data : Buffer.concat([pending, data]);
    while (pending.length >= 5) {
      const length = pending.readInt32BE(1);
      if (pending.length < length + 1) return;
      const type = pending[0];
      const body = pending.subarray(5, length + 1);
      pending = pending.subarray(length + 1);
      if (type === PARAMETER_STATUS) {
        const [name, value] = body.toString('utf8').split('\0');
        if (name) parameters.set(name, value ?? '');
      } else if (type === ERROR_RESPONSE) return tell('unreachable');
      else if (type === READY_FOR_QUERY) {
        const readOnly =
          parameters.get('in_hot_standby') === 'on' ||
          parameters.get('default_transaction_read_only') === 'on';
        return tell(readOnly ? 'read-only' : 'writable');
      }
    }
  };
  socket.once('close', () => tell('unreachable'));
  let listening = false;
  return () => {
    if (listening || told) return;
    listening = true;
    socket.on('data', read);
  };
}
