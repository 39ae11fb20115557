/**
 * Bytes between the worker and the application's storage, through grant URLs: they never pass through
 * TDP. Network failures here are retryable step failures; a refused or oversized transfer is not.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { failureSentence } from '@tdp/protocol';
import type { Grant } from './client.ts';
import { CapabilityError } from './sdk.ts';

export async function downloadTo(grant: Grant, path: string, signal: AbortSignal): Promise<number> {
  let response: Response;
  try {
    response = await fetch(grant.url, { method: 'GET', headers: grant.headers, signal, redirect: 'follow' });
  } catch (error) {
    if (signal.aborted) throw error;
    throw new CapabilityError('DOWNLOAD_FAILED', failureSentence('DOWNLOAD_FAILED'), {
      retryable: true,
      detail: `download failed: ${(error as Error).message}`,
    });
  }
  if (!response.ok || !response.body)
    throw new CapabilityError('DOWNLOAD_FAILED', failureSentence('DOWNLOAD_FAILED'), {
      retryable: response.status >= 500 || response.status === 429,
      detail: `download answered ${response.status}`,
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
      `The result is ${size} bytes, more than the ${grant.maxBytes} the application’s storage accepts.`,
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
    throw new CapabilityError('UPLOAD_FAILED', failureSentence('UPLOAD_FAILED'), {
      retryable: true,
      detail: `upload failed: ${(error as Error).message}`,
    });
  }
  await response.arrayBuffer().catch(() => undefined);
  if (!response.ok)
    throw new CapabilityError('UPLOAD_FAILED', failureSentence('UPLOAD_FAILED'), {
      retryable: response.status >= 500 || response.status === 429,
      detail: `upload answered ${response.status}`,
    });
  return size;
}
