/**
 * The archive in a directory (TDP_ARCHIVE_DIR): per archive day, per batch, one gzip-compressed NDJSON
 * file per table and a manifest with each file's row count and checksums:
 *
 *   <dir>/<YYYY-MM-DD>/<batchId>/<table>.ndjson.gz
 *   <dir>/<YYYY-MM-DD>/<batchId>/manifest.json
 *
 * Each file is written under a temporary name, flushed to disk and renamed, the manifest last, so a
 * reader sees a whole batch or none of it; a rerun of a batch replaces its files with the same content.
 */
import { createHash } from 'node:crypto';
import { mkdir, open, readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gunzip, gzip } from 'node:zlib';
import type { TaskHistoryTable } from '../../../core/retention/policy.ts';
import {
  type ArchiveBatch,
  type ArchiveManifest,
  ArchiveUnreadable,
  type ArchiveWriter,
  type TableLines,
} from '../../../core/retention/ports.ts';

const compress = promisify(gzip);
const decompress = promisify(gunzip);
const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');

/** What the manifest holds per table, beyond the port's: the file and the checksum of its bytes. */
interface FileEntry {
  table: TaskHistoryTable;
  rows: number;
  contentSha256: string;
  file: string | null;
  fileSha256: string | null;
}

const ndjson = (lines: string[]) => (lines.length === 0 ? '' : `${lines.join('\n')}\n`);

export class FileArchive implements ArchiveWriter {
  constructor(private readonly directory: string) {}

  async write(batch: ArchiveBatch, tables: TableLines[]): Promise<ArchiveManifest> {
    const folder = this.batchFolder(batch.archiveDay, batch.batchId);
    // Every tenant's history: readable by the server's own user only, whatever the umask.
    await mkdir(folder, { recursive: true, mode: 0o700 });
    const entries: FileEntry[] = [];
    for (const { table, lines } of tables) {
      const content = ndjson(lines);
      const entry: FileEntry = {
        table,
        rows: lines.length,
        contentSha256: sha256(content),
        file: null,
        fileSha256: null,
      };
      if (lines.length > 0) {
        const bytes = await compress(content);
        entry.file = `${table}.ndjson.gz`;
        entry.fileSha256 = sha256(bytes);
        await writeDurably(join(folder, entry.file), bytes);
      }
      entries.push(entry);
    }
    const manifest = {
      batchId: batch.batchId,
      archiveDay: batch.archiveDay,
      taskIds: batch.taskIds,
      tables: entries,
    };
    await writeDurably(join(folder, 'manifest.json'), Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`));
    return manifest;
  }

  async read(
    archiveDay: string,
    batchId: string,
  ): Promise<{ manifest: ArchiveManifest; tables: TableLines[] }> {
    const folder = this.batchFolder(archiveDay, batchId);
    let manifest: ArchiveManifest & { tables: FileEntry[] };
    try {
      manifest = JSON.parse(await readFile(join(folder, 'manifest.json'), 'utf8'));
    } catch (error) {
      throw new ArchiveUnreadable(`batch ${batchId}: no readable manifest (${(error as Error).message})`);
    }
    const tables: TableLines[] = [];
    for (const entry of manifest.tables) {
      let content = '';
      if (entry.file) {
        const bytes = await readFile(join(folder, entry.file)).catch((error: Error) => {
          throw new ArchiveUnreadable(`batch ${batchId}: ${entry.file} unreadable (${error.message})`);
        });
        if (sha256(bytes) !== entry.fileSha256)
          throw new ArchiveUnreadable(`batch ${batchId}: ${entry.file} does not match its checksum`);
        content = (await decompress(bytes)).toString('utf8');
      }
      const lines = content === '' ? [] : content.slice(0, -1).split('\n');
      if (lines.length !== entry.rows || sha256(content) !== entry.contentSha256)
        throw new ArchiveUnreadable(
          `batch ${batchId}: ${entry.table} does not hold the rows its manifest counts`,
        );
      tables.push({ table: entry.table, lines });
    }
    return { manifest, tables };
  }

  /** Archive days and batch ids come from the database, never from a request; checked all the same. */
  private batchFolder(archiveDay: string, batchId: string): string {
    if (!/^\d{4}-\d{2}-\d{2}$/.test(archiveDay) || !/^[0-9a-f-]{36}$/i.test(batchId))
      throw new ArchiveUnreadable(`not an archive batch: ${archiveDay}/${batchId}`);
    return join(this.directory, archiveDay, batchId);
  }
}

/** Writes under a temporary name, flushes to disk, then renames into place. */
async function writeDurably(path: string, bytes: Buffer): Promise<void> {
  const temporary = `${path}.tmp`;
  const handle = await open(temporary, 'w', 0o600);
  try {
    await handle.writeFile(bytes);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temporary, path);
}
