import type { Channels } from './channels.ts';
import type { Connections } from './connections.ts';
import type { ControlMessage } from './engine.ts';

/**
 * A control message from the engine, applied to this node's sessions: the server API's `subscribe`,
 * `unsubscribe` and `disconnect` go through the engine so that they reach a user's sessions on every node,
 * and join and leave messages so that they reach a channel's subscribers on every node.
 */
export function applyControl(message: ControlMessage, connections: Connections, channels: Channels): void {
  if (message.kind === 'join' || message.kind === 'leave') {
    channels.deliverJoinLeave(message.channel, message.kind, message.info);
    return;
  }
  if (message.kind === 'unsubscribe') {
    for (const session of connections.of(message.user, message.client)) {
      if (!session.subscriptions.has(message.channel)) continue;
      channels.leave(session, message.channel);
      session.send([
        { push: { channel: message.channel, unsubscribe: { code: 2000, reason: 'server unsubscribe' } } },
      ]);
    }
    return;
  }
  if (message.kind === 'disconnect') {
    for (const session of connections.of(message.user, message.client))
      session.close([message.code, message.reason]);
    return;
  }
  if (message.kind === 'subscribe') {
    for (const session of connections.of(message.user, message.client)) {
      if (session.subscriptions.has(message.channel)) continue;
      const channel = message.channel;
      void channels.join(session, channel, {}, true).then(({ reply, floor }) => {
        if (session.closed) return;
        session.send([{ push: { channel, subscribe: reply } }]);
        channels.activate(session, channel, floor);
      });
    }
  }
}
