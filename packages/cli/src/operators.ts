/**
 * `tdp operators …`: the people who sign in to the dashboard and call the admin API, managed through the
 * admin API (`/admin/v1/operators`) of the server at TDP_URL, with TDP_OPERATOR_TOKEN (a personal token)
 * or else TDP_ADMIN_TOKEN (the bootstrap token). A refusal prints as `code: detail` and exits 1.
 */
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { type AdminClient, adminClient, ServerProblem, ServerUnreachable } from './adminClient.ts';
import {
  createdTokenBlock,
  type OperatorView,
  operatorBlock,
  operatorsTable,
  type TokenView,
  tokensTable,
} from './operatorsOutput.ts';
import { readPassword } from './password.ts';

export const operatorsUsage = `Usage: tdp operators <command> [options]

Manage operators through the admin API of TDP_URL (default http://127.0.0.1:8080), as
TDP_OPERATOR_TOKEN (a personal token, tdpo_…) or else TDP_ADMIN_TOKEN (the bootstrap admin token).

Commands:
  list                 Every operator: id, email, name, status, how they sign in, roles
  create --email <e> --name <n> [--password-stdin] [--role <r>] [--tenant <uuid> …]
                       A new operator; --role admin|operator|viewer (default viewer), platform-wide or,
                       with --tenant (repeatable), on those tenants only. --password-stdin reads the
                       password from stdin (typed unseen on a terminal), never from the command line;
                       without it the operator signs in through SSO only
  disable <id>         Stop the operator signing in; their sessions and tokens end at once
  enable <id>          Let a disabled operator sign in again
  sign-out <id>        End every dashboard session of the operator
  roles <id> --role <r> [--tenant <uuid> …]
                       Replace the operator's manual role bindings (SSO-granted ones are kept)
  token create [--operator <id>|me] --name <n> [--role <r>] [--days <d>]
                       A personal API token (default: your own; at most your role; 1-365 days, default
                       90), printed once
  token list [--operator <id>|me]
                       The operator's tokens (default: your own)
  token revoke [--operator <id>|me] <token id>
                       Revoke a token at once

Options:
  --json               Print the server's JSON answer instead of a table, for scripts
  -h, --help           Show this help
`;

const roles = ['admin', 'operator', 'viewer'];

export interface CommandIo {
  stdin: NodeJS.ReadStream | NodeJS.ReadableStream;
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

/** A mistake on the command line: the message, the usage, exit 2. */
class UsageError extends Error {}

type Options = NonNullable<ParseArgsConfig['options']>;
type Values = Record<string, string | boolean | string[] | undefined>;

interface Subcommand {
  options: Options;
  /** The positionals it takes after its name (an id, a token id). */
  arguments: string[];
  run(client: AdminClient, values: Values, args: string[], io: CommandIo): Promise<unknown>;
  /** What people see (the JSON answer goes out as it is under --json). */
  show(answer: unknown, args: string[]): string;
}

const text = (values: Values, name: string) => values[name] as string | undefined;
const required = (values: Values, name: string) => {
  const value = text(values, name);
  if (!value?.trim()) throw new UsageError(`--${name} is required`);
  return value;
};
const operatorPath = (id: string) => `/admin/v1/operators/${encodeURIComponent(id)}`;
const itemsOf = <T>(answer: unknown): T[] => (answer as { items: T[] }).items;

/** `--role R --tenant A --tenant B`: R on A and on B; no --tenant, R platform-wide. */
function bindingsOf(values: Values, fallbackRole?: string) {
  const role = text(values, 'role') ?? fallbackRole;
  if (!role) throw new UsageError('--role is required');
  if (!roles.includes(role)) throw new UsageError(`--role must be one of ${roles.join(', ')}`);
  const tenants = (values.tenant as string[] | undefined) ?? [];
  return tenants.length ? tenants.map((tenantId) => ({ role, tenantId })) : [{ role }];
}

const operatorOption: Options = { operator: { type: 'string' } };
const whose = (values: Values) => text(values, 'operator') || 'me';
const showOperator = (answer: unknown) => operatorBlock(answer as OperatorView);

const subcommands: Record<string, Subcommand> = {
  list: {
    options: {},
    arguments: [],
    run: (client) => client.call('GET', '/admin/v1/operators'),
    show: (answer) => operatorsTable(itemsOf<OperatorView>(answer)),
  },
  create: {
    options: {
      email: { type: 'string' },
      name: { type: 'string' },
      'password-stdin': { type: 'boolean' },
      role: { type: 'string' },
      tenant: { type: 'string', multiple: true },
    },
    arguments: [],
    async run(client, values, _args, io) {
      const email = required(values, 'email');
      const displayName = required(values, 'name');
      const roles = bindingsOf(values, 'viewer');
      const password = values['password-stdin'] ? await readPassword(io.stdin, io.stderr) : undefined;
      if (password === '') throw new UsageError('--password-stdin read an empty password');
      return client.call('POST', '/admin/v1/operators', {
        email,
        displayName,
        roles,
        ...(password === undefined ? {} : { password }),
      });
    },
    show: showOperator,
  },
  disable: {
    options: {},
    arguments: ['id'],
    run: (client, _values, [id]) => client.call('PATCH', operatorPath(id!), { status: 'DISABLED' }),
    show: showOperator,
  },
  enable: {
    options: {},
    arguments: ['id'],
    run: (client, _values, [id]) => client.call('PATCH', operatorPath(id!), { status: 'ACTIVE' }),
    show: showOperator,
  },
  'sign-out': {
    options: {},
    arguments: ['id'],
    run: (client, _values, [id]) => client.call('POST', `${operatorPath(id!)}/sign-out`),
    show: (answer, [id]) => {
      const ended = (answer as { sessionsEnded: number }).sessionsEnded;
      return `Ended ${ended} session${ended === 1 ? '' : 's'} of ${id}.\n`;
    },
  },
  roles: {
    options: { role: { type: 'string' }, tenant: { type: 'string', multiple: true } },
    arguments: ['id'],
    run: (client, values, [id]) => client.call('PATCH', operatorPath(id!), { roles: bindingsOf(values) }),
    show: showOperator,
  },
  'token create': {
    options: {
      ...operatorOption,
      name: { type: 'string' },
      role: { type: 'string' },
      days: { type: 'string' },
    },
    arguments: [],
    run(client, values) {
      const name = required(values, 'name');
      const role = text(values, 'role');
      if (role !== undefined && !roles.includes(role))
        throw new UsageError(`--role must be one of ${roles.join(', ')}`);
      const days = text(values, 'days');
      if (days !== undefined && !/^\d+$/.test(days))
        throw new UsageError('--days must be a whole number of days');
      return client.call('POST', `${operatorPath(whose(values))}/tokens`, {
        name,
        ...(role ? { role } : {}),
        ...(days ? { expiresInDays: Number(days) } : {}),
      });
    },
    show: (answer) => createdTokenBlock(answer as TokenView),
  },
  'token list': {
    options: operatorOption,
    arguments: [],
    run: (client, values) => client.call('GET', `${operatorPath(whose(values))}/tokens`),
    show: (answer) => tokensTable(itemsOf<TokenView>(answer)),
  },
  'token revoke': {
    options: operatorOption,
    arguments: ['token id'],
    run: (client, values, [tokenId]) =>
      client.call('DELETE', `${operatorPath(whose(values))}/tokens/${encodeURIComponent(tokenId!)}`),
    show: (_answer, [tokenId]) => `Token ${tokenId} is revoked.\n`,
  },
};

/** The server `tdp operators` talks to: the first of TDP_URL's (a worker's list may name several). */
export function serverUrlFrom(env: NodeJS.ProcessEnv): string {
  const first = env.TDP_URL?.split(',')[0]?.trim();
  return first || `http://127.0.0.1:${env.TDP_PORT?.trim() || '8080'}`;
}

export async function runOperators(
  argv: string[],
  env: NodeJS.ProcessEnv,
  io: CommandIo = process,
): Promise<number> {
  const say = (stream: NodeJS.WritableStream, line: string) => stream.write(line);
  const name = argv[0] === 'token' && argv[1] && !argv[1].startsWith('-') ? `token ${argv[1]}` : argv[0];
  const rest = argv.slice(name?.split(' ').length ?? 0);
  if (!name || name.startsWith('-')) {
    say(io.stdout, operatorsUsage);
    return argv.includes('-h') || argv.includes('--help') ? 0 : 2;
  }
  const subcommand = subcommands[name];
  if (!subcommand) {
    say(io.stderr, `tdp operators: unknown command "${name}"\n\n${operatorsUsage}`);
    return 2;
  }
  try {
    const { values, positionals } = parseArgs({
      args: rest,
      allowPositionals: true,
      options: {
        ...subcommand.options,
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
    if (values.help) {
      say(io.stdout, operatorsUsage);
      return 0;
    }
    if (positionals.length !== subcommand.arguments.length)
      throw new UsageError(
        subcommand.arguments.length
          ? `"${name}" takes ${subcommand.arguments.map((argument) => `<${argument}>`).join(' ')}`
          : `"${name}" takes no arguments (got ${positionals.join(' ')})`,
      );
    const token = env.TDP_OPERATOR_TOKEN?.trim() || env.TDP_ADMIN_TOKEN?.trim();
    if (!token) {
      say(
        io.stderr,
        'tdp operators: set TDP_OPERATOR_TOKEN (a personal token) or TDP_ADMIN_TOKEN (the bootstrap admin token)\n',
      );
      return 1;
    }
    const client = adminClient(serverUrlFrom(env), token);
    const answer = await subcommand.run(client, values, positionals, io);
    say(
      io.stdout,
      values.json ? `${JSON.stringify(answer ?? {}, null, 2)}\n` : subcommand.show(answer, positionals),
    );
    return 0;
  } catch (error) {
    if (error instanceof ServerProblem) {
      say(io.stderr, `${error.code}: ${error.detail}\n`);
      return 1;
    }
    if (error instanceof ServerUnreachable) {
      say(io.stderr, `tdp operators: ${error.message}\n`);
      return 1;
    }
    // parseArgs' own mistakes (an unknown option, a missing value) are usage errors too.
    const code = (error as { code?: string }).code;
    if (error instanceof UsageError || code?.startsWith('ERR_PARSE_ARGS')) {
      say(io.stderr, `tdp operators ${name}: ${(error as Error).message} (see tdp operators --help)\n`);
      return 2;
    }
    throw error;
  }
}
