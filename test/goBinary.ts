import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/**
 * A binary `go install` put in place (scripts/services.sh): `$<override>` first, then GOBIN, the first
 * GOPATH's bin, and `~/go/bin`. Null when none has it.
 */
export function goBinary(name: string, override: string | undefined): string | null {
  const candidates = [
    override,
    process.env.GOBIN ? join(process.env.GOBIN, name) : undefined,
    process.env.GOPATH ? join(process.env.GOPATH.split(':')[0]!, 'bin', name) : undefined,
    join(homedir(), 'go', 'bin', name),
  ];
  return candidates.find((path): path is string => Boolean(path && existsSync(path))) ?? null;
}
