/**
 * The demo app's file store: bytes on disk under one folder, reachable from outside only through
 * signed, expiring URLs (what the resource-provider contract hands to TDP's workers).
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';

export type SignedMethod = 'GET' | 'PUT';

export interface SignedAccess {
  assetId: string;
  method: SignedMethod;
  expiresAt: number;
  maxBytes: number | null;
}

export class TooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`more than ${limit} bytes`);
    this.name = 'TooLargeError';
  }
}

export class FileStore {
  constructor(
    private readonly directory: string,
    private readonly signingKey: Buffer,
  ) {}

  async init(): Promise<void> {
    await mkdir(this.directory, { recursive: true });
  }

  pathOf(assetId: string): string {
    return join(this.directory, assetId);
  }

  /** Writes a stream to the asset's file (via a temporary name), refusing more than `maxBytes`. */
  async write(
    assetId: string,
    source: NodeJS.ReadableStream,
    maxBytes: number,
  ): Promise<{ sizeBytes: number; sha256: string }> {
    const hash = createHash('sha256');
    let size = 0;
    const meter = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        size += chunk.length;
        if (size > maxBytes) return done(new TooLargeError(maxBytes));
        hash.update(chunk);
        done(null, chunk);
      },
    });
    const temporary = `${this.pathOf(assetId)}.part`;
    try {
      await pipeline(source, meter, createWriteStream(temporary));
      await rename(temporary, this.pathOf(assetId));
    } catch (error) {
      await rm(temporary, { force: true });
      throw error;
    }
    return { sizeBytes: size, sha256: hash.digest('hex') };
  }

  async size(assetId: string): Promise<number | null> {
    return stat(this.pathOf(assetId)).then(
      (s) => s.size,
      () => null,
    );
  }

  read(assetId: string): NodeJS.ReadableStream {
    return createReadStream(this.pathOf(assetId));
  }

  /** The query string that lets its bearer do `method` on one asset until `expiresAt`. */
  sign(access: SignedAccess): string {
    const query = new URLSearchParams({
      method: access.method,
      expires: String(access.expiresAt),
      ...(access.maxBytes !== null ? { maxBytes: String(access.maxBytes) } : {}),
    });
    query.set('signature', this.mac(access));
    return query.toString();
  }

  /** The access a signed query grants, or null when it is forged, altered or expired. */
  verify(assetId: string, query: Record<string, string | undefined>, now: number): SignedAccess | null {
    const method: SignedMethod | null =
      query.method === 'GET' || query.method === 'PUT' ? query.method : null;
    const expiresAt = Number(query.expires);
    const maxBytes = query.maxBytes === undefined ? null : Number(query.maxBytes);
    if (!method || !Number.isSafeInteger(expiresAt) || !query.signature) return null;
    if (maxBytes !== null && !Number.isSafeInteger(maxBytes)) return null;
    const access = { assetId, method, expiresAt, maxBytes };
    const expected = Buffer.from(this.mac(access), 'hex');
    const given = Buffer.from(query.signature, 'hex');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
    return expiresAt > now ? access : null;
  }

  private mac(access: SignedAccess): string {
    return createHmac('sha256', this.signingKey)
      .update([access.assetId, access.method, access.expiresAt, access.maxBytes ?? ''].join('\n'))
      .digest('hex');
  }
}
