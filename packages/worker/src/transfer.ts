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

/**
 * Downloads into `path` with the newest grant (`grantOf`: renewed when due). A download broken off midway
 * resumes up to `resumes` times where it stopped (a Range request), on a renewed URL if the old one
 * is due; storage that ignores Range sends it whole again.
 */
export async function downloadTo(
  grantOf: () => Promise<Grant>,
  path: string,
  signal: AbortSignal,
  resumes: number,
): Promise<number> {
  let written = 0;
  for (let tries = 0; ; tries += 1) {
    const grant = await grantOf();
    const range: Record<string, string> = written > 0 ? { range: `bytes=${written}-` } : {};
    let response: Response;
    try {
      response = await fetch(grant.url, {
        method: 'GET',
        headers: { ...grant.headers, ...range },
        signal,
        redirect: 'follow',
      });
    } catch (error) {
      if (signal.aborted) throw error;
      if (tries < resumes) continue;
      throw downloadFailed(`download failed: ${(error as Error).message}`);
    }
    if (!response.ok || !response.body)
      throw new CapabilityError('DOWNLOAD_FAILED', failureSentence('DOWNLOAD_FAILED'), {
        retryable: response.status >= 500 || response.status === 429,
        detail: `download answered ${response.status}`,
      });
    const resumed = written > 0 && response.status === 206;
    try {
      await pipeline(
        Readable.fromWeb(response.body as never),
        createWriteStream(path, { flags: resumed ? 'a' : 'w' }),
        { signal },
      );
      return (await stat(path)).size;
    } catch (error) {
      if (signal.aborted) throw error;
      if (tries >= resumes) throw downloadFailed(`download broke off: ${(error as Error).message}`);
      written = await stat(path).then(
        (s) => s.size,
        () => 0,
      );
    }
  }
}

const downloadFailed = (detail: string) =>
  new CapabilityError('DOWNLOAD_FAILED', failureSentence('DOWNLOAD_FAILED'), { retryable: true, detail });

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
