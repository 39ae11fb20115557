import type { JsonSchemaValidator, RegistryLookup } from '../definitions/ports.ts';
import type { FactDeps } from '../facts/session.ts';
import type { SecretBox } from '../identity/secretBox.ts';
import type { MapQuota } from '../orchestration/consequences.ts';
import type { ExecutionCredentials, StatusStore } from './ports.ts';

export interface StatusDeps extends FactDeps, MapQuota {
  store: StatusStore;
  registries: RegistryLookup;
  schemas: JsonSchemaValidator;
  credentials: ExecutionCredentials;
  /** Seals compact handles so an idempotent re-activation can return the same handle. */
  secrets: SecretBox;
  /** How long an execution credential lives (it is also revoked when its step attempt ends). */
  credentialTtlMs: number;
  defaultHeartbeatIntervalSeconds: number;
  defaultHeartbeatTimeoutSeconds: number;
}
