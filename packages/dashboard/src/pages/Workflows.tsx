import { useEffect, useState } from 'react';
import { api } from '../api.ts';
import { Dag } from '../Dag.tsx';

interface Definition {
  id: string;
  name: string;
  version: string;
  tenantName: string;
  steps: { key: string; capability: string | null; dependsOn: string[] }[];
  publishedAt: string;
}

export function Workflows() {
  const [items, setItems] = useState<Definition[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    api<{ items: Definition[] }>('/workflow-definitions').then(
      (d) => setItems(d.items),
      (e: Error) => setError(e.message),
    );
  }, []);
  if (error) return <div className="panel error">Could not load the workflows: {error}</div>;
  if (!items) return <p className="loading">Loading workflows…</p>;
  if (items.length === 0) return <p className="muted">No workflow is published yet.</p>;
  return (
    <section>
      {items.map((d) => (
        <div className="panel" key={d.id} data-workflow={d.name}>
          <h2>
            {d.name}{' '}
            <span className="muted">
              v{d.version} · {d.tenantName}
            </span>
          </h2>
          <Dag nodes={d.steps} />
        </div>
      ))}
    </section>
  );
}
