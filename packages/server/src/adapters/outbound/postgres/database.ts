import { connect as connectTcp, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import postgres from 'postgres';
import { AppError } from '../../../core/shared/errors.ts';
import { answerDeadline } from './answerDeadline.ts';
import { arrayTypes } from './arrayTypes.ts';
import { DatabaseHostChoice, databaseHosts, watchStartup } from './databaseHosts.ts';

export type Sql = postgres.Sql<{ bigint: bigint }>;
/** A transaction-bound `sql` (what `sql.begin` hands its callback). */
export type TxSql = postgres.TransactionSql<{ bigint: bigint }>;
export type Queryable = Sql | TxSql;

export interface DatabaseOptions {
  url: string;
  maxConnections?: number;
  /** Every statement is cancelled after this long, so a request never waits on the database forever. */
  statementTimeoutMs?: number;
  /**
   * A connection that owes an answer and hears nothing for this long is destroyed (`answerDeadline.ts`):
   * the deadline PostgreSQL cannot enforce, on a network that stopped passing bytes. Plain TCP URLs only.
   */
  answerDeadlineMs?: number;
  /** PostgreSQL ends a session left idle inside a transaction for this long (its locks with it). */
  idleInTransactionTimeoutMs?: number;
  applicationName?: string;
  /**
   * `off` for a pool whose writes may be lost in a database crash without harm (heartbeats: the next
   * beat renews the lease again): a commit returns without waiting for its WAL to reach the disk.
   */
  synchronousCommit?: 'on' | 'off';
  /** `force_generic_plan` for a pool of a few statements whose best plan never depends on their values. */
  planCacheMode?: 'auto' | 'force_generic_plan';
  /**
   * Which of the URL's hosts takes writes, shared by a process's pools so all of them follow a
   * promotion at once (and readiness can say why none does). Left out: the pool's own.
   */
  hosts?: DatabaseHostChoice;
}

/** The defaults of `DatabaseOptions` for tools (migrations, tests); the server passes its settings. */
const defaultAnswerDeadlineMs = 15_000;
const defaultIdleInTransactionTimeoutMs = 60_000;

export function connectDatabase(options: DatabaseOptions): Sql {
  const hosts = options.hosts ?? new DatabaseHostChoice(databaseHosts(options.url));
  return postgres(options.url, {
    ...coalescedTcp(options.url, hosts, options.answerDeadlineMs ?? defaultAnswerDeadlineMs),
    target_session_attrs: sessionAttributes(options.url),
    max: options.maxConnections ?? 20,
    idle_timeout: 60,
    connect_timeout: 5,
    // Reconnects back off up to a second (the driver's default grows to 20 s): a request queued for a
    // connection waits for the next attempt, so long pauses became long requests after an outage.
    backoff: (retries: number) => Math.min(0.05 * 2 ** retries, 1),
    onnotice: () => {},
    // No catalog query on each new connection (its promise is dropped by the driver): see arrayTypes.ts.
    fetch_types: false,
    types: { bigint: postgres.BigInt, ...arrayTypes },
    connection: {
      application_name: options.applicationName ?? 'tdp',
      statement_timeout: options.statementTimeoutMs ?? 10_000,
      idle_in_transaction_session_timeout:
        options.idleInTransactionTimeoutMs ?? defaultIdleInTransactionTimeoutMs,
      ...(options.synchronousCommit ? { synchronous_commit: options.synchronousCommit } : {}),
      ...(options.planCacheMode ? { plan_cache_mode: options.planCacheMode } : {}),
    },
  }) as unknown as Sql;
}

/**
 * TDP writes on every pool: a connection that lands on a standby is closed and the next host tried. The
 * driver's `read-write` only looks at `default_transaction_read_only`, which a hot standby leaves off, so
 * it becomes `primary` (PostgreSQL's `in_hot_standby`). A URL asking for another kind keeps it.
 */
function sessionAttributes(url: string): 'primary' | 'read-only' | 'standby' | 'prefer-standby' | undefined {
  const asked = /[?&]target_session_attrs=([^&#]*)/.exec(url)?.[1];
  if (asked === 'any') return undefined;
  return asked === 'read-only' || asked === 'standby' || asked === 'prefer-standby' ? asked : 'primary';
}

/**
 * postgres.js writes every message of 1 KiB or more to the socket at once, so a pipelined transaction
 * (a dozen statements sent back to back) costs a dozen send syscalls — a third of the server's CPU in the
 * e2e benchmark. Corking the socket until the current burst of work is done sends them in one writev.
 * The socket goes to the host `hosts` picks (the primary, with several), and reports what that host
 * turned out to be. Only for TCP URLs without TLS; TLS and Unix-socket URLs keep the driver's own socket.
 */
function coalescedTcp(
  url: string,
  hosts: DatabaseHostChoice,
  answerDeadlineMs: number,
): { socket?: () => Promise<Socket> } {
  const ssl = /[?&](?:sslmode|ssl)=([^&#]*)/.exec(url)?.[1];
  if ((ssl && ssl !== 'disable') || hosts.hosts.some(({ host }) => host.startsWith('/'))) return {};
  return {
    // The socket is handed over before it connects (writes wait in its buffer). A refused or slow connect
    // then fails and closes it, which the driver handles like any broken connection, under its own
    // connect_timeout. A factory that rejects instead leaves the driver's connection "connecting" for
    // good: the requests queued behind it were never answered and the pool never recovered.
    socket: async () => {
      const { index, host, waitMs } = hosts.pick();
      // A host that just failed is not tried again at once: the driver retries a connection that is
      // starting up without a pause, which would spin between the hosts while a promotion is underway.
      if (waitMs > 0) await sleep(waitMs);
      const socket = connectTcp({
        host: host.host,
        port: host.port,
        noDelay: true,
        keepAlive: true,
        keepAliveInitialDelay: 60_000,
      });
      const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
      const written = answerDeadline(socket, answerDeadlineMs);
      const startup = watchStartup(socket, (outcome) => hosts.report(index, outcome));
      let corked = false;
      socket.write = ((...args: unknown[]) => {
        startup();
        written(args[0]);
        if (!corked) {
          corked = true;
          socket.cork();
          process.nextTick(() => {
            corked = false;
            socket.uncork();
          });
        }
        return write(...args);
      }) as typeof socket.write;
      return socket;
    },
  };
}

/**
 * Stops a LISTEN at a stop: its UNLISTEN waits at most `withinMs`. With a database that stopped
 * answering it would wait forever, and the pools are ended right after the features stop anyway.
 */
export async function stopListening(unlisten: (() => Promise<void>) | undefined, withinMs = 1_000) {
  if (!unlisten) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    unlisten().catch(() => {}),
    new Promise((resolve) => {
      timer = setTimeout(resolve, withinMs);
    }),
  ]);
  clearTimeout(timer);
}

/**
 * Runs `work` in one transaction on a reserved connection. BEGIN is not waited for: it goes out with
 * the transaction's first statements, and COMMIT right behind its last ones. Unlike the driver's
 * `sql.begin`, a connection that closes mid-transaction fails the transaction cleanly: statements the
 * driver still queued for it never settle, so the connection is watched and `tx` refuses to send
 * anything once it is gone; such a connection is never handed back to the pool (the driver connects it
 * again). A connection that stops answering (a COMMIT that never settles) is destroyed at its answer
 * deadline (`answerDeadline.ts`), which closes it and so ends the transaction the same way.
 */
export async function transaction<T>(sql: Sql, work: (tx: TxSql) => Promise<T>, begin = 'BEGIN'): Promise<T> {
  const reserved = await sql.reserve();
  const watch = new ConnectionWatch();
  const tx = watched(reserved as unknown as TxSql, watch);
  // The connection answered the transaction's last statement (COMMIT or ROLLBACK): alive and idle.
  let answered = false;
  try {
    // The driver's per-query `onexecute` hands over the connection, as its own `begin` uses it.
    const begun = reserved.unsafe(begin, [], { onexecute: watch.attach } as never).execute();
    begun.catch(() => {});
    const value = await watch.race(work(tx));
    watch.check();
    await watch.race(reserved`COMMIT`);
    answered = true;
    await begun;
    return value;
  } catch (error) {
    if (!answered && !watch.closed)
      answered = await watch.race(reserved`ROLLBACK`).then(
        () => true,
        () => false,
      );
    throw error;
  } finally {
    watch.detach();
    if (answered && !watch.closed) reserved.release();
  }
}

type WatchedConnection = { onclose: ((error: Error) => void) | null };

/** Whether a reserved connection is still there (the driver calls a connection's `onclose` when not). */
class ConnectionWatch {
  private connection: WatchedConnection | null = null;
  private closedBy: Error | null = null;
  private rejectClosed: (error: Error) => void = () => {};
  /** Rejects when the connection closes. */
  private readonly closing = new Promise<never>((_, reject) => {
    this.rejectClosed = reject;
  });

  constructor() {
    this.closing.catch(() => {});
  }

  /** For the first statement's `onexecute`; true keeps the connection pipelining. */
  readonly attach = (connection: WatchedConnection): boolean => {
    this.connection = connection;
    connection.onclose = (error) => {
      this.closedBy = error;
      this.rejectClosed(error);
    };
    return true;
  };

  /**
   * `work`, or the close error once the connection is gone: statements the driver still held in the
   * reserved connection's own queue are never settled when it closes (porsager/postgres #1186).
   */
  race<T>(work: PromiseLike<T>): Promise<T> {
    return Promise.race([work, this.closing]);
  }

  get closed(): boolean {
    return this.closedBy !== null;
  }

  /** Throws the driver's CONNECTION_CLOSED error once the connection is gone. */
  check(): void {
    if (this.closedBy) throw this.closedBy;
  }

  detach(): void {
    if (this.connection) this.connection.onclose = null;
    this.connection = null;
  }
}

/** `tx`, refusing to send a statement once its connection has closed. */
function watched(tx: TxSql, watch: ConnectionWatch): TxSql {
  return new Proxy(tx, {
    apply: (target, thisArg, args) => {
      watch.check();
      return Reflect.apply(target, thisArg, args);
    },
    get: (target, property, receiver) => {
      const value = Reflect.get(target, property, receiver);
      if (property !== 'unsafe' && property !== 'file') return value;
      return (...args: unknown[]) => {
        watch.check();
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

const unavailableCodes = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'EPIPE',
  'CONNECT_TIMEOUT',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'DATABASE_ANSWER_TIMEOUT', // answerDeadline.ts destroyed a connection that stopped answering
  '25P03', // idle_in_transaction_session_timeout
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now
  '53300', // too_many_connections
  '08000',
  '08003',
  '08006',
  '08001',
  '08004',
]);

/** Turns driver failures that mean "the database is not there" into a retryable 503. */
export function translateDatabaseError(error: unknown): unknown {
  if (error instanceof AppError) return error;
  const e = error as { code?: unknown; cause?: { code?: unknown } } | null;
  const code = typeof e?.code === 'string' ? e.code : e?.cause?.code;
  if (typeof code !== 'string') return error;
  if (unavailableCodes.has(code))
    return new AppError('DATABASE_UNAVAILABLE', 'the database is unavailable; retry later');
  if (code === '57014')
    return new AppError('REQUEST_TIMEOUT', 'the database did not answer within the deadline');
  // Input PostgreSQL cannot store (the statement, and its transaction, was refused whole): U+0000 in
  // text or jsonb, a number past its column's range.
  if (code === '22021' || code === '22P05')
    return new AppError('VALIDATION_FAILED', 'text must not contain the NUL character (\\u0000)');
  if (code === '22003') return new AppError('VALIDATION_FAILED', 'a number is out of range');
  return error;
}

export function isUniqueViolation(error: unknown, constraint?: string): boolean {
  const e = error as { code?: string; constraint_name?: string };
  return e?.code === '23505' && (constraint === undefined || e.constraint_name === constraint);
}

/** True for the driver's errors that say the database or a connection to it went away. */
export function isDatabaseUnavailable(error: unknown): boolean {
  const translated = translateDatabaseError(error);
  return translated instanceof AppError && translated.code === 'DATABASE_UNAVAILABLE';
}
