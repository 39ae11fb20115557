/**
 * Who may see a task, and the tokens your users' browsers need: the part of `TdpClient` that speaks for
 * people rather than for tasks (client.ts has the rest and extends this class). It also holds the
 * transport every call of the client goes through.
 */
import { randomUUID } from 'node:crypto';
import type { AclGrantRequest, UserTokenRequest } from '@tdp/protocol';
import { type CallOptions, createTransport, type HttpRequest, type TdpClientOptions } from './transport.ts';

export type AclPrincipalType = AclGrantRequest['principalType'];

const segment = encodeURIComponent;

export class TdpAccessCalls {
  protected readonly transport: ReturnType<typeof createTransport>;

  constructor(options: TdpClientOptions) {
    this.transport = createTransport(options);
  }

  protected async call<T>(request: HttpRequest): Promise<T> {
    return (await this.transport.send(request)).body as T;
  }

  /** Lets a user, project or role see the task (VIEW unless `permission` says otherwise). */
  async grantTaskAccess(taskId: string, grant: AclGrantRequest, options: CallOptions = {}): Promise<void> {
    await this.call({
      ...options,
      method: 'POST',
      path: `/v1/tasks/${segment(taskId)}/acl`,
      body: grant,
      retry: 'idempotent',
    });
  }

  async revokeTaskAccess(
    taskId: string,
    principalType: AclPrincipalType,
    principalId: string,
    options: CallOptions = {},
  ): Promise<void> {
    await this.call({
      ...options,
      method: 'DELETE',
      path: `/v1/tasks/${segment(taskId)}/acl/${segment(principalType)}/${segment(principalId)}`,
      retry: 'idempotent',
    });
  }

  // Tokens for your users' browsers

  /**
   * A realtime connection token for one of your users (with the projects and roles they act in, whose
   * summary channels it also subscribes), with the gateway's WebSocket URL.
   */
  createConnectionToken(
    user: string | { userId: string; projects?: string[]; roles?: string[] },
    options: CallOptions = {},
  ): Promise<{ token: string; url: string; channels: string[] }> {
    return this.call({
      ...options,
      method: 'POST',
      path: '/v1/realtime/connection-token',
      body: typeof user === 'string' ? { userId: user } : user,
      retry: 'idempotent',
    });
  }

  /**
   * A realtime subscription token for a task's detail channel, if the user (or a project or role of
   * theirs) may see the task. `clientId` is the page's connection (its SDK's client id); with Centrifugo
   * TDP requires it, to keep a connection to 20 task details.
   */
  createSubscriptionToken(
    request: { userId: string; taskId: string; clientId?: string; projects?: string[]; roles?: string[] },
    options: CallOptions = {},
  ): Promise<{ token: string; channel: string }> {
    return this.call({
      ...options,
      method: 'POST',
      path: '/v1/realtime/subscription-token',
      body: request,
      retry: 'idempotent',
    });
  }

  /**
   * A notice to every person of your tenant, on their realtime connections (never task data). Without
   * `idempotencyKey` one is generated; retries send the same one, so the notice goes out once.
   */
  async broadcastToTenant(
    notice: { title: string; message: string; severity: 'INFO' | 'WARNING' | 'CRITICAL'; link?: string },
    options: CallOptions & { idempotencyKey?: string } = {},
  ): Promise<{ id: string; channel: string; sentAt: string }> {
    const { idempotencyKey = randomUUID(), ...call } = options;
    const answer = await this.transport.send({
      ...call,
      method: 'POST',
      path: '/v1/broadcasts',
      body: notice,
      headers: { 'idempotency-key': idempotencyKey },
      retry: 'idempotent',
    });
    return answer.body as { id: string; channel: string; sentAt: string };
  }

  /** A short-lived token that reads the API as one of your users (e.g. `/v1/me/tasks`). */
  createUserToken(
    request: UserTokenRequest,
    options: CallOptions = {},
  ): Promise<{ token: string; expiresAt: string }> {
    return this.call({
      ...options,
      method: 'POST',
      path: '/v1/user-tokens',
      body: request,
      retry: 'idempotent',
    });
  }
}
