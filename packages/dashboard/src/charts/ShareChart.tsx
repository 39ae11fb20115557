/**
 * The queue page's chart: steps placed on workers per minute, one line per tenant, drawn with uPlot as
 * the pipeline charts are. The legend says each tenant's total over the window and its share of what
 * the reader sees, in text and in data- attributes (what people and tests read; the canvas is the
 * picture).
 */
import { useEffect, useMemo, useRef } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import './charts.css';

export interface ShareSeries {
  bucketSeconds: number;
  times: number[];
  series: { tenantId: string; name: string; placed: number[] }[];
}

const palette = ['#2f5bd3', '#d9822b', '#2e9d5b', '#c23b3b', '#7a5bd3', '#1b9aaa', '#b5651d', '#6b6b6b'];
const colorOf = (index: number) => palette[index % palette.length]!;
/** Tick steps: whole steps only. */
const wholeSteps = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 50_000, 100_000];

export function ShareChart({ data }: { data: ShareSeries }) {
  const container = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const columns = useMemo<uPlot.AlignedData>(() => [data.times, ...data.series.map((s) => s.placed)], [data]);
  const latestColumns = useRef(columns);
  latestColumns.current = columns;
  // The chart is built again when the tenants shown change (uPlot's series are fixed at creation).
  const shape = data.series.map((s) => s.tenantId).join(',');

  useEffect(() => {
    const element = container.current;
    if (!element || shape === '') return;
    const names = shape.split(',');
    const chart = new uPlot(
      {
        width: Math.max(element.clientWidth, 300),
        height: 200,
        legend: { show: false },
        scales: { y: { range: (_u, _min, max) => [0, Math.max(max ?? 0, 1)] } },
        axes: [{}, { size: 50, incrs: wholeSteps }],
        series: [
          {},
          ...names.map((_name, index) => ({
            stroke: colorOf(index),
            width: 2,
            points: { show: true, size: 4 },
          })),
        ],
      },
      latestColumns.current,
      element,
    );
    plot.current = chart;
    const resize = new ResizeObserver(() =>
      chart.setSize({ width: Math.max(element.clientWidth, 300), height: 200 }),
    );
    resize.observe(element);
    return () => {
      resize.disconnect();
      chart.destroy();
      plot.current = null;
    };
  }, [shape]);

  useEffect(() => {
    plot.current?.setData(columns);
  }, [columns]);

  const totals = data.series.map((s) => s.placed.reduce((a, b) => a + b, 0));
  const all = totals.reduce((a, b) => a + b, 0);
  return (
    <div className="panel chart" data-chart="share">
      <h3>Steps placed per minute, by tenant</h3>
      {data.series.length === 0 ? <p className="muted">No tenant to show.</p> : null}
      <div ref={container} className="chart-canvas" />
      <ul className="chart-legend">
        {data.series.map((s, index) => (
          <li key={s.tenantId} data-series={s.tenantId} data-total={totals[index]}>
            <span className="swatch" style={{ background: colorOf(index) }} />
            {s.name}: <strong>{totals[index]}</strong>
            <span className="muted">
              {' '}
              ({all === 0 ? '—' : `${Math.round((totals[index]! / all) * 100)}%`})
            </span>
          </li>
        ))}
      </ul>
    </div>
  );
}
