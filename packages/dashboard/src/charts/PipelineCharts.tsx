/**
 * The pipeline's curves (docs/dashboard.md) over the last hour or day, drawn with uPlot (small and fast
 * on canvas) from `GET /dashboard/api/charts`, read again every few seconds so new points appear live.
 * Each chart's legend says the latest value of each series and the window's total or peak, in text
 * and in data- attributes (what people and tests read; the canvas is the picture).
 */
import { useEffect, useMemo, useRef, useState } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { usePolled } from '../api.ts';
import { duration } from '../format.tsx';
import './charts.css';

type Range = 'hour' | 'day';
type SeriesName =
  | 'created'
  | 'finished'
  | 'submitToStartP50Ms'
  | 'submitToStartP99Ms'
  | 'queueDepth'
  | 'waitingForWorker'
  | 'staleSteps'
  | 'outboxBacklog'
  | 'outboxOldestAgeMs'
  | 'outboxDead'
  | 'relayBacklog'
  | 'relayOldestAgeMs'
  | 'relayDead'
  | 'callbackBacklog'
  | 'callbackOldestAgeMs'
  | 'callbackDead';

export interface ChartSeries {
  range: Range;
  bucketSeconds: number;
  times: number[];
  series: Record<SeriesName, (number | null)[]>;
}

interface Line {
  name: SeriesName;
  label: string;
  color: string;
}

interface ChartSpec {
  id: string;
  title: (bucket: string) => string;
  /** Milliseconds are shown as durations. */
  unit: 'count' | 'ms';
  /** Counts per bucket add up over the window; gauges and percentiles show their peak. */
  summary: 'total' | 'peak';
  lines: Line[];
}

const charts: ChartSpec[] = [
  {
    id: 'tasks',
    title: (bucket) => `Tasks per ${bucket}`,
    unit: 'count',
    summary: 'total',
    lines: [
      { name: 'created', label: 'created', color: '#2f5bd3' },
      { name: 'finished', label: 'finished', color: '#2e9d5b' },
    ],
  },
  {
    id: 'queue',
    title: () => 'Queue',
    unit: 'count',
    summary: 'peak',
    lines: [
      { name: 'queueDepth', label: 'ready, not started', color: '#2f5bd3' },
      { name: 'waitingForWorker', label: 'waiting for a worker', color: '#d9822b' },
    ],
  },
  {
    id: 'submit-to-start',
    title: () => 'Submit → start',
    unit: 'ms',
    summary: 'peak',
    lines: [
      { name: 'submitToStartP50Ms', label: 'p50', color: '#2f5bd3' },
      { name: 'submitToStartP99Ms', label: 'p99', color: '#c23b3b' },
    ],
  },
  {
    id: 'backlogs',
    title: () => 'Backlogs',
    unit: 'count',
    summary: 'peak',
    lines: [
      { name: 'relayBacklog', label: 'realtime relay', color: '#2f5bd3' },
      { name: 'callbackBacklog', label: 'callbacks', color: '#d9822b' },
      { name: 'outboxBacklog', label: 'domain outbox', color: '#7a5bd3' },
    ],
  },
  {
    id: 'oldest',
    title: () => 'Oldest waiting',
    unit: 'ms',
    summary: 'peak',
    lines: [
      { name: 'relayOldestAgeMs', label: 'realtime relay', color: '#2f5bd3' },
      { name: 'callbackOldestAgeMs', label: 'callbacks', color: '#d9822b' },
      { name: 'outboxOldestAgeMs', label: 'domain outbox', color: '#7a5bd3' },
    ],
  },
  {
    id: 'dead',
    title: () => 'DEAD',
    unit: 'count',
    summary: 'peak',
    lines: [
      { name: 'relayDead', label: 'realtime relay', color: '#2f5bd3' },
      { name: 'callbackDead', label: 'callbacks', color: '#c23b3b' },
      { name: 'outboxDead', label: 'domain outbox', color: '#7a5bd3' },
    ],
  },
  {
    id: 'stale',
    title: () => 'STALE steps',
    unit: 'count',
    summary: 'peak',
    lines: [{ name: 'staleSteps', label: 'running, heartbeats stopped', color: '#c23b3b' }],
  },
];

/** Tick steps of the count charts: whole items only. */
const wholeSteps = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 50_000, 100_000];

/** How often the charts are read again (the health cards poll every 2 s; a point is a minute). */
const refreshMs = 3_000;

const shown = (unit: ChartSpec['unit'], value: number | null) =>
  value === null ? '—' : unit === 'ms' ? duration(value) : String(value);

/** The latest value (a gauge's last sample, the current bucket's count) and the window's summary. */
function figures(values: (number | null)[], summary: ChartSpec['summary']) {
  const present = values.filter((v): v is number => v !== null);
  const latest = [...values].reverse().find((v) => v !== null) ?? null;
  const overall =
    present.length === 0
      ? null
      : summary === 'total'
        ? present.reduce((a, b) => a + b, 0)
        : Math.max(...present);
  return { latest, overall, points: present.length };
}

function Chart({ spec, data }: { spec: ChartSpec; data: ChartSeries }) {
  const container = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const columns = useMemo<uPlot.AlignedData>(
    () => [data.times, ...spec.lines.map((line) => data.series[line.name])],
    [data, spec],
  );
  /** The data the chart is built with; later answers go through setData. */
  const latestColumns = useRef(columns);
  latestColumns.current = columns;

  useEffect(() => {
    const element = container.current;
    if (!element) return;
    const legendValue = (_u: uPlot, value: number | null) => shown(spec.unit, value);
    const chart = new uPlot(
      {
        width: Math.max(element.clientWidth, 300),
        height: 160,
        legend: { show: false },
        // From zero, at least a second or one item high, so an empty chart is not all fractions.
        scales: { y: { range: (_u, _min, max) => [0, Math.max(max ?? 0, spec.unit === 'ms' ? 1_000 : 1)] } },
        axes: [
          {},
          {
            size: 70,
            ...(spec.unit === 'count' ? { incrs: wholeSteps } : {}),
            values: (_u, ticks) => ticks.map((tick) => (spec.unit === 'ms' ? duration(tick) : String(tick))),
          },
        ],
        series: [
          {},
          ...spec.lines.map((line) => ({
            label: line.label,
            stroke: line.color,
            width: 2,
            value: legendValue,
            points: { show: true, size: 4 },
          })),
        ],
      },
      latestColumns.current,
      element,
    );
    plot.current = chart;
    const resize = new ResizeObserver(() =>
      chart.setSize({ width: Math.max(element.clientWidth, 300), height: 160 }),
    );
    resize.observe(element);
    return () => {
      resize.disconnect();
      chart.destroy();
      plot.current = null;
    };
  }, [spec]);

  useEffect(() => {
    plot.current?.setData(columns);
  }, [columns]);

  const bucket = data.bucketSeconds === 60 ? 'minute' : `${data.bucketSeconds / 60} minutes`;
  return (
    <div className="panel chart" data-chart={spec.id}>
      <h3>{spec.title(bucket)}</h3>
      <div ref={container} className="chart-canvas" />
      <ul className="chart-legend">
        {spec.lines.map((line) => {
          const { latest, overall, points } = figures(data.series[line.name], spec.summary);
          return (
            <li
              key={line.name}
              data-series={line.name}
              data-latest={latest ?? ''}
              data-overall={overall ?? ''}
              data-points={points}
            >
              <span className="swatch" style={{ background: line.color }} />
              {line.label}: <strong>{shown(spec.unit, latest)}</strong>
              <span className="muted">
                {' '}
                ({spec.summary === 'total' ? 'total' : 'peak'} {shown(spec.unit, overall)})
              </span>
            </li>
          );
        })}
      </ul>
    </div>
  );
}

/** The charts of the pipeline page, with the hour/day toggle. */
export function PipelineCharts() {
  const [range, setRange] = useState<Range>('hour');
  const { data, error } = usePolled<ChartSeries>(`/charts?range=${range}`, refreshMs);
  return (
    <section className="charts" data-range={data?.range ?? ''}>
      <div className="filters chart-toolbar">
        <h2>Over the last {range}</h2>
        {(['hour', 'day'] as const).map((option) => (
          <button
            key={option}
            type="button"
            className={option === range ? 'active' : ''}
            aria-pressed={option === range}
            onClick={() => setRange(option)}
          >
            Last {option}
          </button>
        ))}
        {error ? <span className="muted">could not refresh: {error}</span> : null}
      </div>
      {data && data.range === range ? (
        <div className="chart-grid">
          {charts.map((spec) => (
            <Chart key={spec.id} spec={spec} data={data} />
          ))}
        </div>
      ) : (
        <p className="loading">Loading…</p>
      )}
    </section>
  );
}
