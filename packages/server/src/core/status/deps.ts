import type { JsonSchemaValidator } from '../definitions/ports.ts';
import type { SecretBox } from '../identity/secretBox.ts';
import type { FactDeps } from './facts.ts';
import type { ExecutionCredentials } from './ports.ts';
import type { RegistryCatalog } from './registries.ts';

export interface StatusDeps extends FactDeps {
  registries: RegistryCatalog;
  schemas: JsonSchemaValidator;
  credentials: ExecutionCredentials;
  /** Seals compact handles so an idempotent re-activation can return the same handle. */
  secrets: SecretBox;
  /** How long an execution credential lives (it is also revoked when its step attempt ends). */
  credentialTtlMs: number;
  defaultHeartbeatIntervalSeconds: number;
  defaultHeartbeatTimeoutSeconds: number;
}
