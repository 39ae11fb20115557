/**
 * Server-sent events of a response body, one `{ id, data }` per event that carries data; `onBytes` hears
 * of everything that arrives (keep-alive comments too), so a caller can tell a live stream from a silent one.
 */
export async function* sseEvents(
  body: ReadableStream<Uint8Array>,
  onBytes: () => void = () => {},
): AsyncGenerator<{ id: string | undefined; data: string }> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    onBytes();
    buffer += decoder.decode(value, { stream: true });
    let boundary = buffer.indexOf('\n\n');
    while (boundary >= 0) {
      const lines = buffer.slice(0, boundary).split('\n');
      buffer = buffer.slice(boundary + 2);
      boundary = buffer.indexOf('\n\n');
      const field = (name: string) => lines.find((l) => l.startsWith(`${name}: `))?.slice(name.length + 2);
      const data = field('data');
      if (data) yield { id: field('id'), data };
    }
  }
}
