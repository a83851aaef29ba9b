// DOM rendering of the view models of state.js: the schedule timeline (SVG), the block map
// (a grid of divs), the charts (SVG paths) and the request drill-down. Test hooks (data-testid
// and data-*) are listed in docs/ui.md; keep them stable.
import { CELL_COLORS, CELL_STATES, ownerColor, linePath, fmtSeconds } from './state.js';

const SVG_NS = 'http://www.w3.org/2000/svg';
const LABEL_W = 130;
const ROW_H = 14;
const AXIS_H = 18;

export function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({
    '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}

export function renderLegend(el) {
  el.innerHTML = CELL_STATES.map((s) => `<span><i class="sw" style="background:${CELL_COLORS[s]}"></i>${
    s === 'prefill' ? 'prefill chunk' : s}</span>`).join('');
}

/**
 * Draws the timeline view into `svg`. opts: width (px available), selectedId, hoverId,
 * playgroundIds (Set of request ids sent from the playground).
 */
export function renderTimeline(svg, view, opts) {
  const avail = Math.max(100, opts.width - LABEL_W - 8);
  let scale; // px per x unit (a step, or a second)
  if (view.mode === 'wall') scale = avail / view.span;
  else scale = Math.min(24, Math.max(2, avail / Math.max(view.numSteps, 1)));
  const w = Math.ceil(LABEL_W + (view.mode === 'wall' ? avail : scale * view.numSteps) + 8);
  const h = AXIS_H + view.rows.length * ROW_H + 4;
  const out = [];
  // Axis: step numbers, or seconds since the window's first step.
  out.push('<g class="axis">');
  if (view.numSteps > 0) {
    const plotW = view.mode === 'wall' ? avail : scale * view.numSteps;
    const ticks = Math.max(1, Math.min(10, Math.floor(plotW / 70), view.mode === 'wall' ? 10 : view.numSteps));
    for (let i = 0; i <= ticks; ++i) {
      const frac = i / ticks;
      const x = LABEL_W + frac * (view.mode === 'wall' ? avail : scale * view.numSteps);
      const label = view.mode === 'wall'
        ? `${(frac * view.span).toFixed(view.span < 1 ? 3 : 1)} s`
        : `${Math.round(view.firstStep + frac * view.numSteps)}`;
      out.push(`<line x1="${x.toFixed(1)}" x2="${x.toFixed(1)}" y1="${AXIS_H - 4}" y2="${h}"/>` +
        `<text x="${(x + 2).toFixed(1)}" y="10">${label}</text>`);
    }
  }
  out.push(`<text x="4" y="10">${view.mode === 'wall' ? 'request \\ time' : 'request \\ step'}</text></g>`);
  view.rows.forEach((row, i) => {
    const y = AXIS_H + i * ROW_H;
    const cls = ['row'];
    if (row.done) cls.push('done');
    if (row.id === opts.selectedId) cls.push('selected');
    if (row.id === opts.hoverId) cls.push('hover');
    if (opts.playgroundIds?.has(row.id)) cls.push('playground');
    const label = `#${row.id}${row.api_id ? ' ' + row.api_id.slice(0, 16) : ''}`;
    out.push(`<g class="${cls.join(' ')}" data-testid="timeline-row" data-request-id="${row.id}"` +
      `${row.api_id ? ` data-api-id="${esc(row.api_id)}"` : ''}${row.done ? ' data-done="true"' : ''}` +
      ` transform="translate(0,${y})"><rect class="row-bg" x="0" y="0" width="${w}" height="${ROW_H}"/>` +
      `<text x="4" y="10">${esc(label)}</text>`);
    for (const c of row.cells) {
      const x = LABEL_W + c.x0 * scale;
      const cw = Math.max(view.mode === 'wall' ? 1 : scale - (scale >= 4 ? 0.5 : 0), (c.x1 - c.x0) * scale -
        (view.mode === 'wall' ? 0 : scale >= 4 ? 0.5 : 0));
      out.push(`<rect data-testid="timeline-cell" data-step="${c.step}" data-state="${c.state}"` +
        ` data-tokens="${c.tokens}" x="${x.toFixed(2)}" y="1" width="${cw.toFixed(2)}"` +
        ` height="${ROW_H - 2}" fill="${CELL_COLORS[c.state]}"/>`);
    }
    if (row.finished) {
      const x = LABEL_W + row.finished.x * scale;
      out.push(`<rect data-testid="timeline-finished" data-state="finished" data-step="${row.finished.step}"` +
        ` data-finish-reason="${esc(row.finished.reason ?? '')}" x="${x.toFixed(2)}" y="1" width="3"` +
        ` height="${ROW_H - 2}" fill="${CELL_COLORS.finished}"/>`);
    }
    out.push('</g>');
  });
  svg.setAttribute('width', String(w));
  svg.setAttribute('height', String(h));
  svg.setAttribute('data-first-step', String(view.firstStep));
  svg.setAttribute('data-last-step', String(view.lastStep));
  svg.setAttribute('data-mode', view.mode);
  svg.innerHTML = out.join('');
  return { labelW: LABEL_W, scale };
}

/** The block map: one div per physical block, created once per pool size, updated in place. */
export class BlockMap {
  constructor(el) {
    this.el = el;
    this.total = -1;
    this.cells = [];
    this.prev = [];
  }

  render(view, highlight) {
    if (view.total !== this.total) {
      this.total = view.total;
      const frag = document.createDocumentFragment();
      this.cells = [];
      this.prev = [];
      for (let b = 0; b < view.total; ++b) {
        const d = document.createElement('div');
        d.className = 'blk';
        d.dataset.testid = 'block';
        d.dataset.block = String(b);
        this.cells.push(d);
        this.prev.push('');
        frag.appendChild(d);
      }
      this.el.replaceChildren(frag);
    }
    this.el.dataset.total = String(view.total);
    this.el.dataset.used = String(view.used);
    this.el.dataset.kvStep = view.step === null ? '' : String(view.step);
    for (let b = 0; b < view.total; ++b) {
      const c = view.cells[b];
      const order = highlight ? highlight.get(b) : undefined;
      const key = `${c.state}|${c.refcount}|${c.owner}|${order ?? ''}|${highlight ? 1 : 0}`;
      if (key === this.prev[b]) continue;
      this.prev[b] = key;
      const d = this.cells[b];
      d.dataset.state = c.state;
      d.dataset.refcount = String(c.refcount);
      d.dataset.cached = String(c.state === 'cached');
      d.dataset.owner = c.owner === null ? '' : String(c.owner);
      if (order !== undefined) d.dataset.order = String(order);
      else delete d.dataset.order;
      d.style.background = c.owner !== null && c.state !== 'free'
        ? ownerColor(c.owner) : c.state === 'cached' ? '#76b7b2' : c.state === 'used' ? '#9ca3af' : '';
      d.textContent = order !== undefined ? String(order) : c.refcount > 1 ? String(c.refcount) : '';
      d.classList.toggle('hl', order !== undefined);
      d.classList.toggle('dim', Boolean(highlight) && order === undefined);
      d.title = `block ${b}: ${c.state}${c.refcount ? `, ref count ${c.refcount}` : ''}` +
        (c.owners.length ? `, request${c.owners.length > 1 ? 's' : ''} ${c.owners.map((o) =>
          `#${o.id} (table index ${o.pos + 1})`).join(', ')}` : '');
    }
  }
}

const CHART_W = 300;
const CHART_H = 100;

function fmtValue(v, unit) {
  if (v === null || v === undefined) return '-';
  if (unit === 's') return fmtSeconds(v);
  if (unit === '%') return `${v.toFixed(0)}%`;
  return Math.abs(v) >= 100 ? v.toFixed(0) : String(Math.round(v * 10) / 10);
}

/** Charts: one figure per chart id, created once; paths updated on every call. */
export function renderCharts(container, charts) {
  for (const c of charts) {
    let fig = container.querySelector(`[data-chart="${c.id}"]`);
    if (!fig) {
      fig = document.createElement('figure');
      fig.className = 'chart';
      fig.style.margin = '0';
      fig.dataset.chart = c.id;
      fig.innerHTML = `<h3>${esc(c.title)}</h3><div class="lg"></div>` +
        `<svg data-testid="chart" data-chart="${c.id}" viewBox="0 0 ${CHART_W} ${CHART_H}" preserveAspectRatio="none" xmlns="${SVG_NS}">` +
        `<line class="grid" x1="0" x2="${CHART_W}" y1="${CHART_H / 2}" y2="${CHART_H / 2}"/>` +
        c.lines.map((l) => `<path data-testid="chart-line" data-series="${esc(l.name)}" stroke="${l.color}"/>`).join('') +
        '<text class="ymax" x="2" y="9"></text><text class="xl" x="2" y="98"></text></svg>';
      container.appendChild(fig);
    }
    const svg = fig.querySelector('svg');
    const box = { x0: c.x0, x1: c.x1, yMax: c.yMax, width: CHART_W, height: CHART_H };
    c.lines.forEach((l, i) => {
      const p = svg.querySelectorAll('path')[i];
      const d = linePath(c.xs, l.values, box);
      if (p.getAttribute('d') !== d) p.setAttribute('d', d);
    });
    svg.dataset.points = String(c.xs.length);
    svg.querySelector('.ymax').textContent = `max ${fmtValue(c.yMax, c.unit)}`;
    svg.querySelector('.xl').textContent = `last ${Math.round((c.x1 - c.x0) / 60)} min`;
    fig.querySelector('.lg').innerHTML = c.lines.map((l) => {
      let last = null;
      for (let i = l.values.length - 1; i >= 0; --i) if (l.values[i] !== null) { last = l.values[i]; break; }
      return `<span data-series="${esc(l.name)}"><i style="background:${l.color}"></i>${esc(l.name)} ${fmtValue(last, c.unit)}</span>`;
    }).join('');
  }
}

/** The drill-down of one request (detail from state.requestDetail, or null). */
export function renderDetail(dl, title, d) {
  if (!d) {
    dl.innerHTML = '';
    dl.removeAttribute('data-request-id');
    title.textContent = 'click a timeline row';
    return;
  }
  title.textContent = `#${d.id}${d.api_id ? ` · ${d.api_id}` : ''}`;
  dl.dataset.requestId = String(d.id);
  const itl = d.itl_ms.n
    ? `${d.itl_ms.n} gaps: mean ${d.itl_ms.mean.toFixed(2)} ms, p50 ${d.itl_ms.p50.toFixed(2)}, p90 ${
      d.itl_ms.p90.toFixed(2)}, max ${d.itl_ms.max.toFixed(2)} ms`
    : '-';
  const rows = [
    ['api_id', 'OpenAI id', d.api_id ?? '-'],
    ['num_prompt_tokens', 'prompt tokens', d.num_prompt_tokens ?? '-'],
    ['num_cached_tokens', 'prefix-cache hit', d.num_cached_tokens ?? '-'],
    ['num_output_tokens', 'output tokens', d.num_output_tokens ?? '-'],
    ['queue_s', 'queue', fmtSeconds(d.queue_s)],
    ['prefill_s', 'prefill', fmtSeconds(d.prefill_s)],
    ['ttft_s', 'TTFT', fmtSeconds(d.ttft_s)],
    ['itl_ms', 'ITL', itl],
    ['steps', 'steps scheduled', `${d.scheduled_steps} (${d.prefill_tokens} prefill tokens)`],
    ['preemptions', 'preemptions', d.preemptions],
    ['blocks', d.blocks_live ? 'blocks (table order)' : 'blocks (last seen)',
      d.blocks.length ? d.blocks.join(' ') : '-'],
    ['finish_reason', 'finish reason', d.finish_reason ?? (d.finish_step === null ? 'running' : '-')],
  ];
  if (d.prompt !== null) rows.push(['prompt', 'prompt', d.prompt]);
  dl.innerHTML = rows.map(([k, label, v]) => `<dt>${esc(label)}</dt><dd data-field="${k}">${esc(v)}</dd>`).join('');
}
