/**
 * `tdp dev`'s development admin: an operator a developer signs in to the dashboard as, made through the
 * admin API with the bootstrap token, its password kept in $TDP_HOME/credentials.json so a restart
 * prints the same one.
 */
import { randomBytes } from 'node:crypto';
import { adminClient, ServerProblem } from './adminClient.ts';
import type { OperatorView } from './operatorsOutput.ts';

export const devOperatorEmail = 'dev@localhost';

export interface DevOperator {
  email: string;
  password: string;
}

/**
 * Creates dev@localhost (platform-wide admin) unless it exists. When it exists and no password was
 * remembered (a .tdp from before, or its credentials.json lost that line), it gets a new one; a
 * remembered password is left as it is.
 */
export async function ensureDevelopmentOperator(
  serverUrl: string,
  adminToken: string,
  rememberedPassword: string | undefined,
): Promise<DevOperator> {
  const client = adminClient(serverUrl, adminToken);
  const password = rememberedPassword ?? randomBytes(18).toString('base64url');
  try {
    await client.call('POST', '/admin/v1/operators', {
      email: devOperatorEmail,
      displayName: 'Developer',
      password,
      roles: [{ role: 'admin' }],
    });
    return { email: devOperatorEmail, password };
  } catch (error) {
    if (!(error instanceof ServerProblem && error.code === 'OPERATOR_EMAIL_TAKEN')) {
      if (error instanceof ServerProblem)
        error.message = `could not create the development admin ${devOperatorEmail}: ${error.message}`;
      throw error;
    }
  }
  if (rememberedPassword) return { email: devOperatorEmail, password };
  const listed = await client.call<{ items: OperatorView[] }>('GET', '/admin/v1/operators');
  const existing = listed.items.find((operator) => operator.email === devOperatorEmail);
  if (!existing) throw new Error(`${devOperatorEmail} is taken but not listed`);
  await client.call('PATCH', `/admin/v1/operators/${existing.id}`, { password });
  return { email: devOperatorEmail, password };
}
