/**
 * Bytes between the worker and the application's storage, through grant URLs: they never pass through
 * TDP. Every transfer goes through the egress policy (`@tdp/egress`): the URL's address, and each
 * redirect's, must be public or on the operator's allow-list (the TDP servers the worker was given are
 * always allowed: TDP's development provider serves its files from there). Network failures are
 * retryable step failures; a refused address, a refused redirect or an oversized file is not.
 */
import { createReadStream, createWriteStream, type WriteStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { createEgress, type Egress, EgressError, egressRequest } from '@tdp/egress';
import { failureSentence } from '@tdp/protocol';
import type { Grant } from './client.ts';
import { CapabilityError } from './sdk.ts';

/** The connections transfers use and their caps; one per runtime, closed with it. */
export interface Transfers {
  readonly egress: Egress;
  /** A download larger than this fails (`DOWNLOAD_TOO_LARGE`) and stops there. */
  readonly maxDownloadBytes: number;
  close(): Promise<void>;
}

export const defaultMaxDownloadBytes = 1024 ** 3;
/** Redirect hops a download follows, each one re-checked. */
const downloadRedirects = 5;
/** Silence this long from storage (no headers, no next bytes) fails the transfer. */
const transferIdleMs = 60_000;
/**
 * Bytes received but not yet on disk. The body is never paused (see `@tdp/egress` request.ts), so a
 * disk slower than the network would buffer without end; past this the download fails, retryable.
 */
const maxUnwrittenBytes = 64 * 1024 ** 2;

/**
 * The runtime's transfers: the allow-list the operator gave (`TDP_EGRESS_ALLOW`), plus each TDP server
 * URL's `host:port`.
 */
export function workerTransfers(
  options: { egressAllow?: readonly string[]; maxDownloadBytes?: number },
  servers: readonly string[],
): Transfers {
  const own = servers.map((base) => {
    const url = new URL(base);
    return `${url.hostname}:${url.port || (url.protocol === 'https:' ? 443 : 80)}`;
  });
  const egress = createEgress([...(options.egressAllow ?? []), ...own]);
  return {
    egress,
    maxDownloadBytes: options.maxDownloadBytes ?? defaultMaxDownloadBytes,
    close: () => egress.close(),
  };
}

/**
 * Downloads into `path` with the newest grant (`grantOf`: renewed when due). A download broken off midway
 * resumes up to `resumes` times where it stopped (a Range request), on a renewed URL if the old one
 * is due; storage that ignores Range sends it whole again.
 */
export async function downloadTo(
  transfers: Transfers,
  grantOf: () => Promise<Grant>,
  path: string,
  signal: AbortSignal,
  resumes: number,
): Promise<number> {
  let written = 0;
  for (let tries = 0; ; tries += 1) {
    const grant = await grantOf();
    const range: Record<string, string> = written > 0 ? { range: `bytes=${written}-` } : {};
    // The file opens once storage answers 2xx: appended to on a 206 after a break, else written anew.
    const out: { file: WriteStream | null; error: Error | null; tooLarge: boolean } = {
      file: null,
      error: null,
      tooLarge: false,
    };
    let status = 0;
    try {
      ({ status } = await egressRequest(transfers.egress.agent, grant.url, {
        method: 'GET',
        headers: { ...grant.headers, ...range },
        redirects: downloadRedirects,
        // Storage that ignores Range sends the whole file again: the cap is the file's, checked on the
        // appended part below.
        maxBodyBytes: transfers.maxDownloadBytes,
        idleTimeoutMs: transferIdleMs,
        signal,
        onResponse: (answered) => {
          if (answered < 200 || answered > 299) return null;
          const appending = written > 0 && answered === 206;
          const file = createWriteStream(path, { flags: appending ? 'a' : 'w' });
          file.on('error', (error) => {
            out.error ??= error;
          });
          out.file = file;
          let received = appending ? written : 0;
          return (chunk) => {
            if (out.error) throw out.error;
            received += chunk.length;
            if (received > transfers.maxDownloadBytes) {
              out.tooLarge = true;
              throw new EgressError('EGRESS_TOO_LARGE');
            }
            file.write(chunk);
            // Recorded as the file's failure, so the step says the disk failed, not the network.
            if (file.writableLength > maxUnwrittenBytes) {
              out.error = new Error('the disk does not keep up');
              throw out.error;
            }
          };
        },
      }));
      await closeFile(out.file);
    } catch (error) {
      await closeFile(out.file).catch(() => undefined);
      if (signal.aborted) throw error;
      if (out.tooLarge) throw transferRefused(new EgressError('EGRESS_TOO_LARGE'));
      if (error instanceof EgressError && !error.retryable) throw transferRefused(error);
      if (tries >= resumes)
        throw downloadFailed(
          `download ${written > 0 ? 'broke off' : 'failed'}: ${messageOf(error, out.error)}`,
        );
      if (out.file)
        written = await stat(path).then(
          (s) => s.size,
          () => 0,
        );
      continue;
    }
    if (status < 200 || status > 299)
      throw new CapabilityError('DOWNLOAD_FAILED', failureSentence('DOWNLOAD_FAILED'), {
        retryable: status >= 500 || status === 429,
        detail: `download answered ${status}`,
      });
    return (await stat(path)).size;
  }
}

/** Ends the file and waits until what was written is on disk (or the write failed). */
function closeFile(file: WriteStream | null): Promise<void> {
  if (!file) return Promise.resolve();
  return new Promise((resolve, reject) => {
    if (file.closed) return resolve();
    file.once('close', resolve);
    file.once('error', reject);
    file.end();
  });
}

/** What a tenant may read of a failure: the policy's fixed words, never an errno, address or port. */
const messageOf = (error: unknown, fileError: Error | null) =>
  fileError ? `could not write the file (${fileError.message})` : (error as Error).message;

const downloadFailed = (detail: string) =>
  new CapabilityError('DOWNLOAD_FAILED', failureSentence('DOWNLOAD_FAILED'), { retryable: true, detail });

/** A failure no retry mends: the address refused (or a redirect), or a file over the cap. */
function transferRefused(error: EgressError): CapabilityError {
  const code = error.code === 'EGRESS_TOO_LARGE' ? 'DOWNLOAD_TOO_LARGE' : 'EGRESS_REFUSED';
  return new CapabilityError(code, failureSentence(code), { detail: error.message });
}

export async function uploadFrom(
  transfers: Transfers,
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
  let status: number;
  try {
    ({ status } = await egressRequest(transfers.egress.agent, grant.url, {
      method: 'PUT',
      headers: { 'content-type': mediaType, 'content-length': String(size), ...grant.headers },
      body: createReadStream(path),
      // Storage's answer to a PUT holds nothing we keep: its status is enough.
      onResponse: () => null,
      maxBodyBytes: 0,
      idleTimeoutMs: transferIdleMs,
      signal,
    }));
  } catch (error) {
    if (signal.aborted) throw error;
    if (error instanceof EgressError && !error.retryable) throw transferRefused(error);
    throw new CapabilityError('UPLOAD_FAILED', failureSentence('UPLOAD_FAILED'), {
      retryable: true,
      detail: `upload failed: ${(error as Error).message}`,
    });
  }
  if (status < 200 || status > 299)
    throw new CapabilityError('UPLOAD_FAILED', failureSentence('UPLOAD_FAILED'), {
      retryable: status >= 500 || status === 429,
      detail: `upload answered ${status}`,
    });
  return size;
}
