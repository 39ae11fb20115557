/** Cron schedules that start tasks (docs/schedules.md), as `tdp.schedules`. */
import { randomUUID } from 'node:crypto';
import type { CreateScheduleRequest, Schedule, SchedulePage } from '@tdp/protocol';
import type { CallOptions, createTransport } from './transport.ts';

const segment = encodeURIComponent;

export class TdpSchedules {
  constructor(private readonly transport: ReturnType<typeof createTransport>) {}

  /**
   * Creates a schedule. Without `idempotencyKey` one is generated; every retry of this call sends the
   * same one, so a lost answer never makes a second schedule.
   */
  async create(
    request: CreateScheduleRequest,
    options: CallOptions & { idempotencyKey?: string } = {},
  ): Promise<Schedule> {
    const { idempotencyKey = randomUUID(), ...call } = options;
    const answer = await this.transport.send({
      ...call,
      method: 'POST',
      path: '/v1/schedules',
      body: request,
      headers: { 'idempotency-key': idempotencyKey },
      retry: 'idempotent',
    });
    return answer.body as Schedule;
  }

  /** The application's schedules with their next fire times. */
  async list(options: CallOptions = {}): Promise<SchedulePage> {
    return (await this.transport.send({ ...options, method: 'GET', path: '/v1/schedules', retry: 'read' }))
      .body as SchedulePage;
  }

  async get(scheduleId: string, options: CallOptions = {}): Promise<Schedule> {
    const path = `/v1/schedules/${segment(scheduleId)}`;
    return (await this.transport.send({ ...options, method: 'GET', path, retry: 'read' })).body as Schedule;
  }

  /** Pauses a schedule (idempotent): no fire until it is resumed. */
  pause(scheduleId: string, options: CallOptions = {}): Promise<Schedule> {
    return this.action(scheduleId, 'pause', options);
  }

  /** Resumes a schedule (idempotent): it fires from now on; missed fires are not caught up. */
  resume(scheduleId: string, options: CallOptions = {}): Promise<Schedule> {
    return this.action(scheduleId, 'resume', options);
  }

  private async action(scheduleId: string, action: 'pause' | 'resume', options: CallOptions) {
    const path = `/v1/schedules/${segment(scheduleId)}:${action}`;
    return (await this.transport.send({ ...options, method: 'POST', path, body: {}, retry: 'idempotent' }))
      .body as Schedule;
  }
}
