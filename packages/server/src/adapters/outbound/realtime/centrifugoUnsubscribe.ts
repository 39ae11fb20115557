/**
 * Ends a user's subscription to a channel on every Centrifugo node, through its server API
 * `unsubscribe` (the client gets an unsubscribe push and no more publications of the channel).
 */
export class CentrifugoUnsubscribe {
  constructor(
    private readonly apiUrl: string,
    private readonly apiKey: string,
    private readonly timeoutMs = 2_000,
  ) {}

  async unsubscribe(user: string, channel: string): Promise<void> {
    const response = await fetch(`${this.apiUrl.replace(/\/$/, '')}/unsubscribe`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': this.apiKey },
      body: JSON.stringify({ user, channel }),
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    const body = (await response.json().catch(() => null)) as { error?: { message?: string } } | null;
    if (response.status !== 200 || !body || body.error)
      throw new Error(`Centrifugo unsubscribe answered ${response.status} ${body?.error?.message ?? ''}`);
  }
}
