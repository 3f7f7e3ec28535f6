// Small SVG charts, drawn as markup: a line chart and a stacked bar chart. Colours come
// from the stylesheet (`.c0`, `.c1`, … on each series).

import { html, raw } from './format.js';

// Drawn at about the size a card shows it, so that the text stays legible.
const W = 400;
const H = 180;
const PAD = { left: 40, right: 10, top: 10, bottom: 24 };
const PLOT_W = W - PAD.left - PAD.right;
const PLOT_H = H - PAD.top - PAD.bottom;

/** The smallest 1, 2, 2.5 or 5 × 10^k at least `value`. */
function niceMax(value) {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 2.5, 5, 10].map((m) => m * power).find((v) => v >= value);
}

const fmt = (n) => +n.toFixed(2);

function frame({ title, y0, y1, yFormat, xTicks, body, legend }) {
  const grid = [0, 1, 2, 3, 4].map((i) => {
    const value = y0 + ((y1 - y0) * i) / 4;
    const y = fmt(PAD.top + PLOT_H - (PLOT_H * i) / 4);
    return `<line class="gridline" x1="${PAD.left}" x2="${W - PAD.right}" y1="${y}" y2="${y}"/>`
      + html`<text class="tick" x="${PAD.left - 6}" y="${y + 4}" text-anchor="end">${yFormat(value)}</text>`;
  });
  // The last label ends at the right edge rather than past it.
  const ticks = xTicks.map(({ x, label }) =>
    html`<text class="tick" x="${fmt(x)}" y="${H - 8}" text-anchor="${x > W - PAD.right - 24 ? 'end' : 'middle'}">${label}</text>`);
  const items = legend.length > 1
    ? html`<figcaption>${legend.map((label, i) => html`<span class="key c${i}">${label}</span>`)}</figcaption>`
    : '';
  return html`<figure class="chart"><svg viewBox="0 0 ${W} ${H}" role="img" aria-label="${title}">
    ${raw(grid.join(''))}${ticks}${raw(body)}</svg>${items}</figure>`;
}

function xTicksFor(x0, x1, scale, xFormat) {
  if (x0 === x1) return [{ x: scale(x0), label: xFormat(x0) }];
  return [0, 1, 2, 3].map((i) => {
    const value = x0 + ((x1 - x0) * i) / 3;
    return { x: scale(value), label: xFormat(value) };
  });
}

/** The top of an axis of counts: a multiple of 4, so that the grid lines fall on whole numbers. */
const countsTop = (tallest) => Math.max(4, Math.ceil(tallest / 4) * 4);

/**
 * Lines over a shared x axis. `series`: `[{label, points: [[x, y], …]}]`, x ascending,
 * a null y is a gap. `yMax` fixes the top of the axis (say 100 for percentages);
 * `counts` makes the grid whole numbers.
 */
export function lineChart({ title, series, xFormat, yFormat, yMax, counts = false }) {
  const all = series.flatMap((s) => s.points).filter(([, y]) => y !== null && y !== undefined);
  if (!all.length) return html`<div class="chart-empty">Nothing reported yet</div>`;
  const xs = all.map(([x]) => x);
  const ys = all.map(([, y]) => y);
  const x0 = Math.min(...xs);
  const x1 = Math.max(...xs);
  const y0 = Math.min(0, ...ys);
  const y1 = yMax ?? (counts ? countsTop(Math.max(...ys)) : niceMax(Math.max(...ys)));
  const sx = (x) => (x1 === x0 ? PAD.left + PLOT_W / 2 : PAD.left + ((x - x0) / (x1 - x0)) * PLOT_W);
  const sy = (y) => PAD.top + PLOT_H - ((y - y0) / (y1 - y0 || 1)) * PLOT_H;
  const body = series.map(({ points }, i) => {
    let d = '';
    let pen = 'M';
    for (const [x, y] of points) {
      if (y === null || y === undefined) {
        pen = 'M';
        continue;
      }
      d += `${pen}${fmt(sx(x))},${fmt(sy(y))}`;
      pen = 'L';
    }
    const last = points.findLast(([, y]) => y !== null && y !== undefined);
    const dot = last ? `<circle class="dot c${i}" cx="${fmt(sx(last[0]))}" cy="${fmt(sy(last[1]))}" r="3.5"/>` : '';
    return `<path class="line c${i}" d="${d}"/>${dot}`;
  }).join('');
  return frame({
    title, y0, y1, yFormat, body,
    xTicks: xTicksFor(x0, x1, sx, xFormat),
    legend: series.map((s) => s.label),
  });
}

/**
 * Stacked bars, one per bucket. `buckets`: `[{x, values: [n, …]}]` in order; `labels`
 * names the stacked values.
 */
export function barChart({ title, buckets, labels, xFormat, yFormat = (v) => String(v) }) {
  if (!buckets.length) return html`<div class="chart-empty">Nothing reported yet</div>`;
  const y1 = countsTop(Math.max(...buckets.map((b) => b.values.reduce((a, v) => a + v, 0))));
  const step = PLOT_W / buckets.length;
  const width = Math.max(1, step * 0.7);
  const body = buckets.map((bucket, i) => {
    let base = 0;
    return bucket.values.map((value, k) => {
      if (!value) return '';
      const height = (value / y1) * PLOT_H;
      const y = PAD.top + PLOT_H - ((base + value) / y1) * PLOT_H;
      base += value;
      const x = PAD.left + i * step + (step - width) / 2;
      return `<rect class="barfill c${k}" x="${fmt(x)}" y="${fmt(y)}" width="${fmt(width)}" height="${fmt(height)}"><title>${labels[k]}: ${value}</title></rect>`;
    }).join('');
  }).join('');
  const every = Math.max(1, Math.ceil(buckets.length / 4));
  const xTicks = buckets
    .map((bucket, i) => ({ i, bucket }))
    .filter(({ i }) => i % every === 0)
    .map(({ i, bucket }) => ({ x: PAD.left + i * step + step / 2, label: xFormat(bucket.x) }));
  return frame({ title, y0: 0, y1, yFormat, body, xTicks, legend: labels });
}
