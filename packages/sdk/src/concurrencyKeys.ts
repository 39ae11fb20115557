/**
 * The tenant's concurrency keys and rate limits (docs/scheduling.md), as `tdp.concurrencyKeys`: their
 * state, and the limit set at run time in place of the declared one (no redeploy).
 */
import type { ConcurrencyKeyState } from '@tdp/protocol';
import type { CallOptions, createTransport } from './transport.ts';

const segment = encodeURIComponent;

export class TdpConcurrencyKeys {
  constructor(private readonly transport: ReturnType<typeof createTransport>) {}

  /** Every key the tenant's definitions declare or that has a setting: limits, pauses, running, waiting. */
  async list(options: CallOptions = {}): Promise<ConcurrencyKeyState[]> {
    const answer = await this.transport.send({
      ...options,
      method: 'GET',
      path: '/v1/concurrency-keys',
      retry: 'read',
    });
    return (answer.body as { items: ConcurrencyKeyState[] }).items;
  }

  /** Sets a key's limit for every workflow that names it (a PUT: safe to retry). */
  async setLimit(name: string, limit: number, options: CallOptions = {}): Promise<ConcurrencyKeyState> {
    const path = `/v1/concurrency-keys/${segment(name)}`;
    return (
      await this.transport.send({ ...options, method: 'PUT', path, body: { limit }, retry: 'idempotent' })
    ).body as ConcurrencyKeyState;
  }

  /** Returns a key to the limit its definitions declare. */
  async resetLimit(name: string, options: CallOptions = {}): Promise<ConcurrencyKeyState> {
    const path = `/v1/concurrency-keys/${segment(name)}/limit`;
    return (await this.transport.send({ ...options, method: 'DELETE', path, retry: 'idempotent' }))
      .body as ConcurrencyKeyState;
  }
}
