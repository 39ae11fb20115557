/**
 * The operators, for platform-wide admins: who has an account, their roles and how they sign in; create
 * one, disable or enable it (disabling ends its sessions and tokens at once), sign it out everywhere.
 */
import { type FormEvent, useState } from 'react';
import { api, type OperatorRole, type OperatorView, operatorRoles, usePolled } from '../api.ts';
import { StatusBadge } from '../format.tsx';

export function Operators() {
  // Another admin's change shows within a few seconds; this page's own changes reload at once.
  const { data, error, reload } = usePolled<{ items: OperatorView[] }>('/operators', 10_000);
  if (error && !data) return <div className="panel error">Could not load the operators: {error}</div>;
  if (!data) return <p className="loading">Loading operators…</p>;
  const items = data.items;
  return (
    <section>
      <NewOperator onCreated={reload} />
      <div className="panel">
        <h2>Operators</h2>
        {items.length === 0 ? (
          <p className="muted">No operator has an account yet.</p>
        ) : (
          <table className="operators">
            <thead>
              <tr>
                <th>Operator</th>
                <th>Status</th>
                <th>Roles</th>
                <th>Signs in with</th>
                <th>Created</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {items.map((operator) => (
                <OperatorRow key={operator.id} operator={operator} onChanged={reload} />
              ))}
            </tbody>
          </table>
        )}
      </div>
    </section>
  );
}

/** A role binding for people: `admin`, `operator · tenant 0192f3a1…`. */
const bindingLabel = (binding: OperatorView['roles'][number]) =>
  `${binding.role}${binding.tenantId ? ` · tenant ${binding.tenantId.slice(0, 8)}…` : ''}${binding.source === 'sso' ? ' (SSO)' : ''}`;

function OperatorRow({ operator, onChanged }: { operator: OperatorView; onChanged: () => void }) {
  const [busy, setBusy] = useState(false);
  const [note, setNote] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const act = async (action: () => Promise<unknown>, done: string) => {
    setBusy(true);
    setError(null);
    setNote(null);
    try {
      await action();
      setNote(done);
      onChanged();
    } catch (failure) {
      setError((failure as Error).message);
    } finally {
      setBusy(false);
    }
  };
  const disabled = operator.status === 'DISABLED';
  const setStatus = () =>
    act(
      () =>
        api(`/operators/${operator.id}`, {
          method: 'PATCH',
          body: { status: disabled ? 'ACTIVE' : 'DISABLED' },
        }),
      disabled ? 'enabled' : 'disabled; its sessions and tokens ended',
    );
  const signOut = () =>
    act(() => api(`/operators/${operator.id}/sign-out`, { method: 'POST' }), 'signed out everywhere');
  return (
    <tr data-operator-email={operator.email}>
      <td>
        {operator.displayName}
        <div className="muted">{operator.email}</div>
      </td>
      <td data-field="status">
        <StatusBadge status={operator.status} />
      </td>
      <td>
        {operator.roles.map((binding) => (
          <div
            key={`${binding.role}-${binding.tenantId}-${binding.source}`}
            title={binding.tenantId ?? undefined}
          >
            {bindingLabel(binding)}
          </div>
        ))}
      </td>
      <td>
        {[operator.hasPassword ? 'password' : null, operator.sso ? 'SSO' : null].filter(Boolean).join(', ') ||
          '—'}
      </td>
      <td className="muted">{new Date(operator.createdAt).toLocaleDateString()}</td>
      <td className="operator-actions">
        <button
          type="button"
          data-action={disabled ? 'enable' : 'disable'}
          disabled={busy}
          onClick={() => void setStatus()}
        >
          {disabled ? 'Enable' : 'Disable'}
        </button>
        <button
          type="button"
          data-action="sign-out"
          disabled={busy || disabled}
          onClick={() => void signOut()}
        >
          Sign out everywhere
        </button>
        {note ? <div className="muted">{note}</div> : null}
        {error ? <div className="failure">{error}</div> : null}
      </td>
    </tr>
  );
}

/** Tenant ids as typed, comma- or space-separated; none: the role is platform-wide. */
const tenantIdsOf = (text: string) => text.split(/[\s,]+/).filter((id) => id !== '');

function NewOperator({ onCreated }: { onCreated: () => void }) {
  const blank = { email: '', displayName: '', password: '', role: 'viewer' as OperatorRole, tenants: '' };
  const [form, setForm] = useState(blank);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [created, setCreated] = useState<string | null>(null);
  const set = (field: keyof typeof blank) => (event: { target: { value: string } }) =>
    setForm({ ...form, [field]: event.target.value });
  const create = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    setCreated(null);
    const tenantIds = tenantIdsOf(form.tenants);
    try {
      await api('/operators', {
        method: 'POST',
        body: {
          email: form.email.trim(),
          displayName: form.displayName.trim(),
          ...(form.password ? { password: form.password } : {}),
          roles:
            tenantIds.length === 0
              ? [{ role: form.role }]
              : tenantIds.map((tenantId) => ({ role: form.role, tenantId })),
        },
      });
      setCreated(form.email.trim());
      setForm(blank);
      onCreated();
    } catch (failure) {
      setError((failure as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="panel new-operator" data-form="new-operator" onSubmit={(event) => void create(event)}>
      <h2>New operator</h2>
      <div className="fields">
        <label>
          Email
          <input name="email" type="email" required value={form.email} onChange={set('email')} />
        </label>
        <label>
          Display name
          <input name="displayName" required value={form.displayName} onChange={set('displayName')} />
        </label>
        <label>
          Password <span className="muted">(none: single sign-on only)</span>
          <input
            name="password"
            type="password"
            autoComplete="new-password"
            value={form.password}
            onChange={set('password')}
          />
        </label>
        <label>
          Role
          <select name="role" value={form.role} onChange={set('role')}>
            {operatorRoles.map((role) => (
              <option key={role} value={role}>
                {role}
              </option>
            ))}
          </select>
        </label>
        <label>
          Tenant ids <span className="muted">(comma-separated; none: platform-wide)</span>
          <input name="tenants" value={form.tenants} onChange={set('tenants')} />
        </label>
      </div>
      <button type="submit" disabled={busy || !form.email.trim() || !form.displayName.trim()}>
        Create
      </button>
      {created ? <span className="muted"> {created} can now sign in</span> : null}
      {error ? (
        <p className="failure" role="alert">
          {error}
        </p>
      ) : null}
    </form>
  );
}
