/**
 * Checks a resource provider's answer (docs/resource-provider.md, "The answer TDP expects") against what
 * was asked: a pure function, so its rules are tested without a provider.
 */
import type { AccessGrant } from '@tdp/protocol';
import { checkOutboundUrl } from '../identity/outboundUrl.ts';

/** What the provider is asked for (kept with the grant, so that a renewal asks the same). */
export interface ProviderAsk {
  purpose: AccessGrant['purpose'];
  /** What to read or overwrite (DOWNLOAD, UPLOAD); for ARTIFACT the provider names the new resource. */
  resourceRef?: string;
  scope?: string;
  artifact?: { relativePath: string; artifactType: string; mediaType: string; maxBytes: number };
}

/** What the provider answered, as checked: the grant without its id and purpose. */
export type GrantAnswer = Omit<AccessGrant, 'grantId' | 'purpose'>;

/** Grants longer than this are refused: a leaked URL must not outlive the work by much. */
const maxLifetimeMs = 24 * 3_600_000;

/** Checks a provider's answer against what was asked; a string says what is wrong with it. */
export function checkAnswer(
  body: unknown,
  request: ProviderAsk,
  now: Date,
  allowInsecureUrls: boolean,
): GrantAnswer | string {
  if (!body || typeof body !== 'object') return 'is not a JSON object';
  const b = body as Record<string, unknown>;
  if (typeof b.url !== 'string') return 'has no url';
  const urlProblem = checkOutboundUrl(b.url, allowInsecureUrls);
  if (urlProblem) return `url ${urlProblem}`;
  const method = b.method ?? (request.purpose === 'DOWNLOAD' ? 'GET' : 'PUT');
  const expected = request.purpose === 'DOWNLOAD' ? 'GET' : 'PUT';
  if (method !== expected) return `method must be ${expected} for ${request.purpose}, not ${String(method)}`;
  const headers = b.headers ?? {};
  if (typeof headers !== 'object' || Object.values(headers as object).some((v) => typeof v !== 'string'))
    return 'headers must map names to strings';
  const expiresAt = typeof b.expiresAt === 'string' ? new Date(b.expiresAt) : null;
  if (!expiresAt || Number.isNaN(expiresAt.getTime())) return 'has no valid expiresAt';
  if (expiresAt <= now) return 'expired already';
  if (expiresAt.getTime() - now.getTime() > maxLifetimeMs) return 'expires more than 24 hours from now';
  const asked = request.artifact?.maxBytes ?? null;
  let maxBytes: number | null = null;
  if (b.maxBytes !== undefined && b.maxBytes !== null) {
    if (typeof b.maxBytes !== 'number' || !Number.isInteger(b.maxBytes) || b.maxBytes <= 0)
      return 'maxBytes must be a positive integer';
    maxBytes = b.maxBytes;
  }
  if (request.purpose !== 'DOWNLOAD') {
    if (maxBytes === null) maxBytes = asked;
    if (maxBytes === null) return 'must give maxBytes for an upload';
    if (asked !== null && maxBytes > asked) return `maxBytes ${maxBytes} is more than the ${asked} asked for`;
  }
  const resourceRef = typeof b.resourceRef === 'string' ? b.resourceRef : request.resourceRef;
  if (!resourceRef) return 'names no resourceRef for the new artifact';
  return {
    url: b.url,
    method: expected,
    headers: headers as Record<string, string>,
    expiresAt: expiresAt.toISOString(),
    maxBytes,
    resourceRef,
  };
}
