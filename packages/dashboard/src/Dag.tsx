/**
 * A workflow's DAG as an SVG: steps in columns by depth (longest path from a root), edges from each
 * dependency, each step coloured by its state, a running step with its progress and elapsed time; a step
 * TDP runs itself (sleep, signal, approval, map, child task) shows its kind and what it waits for.
 */
import { duration } from './format.tsx';

export interface DagNode {
  key: string;
  dependsOn: string[];
  capability: string | null;
  /** The step's kind when TDP runs it itself (sleep, signal, approval, map, task). */
  kind?: string | null;
  /** What a running platform step waits for (its kind), shown instead of a progress bar. */
  waiting?: string | null;
  status?: string;
  percent?: number | null;
  /** How long the step ran, or has been running. */
  elapsedMs?: number | null;
}

const width = 190;
const height = 70;
const gapX = 64;
const gapY = 22;

function depths(nodes: DagNode[]): Map<string, number> {
  const byKey = new Map(nodes.map((n) => [n.key, n]));
  const depth = new Map<string, number>();
  const visit = (key: string, seen: Set<string>): number => {
    const known = depth.get(key);
    if (known !== undefined) return known;
    if (seen.has(key)) return 0; // a cycle cannot be published; draw it flat rather than hang
    seen.add(key);
    const parents = byKey.get(key)?.dependsOn.filter((p) => byKey.has(p)) ?? [];
    const value = parents.length === 0 ? 0 : 1 + Math.max(...parents.map((p) => visit(p, seen)));
    depth.set(key, value);
    return value;
  };
  for (const node of nodes) visit(node.key, new Set());
  return depth;
}

export function Dag({ nodes }: { nodes: DagNode[] }) {
  const depth = depths(nodes);
  const columns = new Map<number, DagNode[]>();
  for (const node of nodes) {
    const d = depth.get(node.key) ?? 0;
    columns.set(d, [...(columns.get(d) ?? []), node]);
  }
  const position = new Map<string, { x: number; y: number }>();
  for (const [d, column] of columns)
    for (const [row, node] of column.entries())
      position.set(node.key, { x: d * (width + gapX), y: row * (height + gapY) });
  const columnCount = Math.max(1, columns.size);
  const rowCount = Math.max(1, ...[...columns.values()].map((c) => c.length));
  const svgWidth = columnCount * width + (columnCount - 1) * gapX + 8;
  const svgHeight = rowCount * height + (rowCount - 1) * gapY + 8;
  return (
    <svg className="dag" width={svgWidth} height={svgHeight} role="img" aria-label="Workflow graph">
      <defs>
        <marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" markerHeight="7" orient="auto">
          <path d="M0,0 L8,4 L0,8 z" fill="#8a94a8" />
        </marker>
      </defs>
      <g transform="translate(4,4)">
        {nodes.flatMap((node) =>
          node.dependsOn
            .filter((parent) => position.has(parent))
            .map((parent) => {
              const from = position.get(parent)!;
              const to = position.get(node.key)!;
              const x1 = from.x + width;
              const y1 = from.y + height / 2;
              const x2 = to.x;
              const y2 = to.y + height / 2;
              const mid = (x1 + x2) / 2;
              return (
                <path
                  key={`${parent}->${node.key}`}
                  d={`M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`}
                  className="edge"
                  markerEnd="url(#arrow)"
                />
              );
            }),
        )}
        {nodes.map((node) => {
          const { x, y } = position.get(node.key)!;
          const running = node.status === 'RUNNING';
          const percent = node.percent ?? (node.status === 'SUCCEEDED' ? 100 : 0);
          return (
            <g
              key={node.key}
              transform={`translate(${x},${y})`}
              className="node"
              data-step={node.key}
              data-status={node.status ?? 'WAITING'}
              data-kind={node.kind ?? 'capability'}
            >
              <rect width={width} height={height} rx={8} />
              <text x={10} y={19} className="key">
                {node.key}
              </text>
              <text x={10} y={34} className="sub">
                {node.kind && node.kind !== 'capability'
                  ? `${node.kind}${node.kind === 'map' && node.capability ? ` · ${node.capability}` : ''}`
                  : (node.capability ?? '')}
              </text>
              <text x={10} y={49} className="sub">
                {node.waiting ? `waiting (${node.waiting})` : (node.status ?? 'WAITING')}
                {node.elapsedMs !== null && node.elapsedMs !== undefined
                  ? ` · ${duration(node.elapsedMs)}`
                  : ''}
              </text>
              {running || node.status === 'SUCCEEDED' ? (
                <g transform={`translate(10,${height - 12})`}>
                  <rect width={width - 20} height={6} rx={3} className="bar" />
                  <rect width={((width - 20) * percent) / 100} height={6} rx={3} className="bar-fill" />
                </g>
              ) : null}
            </g>
          );
        })}
      </g>
    </svg>
  );
}
