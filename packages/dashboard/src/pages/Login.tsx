/**
 * The sign-in page: an operator's email and password, single sign-on when the server has a provider
 * set up, and — folded away, for the first start or a locked-out team — the bootstrap admin token.
 */
import { type FormEvent, type ReactNode, useState } from 'react';
import { api } from '../api.ts';

/** A form that posts its credentials to `/login` and shows the refusal for people. */
function useSignIn(onSignedIn: () => void) {
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const signIn = async (event: FormEvent, body: Record<string, string>) => {
    event.preventDefault();
    setError(null);
    setBusy(true);
    try {
      await api('/login', { method: 'POST', body });
      onSignedIn();
    } catch (failure) {
      setError((failure as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return { error, busy, signIn };
}

const Refusal = ({ error }: { error: string | null }): ReactNode =>
  error ? (
    <p className="error" role="alert">
      {error}
    </p>
  ) : null;

/** `ssoEnabled`: as the server's refusal of the missing session said. */
export function Login({ ssoEnabled, onLoggedIn }: { ssoEnabled: boolean; onLoggedIn: () => void }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [token, setToken] = useState('');
  const local = useSignIn(onLoggedIn);
  const bootstrap = useSignIn(onLoggedIn);

  return (
    <div className="panel login">
      <h1>TDP dashboard</h1>
      <form data-login="password" onSubmit={(event) => void local.signIn(event, { email, password })}>
        <label>
          Email
          <input
            name="email"
            type="email"
            autoComplete="username"
            value={email}
            onChange={(e) => setEmail(e.target.value)}
          />
        </label>
        <label>
          Password
          <input
            name="password"
            type="password"
            autoComplete="current-password"
            value={password}
            onChange={(e) => setPassword(e.target.value)}
          />
        </label>
        <Refusal error={local.error} />
        <button type="submit" disabled={local.busy || !email || !password}>
          Sign in
        </button>
      </form>
      {ssoEnabled ? (
        <p className="sso">
          <a className="button" href="/dashboard/api/sso/start" data-sso>
            Sign in with single sign-on
          </a>
        </p>
      ) : null}
      <details className="bootstrap">
        <summary>Use the bootstrap admin token</summary>
        <form data-login="token" onSubmit={(event) => void bootstrap.signIn(event, { token })}>
          <p className="muted">
            `tdp dev` prints it; `TDP_ADMIN_TOKEN` for `tdp server`, while `TDP_ADMIN_TOKEN_ENABLED` is on.
          </p>
          <label>
            Admin token
            <input
              name="token"
              type="password"
              autoComplete="off"
              value={token}
              onChange={(e) => setToken(e.target.value)}
            />
          </label>
          <Refusal error={bootstrap.error} />
          <button type="submit" disabled={bootstrap.busy || !token}>
            Sign in with the token
          </button>
        </form>
      </details>
    </div>
  );
}
