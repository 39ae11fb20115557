/** A task's realtime detail channel through the real gateway and the real `centrifuge` SDK, as a browser of `userId` follows it. */
import { Centrifuge } from 'centrifuge';
import WebSocket from 'ws';
import type { Harness } from './harness.ts';

/** Connects, subscribes and returns the publications as they arrive; the client goes into `clients` (disconnect them after). */
export async function followTaskDetail(
  h: Harness,
  apiKey: string,
  userId: string,
  taskId: string,
  clients: Centrifuge[],
): Promise<any[]> {
  const issued = (
    await h.request('POST', '/v1/realtime/connection-token', { token: apiKey, body: { userId } })
  ).body;
  const client = new Centrifuge(issued.url, { websocket: WebSocket, token: issued.token });
  clients.push(client);
  const connected = new Promise((resolve) => client.once('connected', resolve));
  client.connect();
  await connected;
  const grant = (
    await h.request('POST', '/v1/realtime/subscription-token', { token: apiKey, body: { userId, taskId } })
  ).body;
  const detail = client.newSubscription(grant.channel, { token: grant.token });
  const received: any[] = [];
  detail.on('publication', (ctx) => received.push(ctx.data));
  const subscribed = new Promise((resolve) => detail.once('subscribed', resolve));
  detail.subscribe();
  await subscribed;
  return received;
}
