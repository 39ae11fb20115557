/**
 * The development resource provider (docs/resource-provider.md, "The development provider"): what
 * `tdp dev` gives its development application so that a first task can read and write files with no
 * setup. It is an application's resource provider like any other — TDP asks it over HTTP with a bearer
 * token — served by this process only when the configuration names a files folder (`tdp dev` does;
 * `tdp server` never does unless told). Only its feature module and the CLI (through the server's
 * exports) use it.
 *
 *   POST /dev/resource-provider   the provider: grants on files under the folder, and https:// (and,
 *                                 when insecure URLs are allowed, http://) URLs as inputs
 *   GET  /dev/files/<ref>         a file: with a signed URL (workers) or an API key of the application the
 *                                 provider serves (you); another application's key finds nothing
 *   PUT  /dev/files/<ref>         a worker's output, with a signed URL, at most its granted bytes
 *
 * The folder is its user's alone (0700, files written 0600), and nothing is served or written through a
 * link that leads out of it.
 */
import { randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { chmod, mkdir, realpath, rename, rm, stat } from 'node:fs/promises';
import { dirname, join, sep } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { problem, sendProblem } from '../../adapters/inbound/http/problems.ts';
import { tokensEqual } from '../../core/identity/apiKeys.ts';
import { type ApplicationDeps, updateResourceProvider } from '../../core/identity/applications.ts';
import type { ApiKeyAuthenticator } from '../../core/identity/authenticate.ts';
import type { Clock } from '../../core/shared/ports.ts';
import { type FileAccess, fileRef, outputRef, signAccess, verifyAccess } from './fileRefs.ts';

export const developmentProviderPath = '/dev/resource-provider';
const filesPath = '/dev/files/';

export interface DevelopmentFilesDeps {
  /** The folder the files live in (`.tdp/files` under `tdp dev`). */
  directory: string;
  /** The bearer token TDP sends to the provider (registered for the application). */
  providerToken: string;
  /** Signs the file URLs (derived from the server's keyring, so they outlive a restart). */
  signingKey: Uint8Array;
  authenticator: ApiKeyAuthenticator;
  /** Whether this provider is the application's resource provider (its files are that application's). */
  servesApplication: (applicationId: string) => Promise<boolean>;
  clock: Clock;
  /** Whether http:// URLs are accepted as inputs (development: TDP_ALLOW_INSECURE_CALLBACKS). */
  allowInsecureUrls: boolean;
  grantTtlMs: number;
  maxBytes: number;
}

interface GrantBody {
  taskId?: unknown;
  purpose?: unknown;
  resourceRef?: unknown;
  artifact?: { relativePath?: unknown; maxBytes?: unknown } | null;
}

class Refusal extends Error {
  constructor(
    readonly status: 400 | 403 | 404,
    message: string,
  ) {
    super(message);
  }
}

async function text(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}

const bearer = (request: FastifyRequest) =>
  /^Bearer\s+(\S+)$/i.exec(request.headers.authorization ?? '')?.[1];

const privateDirectoryMode = 0o700;
const privateFileMode = 0o600;

/** `path` is `root` or inside it (both real paths). */
const within = (root: string, path: string) => path === root || path.startsWith(`${root}${sep}`);

/** The folder exists, and only its user may enter it (whatever the umask, and if it was made before). */
export async function privateFilesFolder(directory: string): Promise<void> {
  await mkdir(directory, { recursive: true, mode: privateDirectoryMode });
  await chmod(directory, privateDirectoryMode);
}

export function registerDevelopmentFiles(app: FastifyInstance, deps: DevelopmentFilesDeps): void {
  const pathOf = (ref: string) => join(deps.directory, ...ref.split('/'));
  const root = () => realpath(deps.directory);
  /** The real path of the file `ref` names, when it is a file inside the folder once every link is followed. */
  const fileOf = async (ref: string): Promise<string | null> => {
    const real = await realpath(pathOf(ref)).catch(() => null);
    if (!real || !within(await root(), real)) return null;
    return (await stat(real)).isFile() ? real : null;
  };
  const exists = async (ref: string) => (await fileOf(ref)) !== null;
  /**
   * The folder `target` goes in, made if missing: its nearest existing ancestor must be inside the
   * folder once links are followed (a link out of it is refused, nothing is made there).
   */
  const folderFor = async (target: string): Promise<boolean> => {
    const top = await root();
    let existing = dirname(target);
    for (;;) {
      const real = await realpath(existing).catch(() => null);
      if (real) {
        if (!within(top, real)) return false;
        break;
      }
      existing = dirname(existing);
    }
    await mkdir(dirname(target), { recursive: true, mode: privateDirectoryMode });
    return within(top, await realpath(dirname(target)));
  };

  /** The provider's answer to one grant request (docs/resource-provider.md). */
  async function grant(body: GrantBody, base: string) {
    const expiresAt = deps.clock.now().getTime() + deps.grantTtlMs;
    const answer = (access: FileAccess) => ({
      url: `${base}${filesPath}${access.ref.split('/').map(encodeURIComponent).join('/')}?${signAccess(deps.signingKey, access)}`,
      method: access.method,
      expiresAt: new Date(access.expiresAt).toISOString(),
      ...(access.maxBytes !== null ? { maxBytes: access.maxBytes } : {}),
      resourceRef: access.ref,
    });
    const given = typeof body.resourceRef === 'string' ? body.resourceRef : null;
    if (body.purpose === 'DOWNLOAD') {
      if (given && /^https?:\/\//i.test(given)) {
        if (/^http:/i.test(given) && !deps.allowInsecureUrls)
          throw new Refusal(403, 'http:// inputs are for development only (TDP_ALLOW_INSECURE_CALLBACKS)');
        return {
          url: given,
          method: 'GET',
          expiresAt: new Date(expiresAt).toISOString(),
          resourceRef: given,
        };
      }
      const ref = given ? fileRef(given) : null;
      if (!ref)
        throw new Refusal(400, 'resourceRef must be a path under the files folder or an https:// URL');
      if (!(await exists(ref))) throw new Refusal(404, `no file ${ref} in the files folder`);
      return answer({ ref, method: 'GET', expiresAt, maxBytes: null });
    }
    if (body.purpose === 'UPLOAD') {
      const ref = given ? fileRef(given) : null;
      if (!ref) throw new Refusal(400, 'resourceRef must be a path under the files folder');
      return answer({ ref, method: 'PUT', expiresAt, maxBytes: deps.maxBytes });
    }
    if (body.purpose === 'ARTIFACT') {
      const asked = Number(body.artifact?.maxBytes);
      if (typeof body.taskId !== 'string' || !Number.isSafeInteger(asked) || asked < 1)
        throw new Refusal(400, 'an artifact needs taskId and a positive artifact.maxBytes');
      const ref = outputRef(body.taskId, String(body.artifact?.relativePath ?? 'output'));
      return answer({ ref, method: 'PUT', expiresAt, maxBytes: Math.min(asked, deps.maxBytes) });
    }
    throw new Refusal(400, 'purpose must be DOWNLOAD, UPLOAD or ARTIFACT');
  }

  const refused = (reply: FastifyReply, request: FastifyRequest, error: unknown) => {
    if (!(error instanceof Refusal)) throw error;
    const code =
      error.status === 404 ? 'FILE_NOT_FOUND' : error.status === 403 ? 'FORBIDDEN' : 'VALIDATION_FAILED';
    return sendProblem(reply, problem(code, error.message, undefined, request.url));
  };

  app.register(async (scope) => {
    // Workers PUT raw bytes of any type: the route streams them to disk itself.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_request, payload, done) => done(null, payload));

    scope.post(developmentProviderPath, { schema: { hide: true } }, async (request, reply) => {
      const token = bearer(request);
      if (!token || !tokensEqual(token, deps.providerToken))
        return sendProblem(
          reply,
          problem('UNAUTHENTICATED', 'send the provider token', undefined, request.url),
        );
      let body: GrantBody;
      try {
        body = JSON.parse(await text(request.body as NodeJS.ReadableStream)) as GrantBody;
      } catch {
        return sendProblem(
          reply,
          problem('MALFORMED_JSON', 'the grant request is not JSON', undefined, request.url),
        );
      }
      try {
        return await grant(body ?? {}, `${request.protocol}://${request.host}`);
      } catch (error) {
        return refused(reply, request, error);
      }
    });

    scope.get(`${filesPath}*`, { schema: { hide: true } }, async (request, reply) => {
      const ref = fileRef((request.params as { '*': string })['*']);
      const query = request.query as Record<string, string | undefined>;
      const signed = ref && query.signature ? verifyAccess(deps.signingKey, ref, query, Date.now()) : null;
      const token = bearer(request);
      const principal =
        !signed && !query.signature && token ? await deps.authenticator.authenticate(token) : null;
      if (signed?.method !== 'GET' && !principal)
        return sendProblem(
          reply.header('www-authenticate', 'Bearer'),
          problem('UNAUTHENTICATED', 'send an API key, or use a signed URL', undefined, request.url),
        );
      // The files are the application's this provider serves: to any other application (of this tenant
      // or another) they do not exist, as its tasks do not.
      const mine =
        signed?.method === 'GET' || (principal && (await deps.servesApplication(principal.applicationId)));
      const file = ref && mine ? await fileOf(ref) : null;
      if (!ref || !file)
        return sendProblem(
          reply,
          problem('FILE_NOT_FOUND', 'no such file in the files folder', undefined, request.url),
        );
      const name = ref.split('/').pop()!;
      return reply
        .type(name.endsWith('.zip') ? 'application/zip' : 'application/octet-stream')
        .header('content-disposition', `attachment; filename*=UTF-8''${encodeURIComponent(name)}`)
        .send(createReadStream(file));
    });

    scope.put(`${filesPath}*`, { schema: { hide: true } }, async (request, reply) => {
      const ref = fileRef((request.params as { '*': string })['*']);
      const query = request.query as Record<string, string | undefined>;
      const access = ref ? verifyAccess(deps.signingKey, ref, query, Date.now()) : null;
      if (!ref || access?.method !== 'PUT')
        return sendProblem(
          reply,
          problem('FORBIDDEN', 'a PUT needs a signed upload URL', undefined, request.url),
        );
      const limit = access.maxBytes ?? deps.maxBytes;
      if (Number(request.headers['content-length'] ?? 0) > limit)
        return sendProblem(
          reply,
          problem('PAYLOAD_TOO_LARGE', `at most ${limit} bytes`, undefined, request.url),
        );
      const target = pathOf(ref);
      const partial = `${target}.${randomUUID()}.part`;
      let size = 0;
      const meter = new Transform({
        transform(chunk: Buffer, _encoding, done) {
          size += chunk.length;
          done(
            size > limit ? Object.assign(new Error(`at most ${limit} bytes`), { tooLarge: true }) : null,
            chunk,
          );
        },
      });
      if (!(await folderFor(target)))
        return sendProblem(
          reply,
          problem('FORBIDDEN', 'the path leads out of the files folder', undefined, request.url),
        );
      try {
        await pipeline(
          request.body as NodeJS.ReadableStream,
          meter,
          createWriteStream(partial, { flags: 'wx', mode: privateFileMode }),
        );
        await chmod(partial, privateFileMode);
        await rename(partial, target);
      } catch (error) {
        await rm(partial, { force: true });
        if (!(error as { tooLarge?: boolean }).tooLarge) throw error;
        return sendProblem(
          reply,
          problem('PAYLOAD_TOO_LARGE', `at most ${limit} bytes`, undefined, request.url),
        );
      }
      return reply.code(201).send({ resourceRef: ref, sizeBytes: size });
    });
  });
}

/**
 * Makes the development provider the application's resource provider — unless the application has one
 * of its own (registered through the admin API), which is left alone. Says which it did.
 */
export async function useDevelopmentProvider(
  identity: ApplicationDeps,
  applicationId: string,
  provider: { url: string; token: string },
): Promise<'registered' | 'own provider'> {
  const current = (await identity.store.getApplication(applicationId))?.resourceProviderUrl;
  if (current && new URL(current).pathname !== developmentProviderPath) return 'own provider';
  await updateResourceProvider(identity, applicationId, { url: provider.url, bearerToken: provider.token });
  return 'registered';
}
