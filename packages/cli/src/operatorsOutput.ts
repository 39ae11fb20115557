/** What `tdp operators` prints for people: aligned tables and "label  value" blocks. */

export interface RoleBindingView {
  role: string;
  tenantId: string | null;
  source?: string;
}

/** The server's operator view (docs/operators.md). */
export interface OperatorView {
  id: string;
  email: string;
  displayName: string;
  status: string;
  roles: RoleBindingView[];
  sso: boolean;
  hasPassword: boolean;
  createdAt: string;
  updatedAt: string;
}

/** A personal API token as the server lists it; `token` only in the answer that created it. */
export interface TokenView {
  id: string;
  name: string;
  role: string;
  createdAt: string;
  expiresAt: string;
  revokedAt: string | null;
  token?: string;
}

/** Columns padded to their widest cell, two spaces apart; no trailing blanks. */
export function formatTable(headers: string[], rows: string[][]): string {
  const widths = headers.map((header, column) =>
    Math.max(header.length, ...rows.map((row) => (row[column] ?? '').length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, column) => cell.padEnd(widths[column]!))
      .join('  ')
      .trimEnd();
  return `${[line(headers), ...rows.map(line)].join('\n')}\n`;
}

/** `admin` platform-wide, `operator@<tenant id>` for a tenant; SSO-granted ones marked. */
export function rolesText(roles: RoleBindingView[]): string {
  if (roles.length === 0) return '-';
  return roles
    .map(
      (binding) =>
        `${binding.role}${binding.tenantId ? `@${binding.tenantId}` : ''}${binding.source === 'sso' ? ' (sso)' : ''}`,
    )
    .join(', ');
}

function signInText(operator: OperatorView): string {
  const ways = [operator.hasPassword ? 'password' : null, operator.sso ? 'sso' : null].filter(Boolean);
  return ways.length ? ways.join(', ') : '-';
}

export function operatorsTable(operators: OperatorView[]): string {
  if (operators.length === 0) return 'No operators.\n';
  return formatTable(
    ['ID', 'EMAIL', 'NAME', 'STATUS', 'SIGN-IN', 'ROLES'],
    operators.map((operator) => [
      operator.id,
      operator.email,
      operator.displayName,
      operator.status,
      signInText(operator),
      rolesText(operator.roles),
    ]),
  );
}

function block(pairs: [string, string][]): string {
  const width = Math.max(...pairs.map(([label]) => label.length));
  return `${pairs.map(([label, value]) => `${label.padEnd(width)}  ${value}`).join('\n')}\n`;
}

export function operatorBlock(operator: OperatorView): string {
  return block([
    ['ID', operator.id],
    ['Email', operator.email],
    ['Name', operator.displayName],
    ['Status', operator.status],
    ['Sign-in', signInText(operator)],
    ['Roles', rolesText(operator.roles)],
  ]);
}

function tokenState(token: TokenView, now: Date): string {
  if (token.revokedAt) return 'revoked';
  return new Date(token.expiresAt) <= now ? 'expired' : 'active';
}

export function tokensTable(tokens: TokenView[], now = new Date()): string {
  if (tokens.length === 0) return 'No tokens.\n';
  return formatTable(
    ['ID', 'NAME', 'ROLE', 'STATE', 'CREATED', 'EXPIRES'],
    tokens.map((token) => [
      token.id,
      token.name,
      token.role,
      tokenState(token, now),
      token.createdAt,
      token.expiresAt,
    ]),
  );
}

/** The new token, shown this once. */
export function createdTokenBlock(token: TokenView): string {
  return `${block([
    ['Token', token.token ?? ''],
    ['ID', token.id],
    ['Name', token.name],
    ['Role', token.role],
    ['Expires', token.expiresAt],
  ])}\nKeep the token now: it is not shown again. Scripts pass it as TDP_OPERATOR_TOKEN.\n`;
}
