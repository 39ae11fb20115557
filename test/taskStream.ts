/** The native task stream (`GET /v1/me/task-stream`) as an EventSource page reads it, for tests. */
import { expect } from 'vitest';
import { sseEvents } from '../packages/worker/src/sse.ts';

export interface StreamEvent {
  id: string | undefined;
  data: any;
}

/**
 * Opens the stream of the server at `baseUrl`; its events (id and parsed data) accumulate in `events`.
 * Resolves once `stream.ready` came; `aborts` collects what closes it at the end of the test file.
 */
export async function openTaskStream(
  baseUrl: string,
  token: string,
  options: { lastEventId?: string; aborts?: AbortController[] } = {},
) {
  const abort = new AbortController();
  options.aborts?.push(abort);
  const response = await fetch(`${baseUrl}/v1/me/task-stream?access_token=${encodeURIComponent(token)}`, {
    headers: options.lastEventId ? { 'last-event-id': options.lastEventId } : {},
    signal: abort.signal,
  });
  expect(response.status).toBe(200);
  const events: StreamEvent[] = [];
  void (async () => {
    for await (const event of sseEvents(response.body!))
      events.push({ id: event.id, data: JSON.parse(event.data) });
  })().catch(() => {});
  await expect.poll(() => events[0]?.data.kind).toBe('stream.ready');
  return { events, close: () => abort.abort(), sessionId: events[0]!.data.sessionId as string };
}
