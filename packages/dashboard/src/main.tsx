/** The operator dashboard: login, then tasks, task detail, workers, pipeline health, workflows, schedules. */
import { Component, type ReactNode, StrictMode, useEffect, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { api, whenUnauthenticated } from './api.ts';
import { PipelineCharts } from './charts/PipelineCharts.tsx';
import { type ConnectionState, LiveFeed } from './live.ts';
import { Health } from './pages/Health.tsx';
import { Login } from './pages/Login.tsx';
import { Schedules } from './pages/Schedules.tsx';
import { TaskDetailPage } from './pages/TaskDetail.tsx';
import { Tasks } from './pages/Tasks.tsx';
import { Workers } from './pages/Workers.tsx';
import { Workflows } from './pages/Workflows.tsx';
import './style.css';

/** Hash routes (`#/tasks/<id>`): the server serves one page, the app picks the view. */
const currentRoute = () => (window.location.hash.replace(/^#\/?/, '') || 'tasks').split('/');

function useRoute(): string[] {
  const [route, setRoute] = useState(currentRoute);
  useEffect(() => {
    const update = () => setRoute(currentRoute());
    window.addEventListener('hashchange', update);
    return () => window.removeEventListener('hashchange', update);
  }, []);
  return route;
}

/** An error in one view shows as a message with a way back, never as a blank screen. */
class ErrorBoundary extends Component<{ children: ReactNode; resetKey: string }, { error: Error | null }> {
  override state: { error: Error | null } = { error: null };
  static getDerivedStateFromError(error: Error) {
    return { error };
  }
  override componentDidUpdate(previous: { resetKey: string }) {
    if (previous.resetKey !== this.props.resetKey && this.state.error) this.setState({ error: null });
  }
  override render() {
    if (!this.state.error) return this.props.children;
    return (
      <div className="panel error" role="alert">
        <h2>This view failed</h2>
        <p>{this.state.error.message}</p>
        <a href="#/tasks">Back to the tasks</a>
      </div>
    );
  }
}

function ConnectionBadge({ state }: { state: ConnectionState }) {
  return (
    <span className="connection" data-state={state} title="Live updates from the realtime gateway">
      {state}
    </span>
  );
}

function App() {
  const [session, setSession] = useState<'unknown' | 'in' | 'out'>('unknown');
  const [feed, setFeed] = useState<LiveFeed | null>(null);
  const [connection, setConnection] = useState<ConnectionState>('CONNECTING');
  const route = useRoute();

  useEffect(() => {
    whenUnauthenticated(() => setSession('out'));
    api('/me').then(
      () => setSession('in'),
      () => setSession('out'),
    );
  }, []);

  useEffect(() => {
    if (session !== 'in') return;
    const live = new LiveFeed();
    const unsubscribe = live.onState(setConnection);
    live.start().catch(() => setConnection('STALE'));
    setFeed(live);
    return () => {
      unsubscribe();
      live.stop();
    };
  }, [session]);

  if (session === 'unknown') return <p className="loading">Loading…</p>;
  if (session === 'out') return <Login onLoggedIn={() => setSession('in')} />;

  const [page, id] = route;
  const nav = [
    ['tasks', 'Tasks'],
    ['workers', 'Workers'],
    ['health', 'Pipeline health'],
    ['workflows', 'Workflows'],
    ['schedules', 'Schedules'],
  ] as const;
  return (
    <>
      <header className="top">
        <strong>TDP</strong>
        <nav>
          {nav.map(([path, label]) => (
            <a key={path} href={`#/${path}`} className={page === path ? 'active' : ''}>
              {label}
            </a>
          ))}
        </nav>
        <ConnectionBadge state={connection} />
        <button
          type="button"
          className="link"
          onClick={() => api('/logout', { method: 'POST' }).finally(() => setSession('out'))}
        >
          Log out
        </button>
      </header>
      <main>
        <ErrorBoundary resetKey={route.join('/')}>
          {page === 'tasks' && id && feed ? <TaskDetailPage taskId={id} feed={feed} /> : null}
          {page === 'tasks' && !id && feed ? <Tasks feed={feed} /> : null}
          {page === 'workers' ? <Workers /> : null}
          {page === 'health' ? <Health /> : null}
          {page === 'health' ? <PipelineCharts /> : null}
          {page === 'workflows' ? <Workflows /> : null}
          {page === 'schedules' ? <Schedules /> : null}
        </ErrorBoundary>
      </main>
    </>
  );
}

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
