/**
 * A client inside this process (e.g. a server's SSE stream): a session without a protocol transport,
 * whose pushes are turned into calls of its handlers.
 */
import type { Channels } from './channels.ts';
import type { Connections } from './connections.ts';
import type { Publication, StreamPosition } from './engine.ts';
import type { Session } from './session.ts';

/** See `Gateway.openInternal`. */
export interface InternalClient {
  /** Subscribes; with `since`, first the publications after it. False when those could not be recovered. */
  subscribe(channel: string, since?: StreamPosition): Promise<boolean>;
  unsubscribe(channel: string): void;
  /** The position of the last publication handed out on the channel. */
  position(channel: string): StreamPosition | null;
  close(): void;
}

export interface InternalClientHandlers {
  onPublication(channel: string, publication: { data: unknown; offset: number }, epoch: string): void;
  onReset(channel: string): void;
}

export interface InternalClientDependencies {
  connections: Connections;
  channels: Channels;
  /** The engine is running (a subscribe waits for it). */
  ready: Promise<void>;
}

type Push = {
  channel?: string;
  pub?: { data: unknown; offset: number };
  unsubscribe?: { code: number };
};

export function openInternalClient(
  { connections, channels, ready }: InternalClientDependencies,
  user: string,
  handlers: InternalClientHandlers,
): InternalClient {
  const positions = new Map<string, StreamPosition>();
  let session: Session;
  const subscribe = async (channel: string, since?: StreamPosition): Promise<boolean> => {
    await ready;
    const result = await channels.join(session, channel, since ? { recover: true, ...since } : {}, false);
    if (session.closed) return false;
    const reply = result.reply as {
      epoch: string;
      offset: number;
      recovered?: boolean;
      publications?: Publication[];
    };
    positions.set(channel, { offset: reply.offset, epoch: reply.epoch });
    for (const publication of reply.publications ?? []) {
      positions.set(channel, { offset: publication.offset, epoch: reply.epoch });
      handlers.onPublication(channel, publication, reply.epoch);
    }
    if (!reply.recovered) positions.set(channel, { offset: result.floor, epoch: reply.epoch });
    channels.activate(session, channel, result.floor);
    return !since || reply.recovered === true;
  };
  session = connections.openInternal({
    pongs: false,
    send: (messages) => {
      for (const message of messages as { push?: Push }[]) {
        const push = message.push;
        if (!push?.channel) continue;
        if (push.pub) {
          const known = positions.get(push.channel);
          if (push.pub.offset)
            positions.set(push.channel, { offset: push.pub.offset, epoch: known?.epoch ?? '' });
          handlers.onPublication(push.channel, push.pub, known?.epoch ?? '');
        } else if (push.unsubscribe?.code === 2500) {
          // Out of step: recover from where this client was, or tell the caller it cannot.
          const channel = push.channel;
          void subscribe(channel, positions.get(channel)).then((recovered) => {
            if (!recovered) handlers.onReset(channel);
          });
        }
      }
    },
    close: () => {},
  });
  session.user = user;
  return {
    subscribe,
    unsubscribe: (channel) => {
      positions.delete(channel);
      channels.leave(session, channel);
    },
    position: (channel) => positions.get(channel) ?? null,
    close: () => session.end(),
  };
}
