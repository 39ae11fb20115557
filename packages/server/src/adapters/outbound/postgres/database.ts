import postgres from 'postgres';
import { AppError } from '../../../core/shared/errors.ts';

export type Sql = postgres.Sql<{ bigint: bigint }>;
/** A transaction-bound `sql` (what `sql.begin` hands its callback). */
export type TxSql = postgres.TransactionSql<{ bigint: bigint }>;
export type Queryable = Sql | TxSql;

export interface DatabaseOptions {
  url: string;
  maxConnections?: number;
  /** Every statement is cancelled after this long, so a request never waits on the database forever. */
  statementTimeoutMs?: number;
  applicationName?: string;
}

export function connectDatabase(options: DatabaseOptions): Sql {
  return postgres(options.url, {
    max: options.maxConnections ?? 20,
    idle_timeout: 60,
    connect_timeout: 5,
    onnotice: () => {},
    types: { bigint: postgres.BigInt },
    connection: {
      application_name: options.applicationName ?? 'tdp',
      statement_timeout: options.statementTimeoutMs ?? 10_000,
    },
  }) as unknown as Sql;
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
  return error;
}

export function isUniqueViolation(error: unknown, constraint?: string): boolean {
  const e = error as { code?: string; constraint_name?: string };
  return e?.code === '23505' && (constraint === undefined || e.constraint_name === constraint);
}
