/**
 * Bytes between the worker and the application's storage, through grant URLs: they never pass through
 * TDP. Network failures here are retryable step failures; a refused or oversized transfer is not.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Grant } from './client.ts';
import { CapabilityError } from './sdk.ts';

export async function downloadTo(grant: Grant, path: string, signal: AbortSignal): Promise<number> {
  let response: Response;
  try {
    response = await fetch(grant.url, { method: 'GET', headers: grant.headers, signal, redirect: 'follow' });
  } catch (error) {
    if (signal.aborted) throw error;
    throw new CapabilityError('DOWNLOAD_FAILED', `download failed: ${(error as Error).message}`, {
      retryable: true,
    });
  }
  if (!response.ok || !response.body)
    throw new CapabilityError('DOWNLOAD_FAILED', `download answered ${response.status}`, {
      retryable: response.status >= 500 || response.status === 429,
    });
  await pipeline(Readable.fromWeb(response.body as never), createWriteStream(path), { signal });
  return (await stat(path)).size;
}

export async function uploadFrom(
  grant: Grant,
  path: string,
  mediaType: string,
  signal: AbortSignal,
): Promise<number> {
  const { size } = await stat(path);
  if (grant.maxBytes !== null && size > grant.maxBytes)
    throw new CapabilityError(
      'OUTPUT_TOO_LARGE',
      `the output is ${size} bytes; the grant allows ${grant.maxBytes}`,
    );
  let response: Response;
  try {
    response = await fetch(grant.url, {
      method: 'PUT',
      headers: { 'content-type': mediaType, 'content-length': String(size), ...grant.headers },
      body: Readable.toWeb(createReadStream(path)) as never,
      duplex: 'half',
      signal,
    } as RequestInit);
  } catch (error) {
    if (signal.aborted) throw error;
    throw new CapabilityError('UPLOAD_FAILED', `upload failed: ${(error as Error).message}`, {
      retryable: true,
    });
  }
  await response.arrayBuffer().catch(() => undefined);
  if (!response.ok)
    throw new CapabilityError('UPLOAD_FAILED', `upload answered ${response.status}`, {
      retryable: response.status >= 500 || response.status === 429,
    });
  return size;
}
