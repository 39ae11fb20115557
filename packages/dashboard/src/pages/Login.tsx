import { type FormEvent, useState } from 'react';
import { api } from '../api.ts';

export function Login({ onLoggedIn }: { onLoggedIn: () => void }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState<string | null>(null);
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setError(null);
    try {
      await api('/login', { method: 'POST', body: { token } });
      onLoggedIn();
    } catch (failure) {
      setError((failure as Error).message);
    }
  };
  return (
    <form className="panel login" onSubmit={submit}>
      <h1>TDP dashboard</h1>
      <p>Operators log in with the admin token (`tdp dev` prints it; `TDP_ADMIN_TOKEN` for `tdp server`).</p>
      <label>
        Admin token
        <input
          name="token"
          type="password"
          autoComplete="current-password"
          value={token}
          onChange={(e) => setToken(e.target.value)}
        />
      </label>
      {error ? (
        <p className="error" role="alert">
          {error}
        </p>
      ) : null}
      <button type="submit" disabled={!token}>
        Log in
      </button>
    </form>
  );
}
