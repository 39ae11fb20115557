/**
 * Revocations as the browsers' realtime sees them. A revoked API key: this replica's gateway closes the
 * connections its tokens opened (the SDK reconnects with a new token, which is checked again; the task
 * streams close their own: taskStreamRoutes.ts). A revoked view of a task: the person's live detail
 * subscription ends at once, through the gateway's engine (every node) or Centrifugo's server API,
 * unless they still see the task as themselves. The replica that revoked does it once; both reach
 * every node by themselves.
 */
import type { Gateway } from '@tdp/gateway';
import type { Logger } from 'pino';
import { channels, operatorSubject } from '../../core/facts/projections.ts';
import type { Revocation } from '../../core/identity/ports.ts';
import type { Viewer } from '../../core/status/ports.ts';

export interface RealtimeRevocationDeps {
  gateway: Pick<Gateway, 'unsubscribe' | 'disconnectWhere'>;
  /** Centrifugo's server API, when Centrifugo serves the browsers. */
  centrifugo: {
    unsubscribe(user: string, channel: string): Promise<void>;
    disconnect(user: string): Promise<void>;
  } | null;
  canView(taskId: string, viewer: Viewer): Promise<boolean>;
  logger: Logger;
}

export function realtimeRevocations(deps: RealtimeRevocationDeps) {
  return (revocation: Revocation, here: boolean): void => {
    if (revocation.kind === 'apiKey') {
      deps.gateway.disconnectWhere((claims) => claims.akid === revocation.keyId);
      return;
    }
    if (revocation.kind === 'operator') {
      // Their dashboard reconnects with a new token, which says what they may see now (or is refused).
      const user = operatorSubject(revocation.operatorId);
      deps.gateway.disconnectWhere((claims) => claims.sub === user);
      if (here && deps.centrifugo)
        void deps.centrifugo
          .disconnect(user)
          .catch((error) => deps.logger.warn({ err: error }, "could not end an operator's live connections"));
      return;
    }
    // A project's or role's members are not known to TDP (the backend vouches for them per token):
    // their subscriptions end when their tokens do.
    if (revocation.kind !== 'taskAccess' || !here || revocation.principalType !== 'USER') return;
    void unsubscribeUser(deps, revocation).catch((error) =>
      deps.logger.warn(
        { err: error, taskId: revocation.taskId },
        "could not end a revoked user's detail subscription",
      ),
    );
  };
}

async function unsubscribeUser(
  deps: RealtimeRevocationDeps,
  revocation: Extract<Revocation, { kind: 'taskAccess' }>,
): Promise<void> {
  const user = revocation.principalId;
  if (await deps.canView(revocation.taskId, { userId: user, projects: [], roles: [] })) return;
  const channel = channels.detail(revocation.tenantId, revocation.taskId);
  if (deps.centrifugo) await deps.centrifugo.unsubscribe(user, channel);
  else await deps.gateway.unsubscribe(user, channel);
}
