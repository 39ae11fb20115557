/**
 * The development files' references and signed URLs (docs/resource-provider.md, "The development
 * provider"). A reference is a path relative to the files folder (`holiday-photos.zip`,
 * `tasks/<task id>/clean/archive.zip`); a signed URL lets its bearer do one method on one file until it
 * expires, and no more bytes than it says.
 */
import { createHmac } from 'node:crypto';
import { posix } from 'node:path';
import { tokensEqual } from '../../core/identity/apiKeys.ts';

export type FileMethod = 'GET' | 'PUT';

export interface FileAccess {
  ref: string;
  method: FileMethod;
  /** Epoch milliseconds. */
  expiresAt: number;
  maxBytes: number | null;
}

/** `ref` as a safe relative path under the files folder, or null (absolute, `..`, odd characters). */
export function fileRef(ref: string): string | null {
  if (ref.length === 0 || ref.length > 512 || !/^[\p{L}\p{N} ._\-/()+@,=]+$/u.test(ref)) return null;
  const normal = posix.normalize(ref);
  if (normal.startsWith('/') || normal === '.' || normal.split('/').some((part) => part === '..'))
    return null;
  return normal.replace(/\/$/, '');
}

/** Where a task's output goes: `tasks/<task id>/<its relative path>` (a bad path keeps only its name). */
export function outputRef(taskId: string, relativePath: string): string {
  const safeTask = fileRef(taskId) && !taskId.includes('/') ? taskId : 'unknown-task';
  const path = fileRef(relativePath) ?? (fileRef(posix.basename(relativePath)) || 'output');
  return `tasks/${safeTask}/${path}`;
}

function mac(key: Uint8Array, access: FileAccess): string {
  return createHmac('sha256', key)
    .update([access.ref, access.method, access.expiresAt, access.maxBytes ?? ''].join('\n'))
    .digest('base64url');
}

/** The query string of a signed URL for `access`. */
export function signAccess(key: Uint8Array, access: FileAccess): string {
  const query = new URLSearchParams({
    method: access.method,
    expires: String(access.expiresAt),
    ...(access.maxBytes !== null ? { maxBytes: String(access.maxBytes) } : {}),
  });
  query.set('signature', mac(key, access));
  return query.toString();
}

/** The access a signed query grants on `ref` at `now`, or null when it is forged, altered or expired. */
export function verifyAccess(
  key: Uint8Array,
  ref: string,
  query: Record<string, string | undefined>,
  now: number,
): FileAccess | null {
  const method = query.method === 'GET' || query.method === 'PUT' ? query.method : null;
  const expiresAt = Number(query.expires);
  const maxBytes = query.maxBytes === undefined ? null : Number(query.maxBytes);
  if (!method || !Number.isSafeInteger(expiresAt) || !query.signature) return null;
  if (maxBytes !== null && !Number.isSafeInteger(maxBytes)) return null;
  const access: FileAccess = { ref, method, expiresAt, maxBytes };
  if (!tokensEqual(query.signature, mac(key, access))) return null;
  return expiresAt > now ? access : null;
}
