/**
 * The operator audit, newest first: who did what to which task or resource, why, and what changed.
 * Every role reads it; the server answers only the rows of the tenants the operator reaches.
 */
import { type FormEvent, useCallback, useEffect, useState } from 'react';
import { type AuditEntry, api } from '../api.ts';
import { compactChange } from '../labels.ts';

interface Filters {
  operatorId: string;
  tenantId: string;
  taskId: string;
  action: string;
  /** As the `datetime-local` inputs hold them (local time); sent as ISO instants. */
  from: string;
  to: string;
}

const noFilters: Filters = { operatorId: '', tenantId: '', taskId: '', action: '', from: '', to: '' };

function queryOf(filters: Filters, cursor: string | null): string {
  const query = new URLSearchParams();
  for (const field of ['operatorId', 'tenantId', 'taskId', 'action'] as const) {
    const value = filters[field].trim();
    if (value) query.set(field, value);
  }
  for (const field of ['from', 'to'] as const)
    if (filters[field]) query.set(field, new Date(filters[field]).toISOString());
  if (cursor) query.set('cursor', cursor);
  return query.toString();
}

export function Audit() {
  const [draft, setDraft] = useState<Filters>(noFilters);
  const [filters, setFilters] = useState<Filters>(noFilters);
  const [items, setItems] = useState<AuditEntry[] | null>(null);
  const [cursor, setCursor] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);

  const load = useCallback(
    async (from: string | null) => {
      setBusy(true);
      try {
        const page = await api<{ items: AuditEntry[]; nextCursor: string | null }>(
          `/audit?${queryOf(filters, from)}`,
        );
        setItems((current) => (from && current ? [...current, ...page.items] : page.items));
        setCursor(page.nextCursor);
        setError(null);
      } catch (failure) {
        setError((failure as Error).message);
      } finally {
        setBusy(false);
      }
    },
    [filters],
  );
  useEffect(() => {
    void load(null);
  }, [load]);

  const apply = (event: FormEvent) => {
    event.preventDefault();
    setFilters(draft);
  };
  /** A click on an actor or a task narrows the list to it. */
  const narrow = (change: Partial<Filters>) => {
    const next = { ...filters, ...change };
    setDraft(next);
    setFilters(next);
  };
  const field = (name: keyof Filters, label: string, type = 'text') => (
    <label>
      {label}
      <input
        name={name}
        type={type}
        value={draft[name]}
        onChange={(event) => setDraft({ ...draft, [name]: event.target.value })}
      />
    </label>
  );

  return (
    <section>
      <form className="panel audit-filters" onSubmit={apply}>
        <h2>Audit</h2>
        <div className="fields">
          {field('operatorId', 'Operator id')}
          {field('tenantId', 'Tenant id')}
          {field('taskId', 'Task id')}
          {field('action', 'Action')}
          {field('from', 'From', 'datetime-local')}
          {field('to', 'To', 'datetime-local')}
        </div>
        <button type="submit">Filter</button>{' '}
        <button
          type="button"
          onClick={() => {
            setDraft(noFilters);
            setFilters(noFilters);
          }}
        >
          Clear
        </button>
      </form>
      {error ? <div className="panel error">Could not load the audit: {error}</div> : null}
      {!items ? (
        <p className="loading">Loading the audit…</p>
      ) : items.length === 0 ? (
        <p className="muted">Nothing recorded matches.</p>
      ) : (
        <div className="panel">
          <table className="audit">
            <thead>
              <tr>
                <th>Time</th>
                <th>Actor</th>
                <th>Action</th>
                <th>Subject</th>
                <th>Tenant</th>
                <th>Reason</th>
                <th>Before → after</th>
              </tr>
            </thead>
            <tbody>
              {items.map((entry) => (
                <tr key={entry.id} data-audit-id={entry.id} data-action={entry.action}>
                  <td className="muted">{new Date(entry.createdAt).toLocaleString()}</td>
                  <td data-field="actor">
                    {entry.operatorId ? (
                      <button
                        type="button"
                        className="inline"
                        title="Only this operator's actions"
                        onClick={() => narrow({ operatorId: entry.operatorId! })}
                      >
                        {entry.actor}
                      </button>
                    ) : (
                      entry.actor
                    )}
                  </td>
                  <td className="mono">{entry.action}</td>
                  <td className="mono">
                    {entry.taskId ? <a href={`#/tasks/${entry.taskId}`}>{entry.taskId}</a> : entry.subjectId}
                  </td>
                  <td className="mono" title={entry.tenantId ?? undefined}>
                    {entry.tenantId ? (
                      <button
                        type="button"
                        className="inline"
                        onClick={() => narrow({ tenantId: entry.tenantId! })}
                      >
                        {entry.tenantId.slice(0, 8)}…
                      </button>
                    ) : (
                      'platform'
                    )}
                  </td>
                  <td>{entry.reason ?? '—'}</td>
                  <td className="detail">{compactChange(entry.before, entry.after)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {cursor ? (
            <button type="button" className="more" disabled={busy} onClick={() => void load(cursor)}>
              Load more
            </button>
          ) : null}
        </div>
      )}
    </section>
  );
}
