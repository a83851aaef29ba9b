// The dashboard's state: events from GET /ui/events in, view models out. No DOM here, so the
// page (app.js) and `node --test` (test/state.test.mjs) import the same code.
//
// Memory is bounded: the last `maxSteps` steps (and the cells of requests in them), at most
// `maxRequests` requests, `maxMetrics` metrics samples and `maxStepSeries` per-step samples.

/** Cell states of the schedule timeline, in legend order. */
export const CELL_STATES = ['waiting', 'prefill', 'decode', 'preempted', 'finished'];

/** The seed's / `bench --timeline`'s colours (src/bench/timeline_svg.cc). */
export const CELL_COLORS = {
  waiting: '#d9d9d9',
  prefill: '#f28e2b',
  decode: '#4e79a7',
  preempted: '#e15759',
  finished: '#59a14f',
};

/** Colours of block owners (request id modulo the palette), Tableau 20 minus the greys. */
export const OWNER_COLORS = [
  '#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1', '#ff9da7',
  '#9c755f', '#a0cbe8', '#ffbe7d', '#ff9d9a', '#8cd17d', '#b6992d', '#f1ce63', '#86bcb6',
  '#d37295', '#fabfd2', '#d4a6c8', '#499894',
];

export function ownerColor(id) {
  const n = OWNER_COLORS.length;
  return OWNER_COLORS[((Number(id) % n) + n) % n];
}

export const DEFAULTS = Object.freeze({
  maxSteps: 300, // steps kept (timeline columns)
  maxRequests: 256, // requests kept (timeline rows)
  maxMetrics: 300, // metrics samples kept (1/s: five minutes)
  maxStepSeries: 3000, // per-step samples kept for the tokens-per-step chart
  chartWindowS: 300, // the charts' time window
});

/** A fresh, empty state. */
export function createState(options = {}) {
  const o = { ...DEFAULTS, ...options };
  return {
    options: o,
    hello: null,
    connected: false,
    steps: [], // compact step records, ascending step numbers, at most maxSteps (+ slack)
    requests: new Map(), // engine request id -> request record
    apiIds: new Map(), // OpenAI id ("cmpl-…") -> engine request id
    kv: null, // the latest kv snapshot as received
    kvDerived: null, // owners per block of `kv`, computed once per snapshot
    metrics: [], // metrics samples, ascending time
    stepSeries: [], // {step, t, tokens, prefill, decode, budget, running, waiting, kv}
    dropped: 0, // the server's dropped_total
    events: 0, // events reduced
    lastStep: null,
    serverClockOffset: 0, // server_time - local time at hello (seconds)
    version: 0, // bumped on every change: renderers compare it
  };
}

function newRequest(id) {
  return {
    id,
    api_id: null,
    info: null, // the latest `request` event
    cells: new Map(), // step -> {state, tokens}
    finishStep: null,
    finishReason: null,
    firstStep: null,
    lastStep: null,
    blocks: null, // the last block table seen in a kv snapshot
    preemptions: 0,
    scheduledSteps: 0,
    prefillTokens: 0,
  };
}

function request(state, id) {
  let r = state.requests.get(id);
  if (!r) {
    r = newRequest(id);
    state.requests.set(id, r);
  }
  return r;
}

function setCell(r, step, cell) {
  r.cells.set(step, cell);
  if (r.firstStep === null || step < r.firstStep) r.firstStep = step;
  if (r.lastStep === null || step > r.lastStep) r.lastStep = step;
}

function pushCapped(arr, item, cap) {
  arr.push(item);
  if (arr.length > cap + Math.max(8, cap >> 3)) arr.splice(0, arr.length - cap);
}

function reduceStep(state, s) {
  const { maxSteps } = state.options;
  // A step number that goes backwards means a restarted server: start over.
  if (state.lastStep !== null && s.step < state.lastStep) resetData(state);
  state.lastStep = s.step;
  state.steps.push({
    step: s.step,
    start: s.start,
    end: s.end,
    num_running: s.num_running,
    num_waiting: s.num_waiting,
    num_prefill_tokens: s.num_prefill_tokens,
    num_decode_tokens: s.num_decode_tokens,
    token_budget: s.token_budget,
    num_used_blocks: s.num_used_blocks,
    num_cached_blocks: s.num_cached_blocks,
    kv_cache_usage: s.kv_cache_usage,
    num_scheduled: (s.scheduled || []).length,
  });
  for (const id of s.waiting || []) {
    const r = request(state, id);
    if (!r.cells.has(s.step)) setCell(r, s.step, { state: 'waiting', tokens: 0 });
  }
  for (const e of s.scheduled || []) {
    const r = request(state, e.id);
    setCell(r, s.step, { state: e.prefill ? 'prefill' : 'decode', tokens: e.tokens });
    r.scheduledSteps += 1;
    if (e.prefill) r.prefillTokens += e.tokens;
  }
  for (const id of s.preempted || []) {
    const r = request(state, id);
    setCell(r, s.step, { state: 'preempted', tokens: 0 });
    r.preemptions += 1;
  }
  for (const f of s.finished || []) {
    const r = request(state, f.id);
    r.finishStep = s.step;
    r.finishReason = f.finish_reason ?? r.finishReason;
    if (!r.cells.has(s.step)) setCell(r, s.step, { state: 'finished', tokens: 0 });
  }
  pushCapped(
    state.stepSeries,
    {
      step: s.step,
      t: s.end,
      prefill: s.num_prefill_tokens,
      decode: s.num_decode_tokens,
      tokens: (s.num_prefill_tokens || 0) + (s.num_decode_tokens || 0),
      budget: s.token_budget,
      running: s.num_running,
      waiting: s.num_waiting,
      kv: s.kv_cache_usage,
    },
    state.options.maxStepSeries,
  );
  // Evict in batches (every maxSteps/8 steps) so that a step costs O(its own size) on average.
  if (state.steps.length > maxSteps + Math.max(8, maxSteps >> 3)) evict(state);
}

/** Drops steps beyond maxSteps, the cells in them, and requests left with nothing to show. */
export function evict(state) {
  const { maxSteps, maxRequests } = state.options;
  if (state.steps.length > maxSteps) state.steps.splice(0, state.steps.length - maxSteps);
  const first = state.steps.length ? state.steps[0].step : Infinity;
  for (const [id, r] of state.requests) {
    if (r.firstStep !== null && r.firstStep < first) {
      for (const step of r.cells.keys()) if (step < first) r.cells.delete(step);
      if (r.cells.size === 0) {
        r.firstStep = r.lastStep = null;
      } else {
        r.firstStep = Math.min(...r.cells.keys());
      }
    }
    const done = r.finishStep !== null || (r.info && r.info.finish_reason);
    if (r.cells.size === 0 && done) dropRequest(state, id);
  }
  // Over the cap: oldest finished first, then oldest at all.
  if (state.requests.size > maxRequests) {
    const byAge = [...state.requests.values()].sort(
      (a, b) => (a.finishStep === null) - (b.finishStep === null) || a.id - b.id,
    );
    for (const r of byAge.slice(0, state.requests.size - maxRequests)) dropRequest(state, r.id);
  }
}

function dropRequest(state, id) {
  const r = state.requests.get(id);
  if (!r) return;
  if (r.api_id && state.apiIds.get(r.api_id) === id) state.apiIds.delete(r.api_id);
  state.requests.delete(id);
}

function resetData(state) {
  state.steps = [];
  state.requests = new Map();
  state.apiIds = new Map();
  state.kv = null;
  state.kvDerived = null;
  state.stepSeries = [];
  state.lastStep = null;
}

function reduceKv(state, kv) {
  state.kv = kv;
  state.kvDerived = null;
  const tables = kv.block_tables || {};
  for (const key of Object.keys(tables)) {
    const r = state.requests.get(Number(key));
    if (r) r.blocks = tables[key].slice();
  }
}

function reduceRequest(state, info) {
  const r = request(state, info.id);
  r.info = { ...(r.info || {}), ...info };
  if (info.api_id) {
    r.api_id = info.api_id;
    state.apiIds.set(info.api_id, info.id);
  }
  if (info.finish_reason) r.finishReason = info.finish_reason;
}

/**
 * Applies one event (its SSE `event:` name and parsed `data:`) to the state; returns the
 * state. Unknown event names are ignored (a newer server may send more).
 */
export function reduce(state, type, data) {
  state.events += 1;
  switch (type) {
    case 'hello': {
      const prev = state.hello;
      if (prev && (prev.model !== data.model || prev.num_total_blocks !== data.num_total_blocks ||
          prev.replica_id !== data.replica_id)) {
        resetData(state);
        state.metrics = [];
      }
      state.hello = data;
      state.connected = true;
      if (typeof data.server_time === 'number') {
        state.serverClockOffset = data.server_time - Date.now() / 1000;
      }
      break;
    }
    case 'step':
      reduceStep(state, data);
      break;
    case 'kv':
      reduceKv(state, data);
      break;
    case 'request':
      reduceRequest(state, data);
      break;
    case 'metrics':
      pushCapped(state.metrics, data, state.options.maxMetrics);
      break;
    case 'dropped':
      state.dropped = data.dropped_total ?? state.dropped;
      break;
    default:
      return state;
  }
  state.version += 1;
  return state;
}

// ---------------------------------------------------------------------------------------------
// View models

/**
 * The schedule timeline: rows (one per request that has a cell in the kept steps, or is known
 * and not finished), in order of first appearance; each cell with x0/x1 in step columns
 * (mode 'steps': column = step - first step) or seconds since the first kept step's start
 * (mode 'wall').
 */
export function timelineView(state, mode = 'steps') {
  const steps = state.steps;
  const firstStep = steps.length ? steps[0].step : 0;
  const lastStep = steps.length ? steps[steps.length - 1].step : -1;
  const t0 = steps.length ? steps[0].start : 0;
  const t1 = steps.length ? steps[steps.length - 1].end : 0;
  const byStep = new Map();
  for (const s of steps) byStep.set(s.step, s);
  const rows = [];
  for (const r of state.requests.values()) {
    if (r.cells.size === 0 && (r.finishStep !== null || r.finishReason)) continue;
    const cells = [];
    for (const [step, c] of r.cells) {
      if (step < firstStep) continue;
      let x0;
      let x1;
      if (mode === 'wall') {
        const s = byStep.get(step);
        if (!s) continue;
        x0 = s.start - t0;
        x1 = s.end - t0;
      } else {
        x0 = step - firstStep;
        x1 = x0 + 1;
      }
      cells.push({ step, state: c.state, tokens: c.tokens, x0, x1 });
    }
    cells.sort((a, b) => a.step - b.step);
    let finished = null;
    if (r.finishStep !== null && r.finishStep >= firstStep) {
      const s = byStep.get(r.finishStep);
      const x = mode === 'wall' ? (s ? s.end - t0 : null) : r.finishStep - firstStep + 1;
      if (x !== null) finished = { step: r.finishStep, x, reason: r.finishReason };
    }
    rows.push({
      id: r.id,
      api_id: r.api_id,
      first: r.firstStep ?? Infinity,
      finishReason: r.finishReason,
      done: r.finishStep !== null || Boolean(r.finishReason),
      cells,
      finished,
    });
  }
  rows.sort((a, b) => a.first - b.first || a.id - b.id);
  return {
    mode,
    firstStep,
    lastStep,
    numSteps: steps.length,
    t0,
    t1,
    span: mode === 'wall' ? Math.max(t1 - t0, 1e-6) : Math.max(steps.length, 1),
    rows,
  };
}

/** Owners of every block of the latest kv snapshot: block -> [{id, pos}] (pos from 0). */
export function kvOwners(state) {
  if (!state.kv) return null;
  if (state.kvDerived) return state.kvDerived;
  const owners = new Map();
  const tables = state.kv.block_tables || {};
  for (const key of Object.keys(tables)) {
    const id = Number(key);
    tables[key].forEach((b, pos) => {
      let list = owners.get(b);
      if (!list) owners.set(b, (list = []));
      list.push({ id, pos });
    });
  }
  state.kvDerived = owners;
  return owners;
}

/**
 * The block map: one cell per physical block (num_total_blocks from the snapshot, else from
 * hello). state: 'used' (ref count > 0), 'cached' (free, K/V kept, evictable) or 'free'.
 */
export function blockMapView(state) {
  const total = state.kv?.num_total_blocks ?? state.hello?.num_total_blocks ?? 0;
  const refs = state.kv?.ref_counts || [];
  const cached = new Set(state.kv?.cached || []);
  const owners = kvOwners(state) || new Map();
  const cells = new Array(total);
  let used = 0;
  let shared = 0;
  for (let b = 0; b < total; ++b) {
    const refcount = refs[b] || 0;
    const own = owners.get(b) || [];
    const st = refcount > 0 ? 'used' : cached.has(b) ? 'cached' : 'free';
    if (refcount > 0) used += 1;
    if (refcount > 1) shared += 1;
    cells[b] = { block: b, refcount, state: st, owner: own.length ? own[0].id : null, owners: own };
  }
  return { total, used, shared, cached: cached.size, step: state.kv?.step ?? null, cells };
}

/** Positions of a request's blocks in its block table: block -> 1-based index. */
export function blockTableOrder(state, id) {
  const table = state.kv?.block_tables?.[String(id)] ?? state.requests.get(id)?.blocks ?? [];
  const order = new Map();
  table.forEach((b, i) => {
    if (!order.has(b)) order.set(b, i + 1);
  });
  return order;
}

function quantile(sorted, q) {
  if (!sorted.length) return null;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i];
}

/** The drill-down of one request (null when unknown). */
export function requestDetail(state, id) {
  const r = state.requests.get(id);
  if (!r) return null;
  const info = r.info || {};
  const itl = Array.isArray(info.itl_ms) ? info.itl_ms.slice().sort((a, b) => a - b) : [];
  const liveTable = state.kv?.block_tables?.[String(id)];
  const mean = itl.length ? itl.reduce((a, b) => a + b, 0) / itl.length : null;
  return {
    id: r.id,
    api_id: r.api_id,
    arrival: info.arrival ?? null,
    num_prompt_tokens: info.num_prompt_tokens ?? null,
    num_cached_tokens: info.num_cached_tokens ?? null,
    num_output_tokens: info.num_output_tokens ?? null,
    queue_s: info.queue_s ?? null,
    prefill_s: info.prefill_s ?? null,
    ttft_s: info.ttft_s ?? null,
    itl_ms: { n: itl.length, mean, p50: quantile(itl, 0.5), p90: quantile(itl, 0.9),
      p99: quantile(itl, 0.99), max: itl.length ? itl[itl.length - 1] : null },
    finish_reason: r.finishReason ?? info.finish_reason ?? null,
    blocks: liveTable ? liveTable.slice() : r.blocks ? r.blocks.slice() : [],
    blocks_live: Boolean(liveTable),
    scheduled_steps: r.scheduledSteps,
    prefill_tokens: r.prefillTokens,
    preemptions: r.preemptions,
    first_step: r.firstStep,
    finish_step: r.finishStep,
    prompt: info.prompt ?? null,
  };
}

// ---------------------------------------------------------------------------------------------
// Charts

const P = ['p50', 'p90', 'p99'];
const P_COLORS = { p50: '#4e79a7', p90: '#f28e2b', p99: '#e15759' };

/**
 * The charts: each {id, title, unit, xs (seconds, server clock), x0, x1, yMax, lines:
 * [{name, color, values (null = no data)}]}. Metrics charts span the last chartWindowS
 * seconds before `now` (server clock; default: the latest sample's time).
 */
export function chartsView(state, now) {
  const m = state.metrics;
  const tNow = now ?? (m.length ? m[m.length - 1].time : 0);
  // The window grows from one minute to chartWindowS as samples accumulate.
  const since = Math.min(m.length ? m[0].time : tNow, state.stepSeries.length ? state.stepSeries[0].t : tNow);
  const w = Math.min(state.options.chartWindowS, Math.max(60, Math.ceil((tNow - since) / 60) * 60));
  const from = tNow - w;
  const ms = m.filter((s) => s.time >= from);
  const xs = ms.map((s) => s.time);
  const pick = (f) => ms.map((s) => {
    const v = f(s);
    return typeof v === 'number' && Number.isFinite(v) ? v : null;
  });
  const chart = (id, title, unit, lines, yMin = null) => ({
    id, title, unit, xs, x0: from, x1: tNow, lines, yMax: niceMax(lines, yMin),
  });
  const charts = [
    chart('running-waiting', 'Running / waiting requests', '', [
      { name: 'running', color: '#4e79a7', values: pick((s) => s.num_running) },
      { name: 'waiting', color: '#e15759', values: pick((s) => s.num_waiting) },
    ], 1),
    chart('kv-usage', 'KV cache usage', '%', [
      { name: 'usage', color: '#b07aa1', values: pick((s) => (s.kv_cache_usage ?? NaN) * 100) },
    ], 100),
    chart('output-tps', 'Output tokens/s', 'tok/s', [
      { name: 'tok/s', color: '#59a14f', values: pick((s) => s.output_tokens_per_s) },
    ], 1),
    chart('ttft', 'TTFT (last minute)', 's', P.map((p) => ({
      name: p, color: P_COLORS[p], values: pick((s) => s.ttft_s?.[p]) })), 0.001),
    chart('itl', 'ITL (last minute)', 's', P.map((p) => ({
      name: p, color: P_COLORS[p], values: pick((s) => s.itl_s?.[p]) })), 0.001),
  ];
  // Tokens per step vs the budget: per step, over the same window (by step end time).
  const ss = state.stepSeries.filter((s) => s.t >= from);
  const sx = ss.map((s) => s.t);
  const tokLines = [
    { name: 'budget', color: '#999999', values: ss.map((s) => s.budget ?? null) },
    { name: 'prefill+decode', color: '#f28e2b', values: ss.map((s) => s.tokens) },
    { name: 'decode', color: '#4e79a7', values: ss.map((s) => s.decode ?? null) },
  ];
  charts.splice(2, 0, {
    id: 'tokens-per-step', title: 'Tokens per step vs budget', unit: 'tok', xs: sx,
    x0: from, x1: tNow, lines: tokLines, yMax: niceMax(tokLines, 1),
  });
  return charts;
}

/** A round upper bound of the lines' values (at least `floor`). */
export function niceMax(lines, floor = null) {
  let max = floor ?? 0;
  for (const l of lines) for (const v of l.values) if (v !== null && v > max) max = v;
  if (max <= 0) return 1;
  const e = Math.pow(10, Math.floor(Math.log10(max)));
  for (const k of [1, 2, 2.5, 5, 10]) if (k * e >= max - 1e-12) return k * e;
  return 10 * e;
}

/**
 * An SVG path for one line: xs (any unit) mapped from [x0, x1] to [0, width], values from
 * [0, yMax] to [height, 0]; a null value breaks the line. '' when nothing to draw.
 */
export function linePath(xs, values, { x0, x1, yMax, width, height }) {
  const dx = x1 - x0 || 1;
  let d = '';
  let pen = false;
  for (let i = 0; i < xs.length; ++i) {
    const v = values[i];
    if (v === null || v === undefined || !Number.isFinite(v)) {
      pen = false;
      continue;
    }
    const x = ((xs[i] - x0) / dx) * width;
    const y = height - (Math.min(v, yMax) / (yMax || 1)) * height;
    d += `${pen ? 'L' : 'M'}${x.toFixed(1)},${y.toFixed(1)}`;
    pen = true;
  }
  return d;
}

// ---------------------------------------------------------------------------------------------
// Server-sent events (the playground's streamed reply; EventSource handles /ui/events)

/**
 * An incremental text/event-stream parser: push(text) returns the complete events so far as
 * {event, data} (data lines joined by '\n'); comments and unknown fields are skipped.
 */
export class SseParser {
  constructor() {
    this.buf = '';
    this.event = '';
    this.data = [];
  }

  push(text) {
    this.buf += text;
    const out = [];
    let nl;
    while ((nl = this.buf.search(/\r\n|\r|\n/)) >= 0) {
      const line = this.buf.slice(0, nl);
      const len = this.buf.startsWith('\r\n', nl) ? 2 : 1;
      // A lone '\r' at the very end may be the first half of '\r\n': wait for more.
      if (len === 1 && this.buf[nl] === '\r' && nl === this.buf.length - 1) break;
      this.buf = this.buf.slice(nl + len);
      if (line === '') {
        if (this.data.length) out.push({ event: this.event || 'message', data: this.data.join('\n') });
        this.event = '';
        this.data = [];
        continue;
      }
      if (line.startsWith(':')) continue;
      const c = line.indexOf(':');
      const field = c < 0 ? line : line.slice(0, c);
      let value = c < 0 ? '' : line.slice(c + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') this.event = value;
      else if (field === 'data') this.data.push(value);
    }
    return out;
  }
}

/**
 * The text an OpenAI streaming chunk adds (completions: choices[0].text; chat:
 * choices[0].delta.content), '' when none.
 */
export function chunkText(chunk) {
  const c = chunk?.choices?.[0];
  if (!c) return '';
  if (typeof c.text === 'string') return c.text;
  if (c.delta && typeof c.delta.content === 'string') return c.delta.content;
  return '';
}

/** Formats seconds for people: '12 ms', '1.25 s', '-' for null. */
export function fmtSeconds(s) {
  if (s === null || s === undefined || !Number.isFinite(s)) return '-';
  if (Math.abs(s) < 1) return `${(s * 1000).toFixed(s < 0.01 ? 2 : 1)} ms`;
  return `${s.toFixed(2)} s`;
}
