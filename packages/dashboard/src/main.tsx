/**
 * The operator dashboard: sign-in, then tasks, task detail, the queue (fair share), workers, pipeline
 * health, workflows, schedules, the audit and (for admins) the operators; each page and control only for
 * the roles that may use it.
 */
import { Component, type ReactNode, StrictMode, useCallback, useEffect, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { api, type Me, whenUnauthenticated } from './api.ts';
import { PipelineCharts } from './charts/PipelineCharts.tsx';
import { roleSummary } from './labels.ts';
import { type ConnectionState, LiveFeed } from './live.ts';
import { Audit } from './pages/Audit.tsx';
import { Health } from './pages/Health.tsx';
import { Login } from './pages/Login.tsx';
import { Operators } from './pages/Operators.tsx';
import { Queue } from './pages/Queue.tsx';
import { Schedules } from './pages/Schedules.tsx';
import { TaskDetailPage } from './pages/TaskDetail.tsx';
import { Tasks } from './pages/Tasks.tsx';
import { Workers } from './pages/Workers.tsx';
import { Workflows } from './pages/Workflows.tsx';
import { MeProvider } from './session.ts';
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

/** The pages, who may see them (null: every role), and their nav label. */
const pages = [
  ['tasks', 'Tasks', null],
  ['queue', 'Queue', null],
  ['workers', 'Workers', 'seePlatform'],
  ['health', 'Pipeline health', 'seePlatform'],
  ['workflows', 'Workflows', null],
  ['schedules', 'Schedules', null],
  ['audit', 'Audit', null],
  ['operators', 'Operators', 'admin'],
] as const satisfies readonly (readonly [string, string, keyof Me['can'] | null])[];

type PagePath = (typeof pages)[number][0];

/** An allowed page's view; under tasks, `id` opens one task. */
function PageView({ page, id, feed }: { page: PagePath; id: string | undefined; feed: LiveFeed | null }) {
  switch (page) {
    case 'tasks':
      if (!feed) return null;
      return id ? <TaskDetailPage taskId={id} feed={feed} /> : <Tasks feed={feed} />;
    case 'queue':
      return <Queue />;
    case 'workers':
      return <Workers />;
    case 'health':
      return (
        <>
          <Health />
          <PipelineCharts />
        </>
      );
    case 'workflows':
      return <Workflows />;
    case 'schedules':
      return <Schedules />;
    case 'audit':
      return <Audit />;
    case 'operators':
      return <Operators />;
  }
}

function App() {
  const [session, setSession] = useState<'unknown' | 'in' | 'out'>('unknown');
  const [me, setMe] = useState<Me | null>(null);
  const [ssoEnabled, setSsoEnabled] = useState(false);
  const [feed, setFeed] = useState<LiveFeed | null>(null);
  const [connection, setConnection] = useState<ConnectionState>('CONNECTING');
  const route = useRoute();

  const loadMe = useCallback(() => {
    api<Me>('/me').then(
      (answer) => {
        setMe(answer);
        // Signing out answers no 401 to read `ssoEnabled` from: the sign-in page after it goes by this.
        setSsoEnabled(answer.sso.enabled);
        setSession('in');
      },
      () => setSession('out'),
    );
  }, []);

  useEffect(() => {
    whenUnauthenticated((refusal) => {
      setSsoEnabled(refusal.ssoEnabled === true);
      setSession('out');
    });
    loadMe();
  }, [loadMe]);

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
  if (session === 'out' || !me) return <Login ssoEnabled={ssoEnabled} onLoggedIn={loadMe} />;

  const [page, id] = route;
  const shown = pages.filter(([, , needs]) => needs === null || me.can[needs]);
  const allowed = shown.find(([path]) => path === page)?.[0];
  const known = pages.some(([path]) => path === page);
  return (
    <MeProvider value={me}>
      <header className="top">
        <strong>TDP</strong>
        <nav>
          {shown.map(([path, label]) => (
            <a key={path} href={`#/${path}`} className={page === path ? 'active' : ''}>
              {label}
            </a>
          ))}
        </nav>
        <ConnectionBadge state={connection} />
        <span className="who" data-operator title={me.operator.email ?? undefined}>
          {me.operator.displayName} · {roleSummary(me.roles)}
        </span>
        <button
          type="button"
          className="link"
          onClick={() => api('/logout', { method: 'POST' }).finally(() => setSession('out'))}
        >
          Sign out
        </button>
      </header>
      <main>
        <ErrorBoundary resetKey={route.join('/')}>
          {allowed ? (
            <PageView page={allowed} id={id} feed={feed} />
          ) : (
            <div className="panel error" role="alert">
              <h2>Not available</h2>
              <p>{known ? 'Your role does not include this page.' : 'There is no such page.'}</p>
              <a href="#/tasks">Back to the tasks</a>
            </div>
          )}
        </ErrorBoundary>
      </main>
    </MeProvider>
  );
}

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
