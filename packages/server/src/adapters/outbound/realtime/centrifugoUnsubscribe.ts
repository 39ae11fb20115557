/**
 * Ends a user's subscription to a channel (`unsubscribe`: the client gets an unsubscribe push and no
 * more publications of the channel), or all their connections (`disconnect`), on every Centrifugo node
 * through its server API.
 */
export class CentrifugoUnsubscribe {
  constructor(
    private readonly apiUrl: string,
    private readonly apiKey: string,
    private readonly timeoutMs = 2_000,
  ) {}

  async unsubscribe(user: string, channel: string): Promise<void> {
    await this.call('unsubscribe', { user, channel });
  }

  /** Ends every connection of a user on every node (the client may reconnect with a new token). */
  async disconnect(user: string): Promise<void> {
    await this.call('disconnect', { user });
  }

  private async call(method: string, params: Record<string, unknown>): Promise<void> {
    const response = await fetch(`${this.apiUrl.replace(/\/$/, '')}/${method}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': this.apiKey },
      body: JSON.stringify(params),
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    const body = (await response.json().catch(() => null)) as { error?: { message?: string } } | null;
    if (response.status !== 200 || !body || body.error)
      throw new Error(`Centrifugo ${method} answered ${response.status} ${body?.error?.message ?? ''}`);
  }
}
