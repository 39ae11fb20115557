import { openApplicationSecrets } from '../../core/identity/applications.ts';
import type { IdentityStore } from '../../core/identity/ports.ts';
import type { SecretBox } from '../../core/identity/secretBox.ts';
import type { Clock } from '../../core/shared/ports.ts';

/**
 * The secrets that sign an application's callbacks: the current one, and the previous one while its
 * rotation overlap lasts. Kept for `ttlMs` of the injected clock, so a burst of callbacks opens them once.
 */
export class CallbackSigningSecrets {
  private readonly cache = new Map<string, { secrets: string[]; at: number }>();

  constructor(
    private readonly store: Pick<IdentityStore, 'getApplication'>,
    private readonly box: SecretBox,
    private readonly clock: Clock,
    private readonly ttlMs: number,
  ) {}

  async of(applicationId: string): Promise<string[]> {
    const cached = this.cache.get(applicationId);
    if (cached && this.clock.now().getTime() - cached.at < this.ttlMs) return cached.secrets;
    const application = await this.store.getApplication(applicationId);
    if (!application) return [];
    const opened = openApplicationSecrets(this.box, application);
    const list = [opened.callbackSecret];
    if (
      application.previousCallbackSecretSealed &&
      application.previousCallbackSecretExpiresAt &&
      application.previousCallbackSecretExpiresAt > this.clock.now()
    ) {
      list.push(
        this.box.open(
          application.previousCallbackSecretSealed,
          `application:${application.id}:callback_secret`,
        ),
      );
    }
    this.cache.set(applicationId, { secrets: list, at: this.clock.now().getTime() });
    return list;
  }
}
