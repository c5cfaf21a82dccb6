// Graphs drawn as SVG: nodes in columns, edges as curves. Every node with
// an address is a link, so the graph is navigated with the mouse or with
// Tab and Enter.
import { svg } from './lib.js';

const W = 230, H = 48, GAPX = 90, GAPY = 18, TOP = 30;

// drawGraph lays out nodes {id, label, sub, href, cls, col} in columns
// (col 0 leftmost; missing col: longest path from a source) and draws
// edges [from, to, class] between them.
export function drawGraph({ nodes, edges, columns = [], title }) {
  const byID = new Map(nodes.map((n) => [n.id, n]));
  for (const n of nodes) if (n.col === undefined) n.col = depth(n.id, new Set());
  function depth(id, seen) {
    if (seen.has(id)) return 0;
    seen.add(id);
    const ins = edges.filter(([, to]) => to === id).map(([from]) => from).filter((f) => byID.has(f));
    return ins.length ? 1 + Math.max(...ins.map((f) => depth(f, seen))) : 0;
  }
  const cols = [];
  for (const n of nodes) (cols[n.col] ||= []).push(n);
  const ncol = Math.max(cols.length, columns.length, 1);
  const rows = Math.max(1, ...Array.from(cols, (c) => c?.length || 0)); // Array.from: cols may have holes (an empty column), which map skips
  const width = ncol * W + (ncol - 1) * GAPX + 20;
  const height = TOP + rows * (H + GAPY) + 10;
  cols.forEach((c, ci) => (c || []).forEach((n, ri) => {
    const colH = c.length * (H + GAPY) - GAPY;
    const off = (rows * (H + GAPY) - GAPY - colH) / 2;
    n.x = 10 + ci * (W + GAPX);
    n.y = TOP + off + ri * (H + GAPY);
  }));
  const root = svg('svg', { class: 'graph', viewBox: `0 0 ${width} ${height}`, role: 'group', 'aria-label': title || 'graph', width, height });
  const defs = svg('defs', {}, svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
    svg('path', { d: 'M 0 0 L 10 5 L 0 10 z', class: 'arrowhead' })));
  root.append(defs);
  columns.forEach((name, i) => {
    root.append(svg('text', { class: 'col', x: 10 + i * (W + GAPX), y: 16 }, name));
    if (!cols[i]?.length) root.append(svg('text', { class: 'small', x: 10 + i * (W + GAPX), y: TOP + 20 }, 'nothing'));
  });
  for (const [from, to, cls] of edges) {
    const a = byID.get(from), b = byID.get(to);
    if (!a || !b) continue;
    const [l, r] = a.x <= b.x ? [a, b] : [b, a];
    const x1 = l.x + W, y1 = l.y + H / 2, x2 = r.x, y2 = r.y + H / 2;
    const mx = (x1 + x2) / 2;
    root.append(svg('path', { class: `edge ${cls || ''}`, 'data-edge': `${from}>${to}`, d: `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2} ${y2}`, 'marker-end': a.x <= b.x ? 'url(#arrow)' : null, 'marker-start': a.x > b.x ? 'url(#arrow)' : null }));
  }
  for (const n of nodes) {
    const g = svg('g', { class: `node ${n.cls || ''}`, transform: `translate(${n.x},${n.y})` },
      svg('title', {}, n.title || `${n.label} ${n.sub || ''}`),
      svg('rect', { width: W, height: H, rx: 8 }),
      svg('text', { x: 10, y: 20 }, clip(n.label, 30)),
      svg('text', { x: 10, y: 38, class: 'small' }, clip(n.sub || '', 36)));
    // The link is named by what the node shows and its title (no
    // aria-label, so the visible text is part of the name: WCAG 2.5.3).
    root.append(n.href ? svg('a', { href: n.href, 'data-node': n.id }, g) : g);
  }
  return root;
}

function clip(s, n) { return s.length > n ? `${s.slice(0, n - 1)}…` : s; }
