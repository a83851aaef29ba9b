// The dashboard page (GET /ui): connects to GET /ui/events, reduces the events into state.js's
// state and renders it, at most a few times per second (slower when rendering is slow).
import {
  createState, reduce, timelineView, blockMapView, blockTableOrder, chartsView, requestDetail,
} from './state.js';
import { renderLegend, renderTimeline, BlockMap, renderCharts, renderDetail } from './views.js';
import { sendPlayground } from './playground.js';

const $ = (id) => document.querySelector(`[data-testid="${id}"]`);
const params = new URLSearchParams(location.search);
const KEY_STORE = 'llmserve-ui-api-key';
let apiKey = params.get('api_key') || sessionStorage.getItem(KEY_STORE) || '';
const num = (v) => (v !== null && Number.isFinite(Number(v)) && Number(v) > 0 ? Number(v) : undefined);
const state = createState(Object.fromEntries(Object.entries({
  maxSteps: num(params.get('steps')),
  maxRequests: num(params.get('rows')),
}).filter(([, v]) => v !== undefined)));

let mode = params.get('mode') === 'wall' ? 'wall' : 'steps';
let paused = false;
let selectedId = null;
let hoverId = null;
const playgroundApiIds = new Set();
let es = null;

const blockMap = new BlockMap($('blockmap'));
renderLegend($('timeline-legend'));
$('timeline-mode').value = mode;

function setStatus(s, text) {
  const el = $('conn-status');
  el.dataset.state = s;
  el.textContent = text ?? s;
}

function authHeaders() {
  return apiKey ? { Authorization: `Bearer ${apiKey}` } : {};
}

function connect() {
  if (es) es.close();
  const url = '/ui/events' + (apiKey ? `?api_key=${encodeURIComponent(apiKey)}` : '');
  es = new EventSource(url);
  setStatus('connecting', 'connecting…');
  for (const type of ['hello', 'step', 'kv', 'request', 'metrics', 'dropped']) {
    es.addEventListener(type, (e) => {
      let data;
      try {
        data = JSON.parse(e.data);
      } catch {
        return;
      }
      reduce(state, type, data);
      if (type === 'hello') setStatus('open', 'live');
      schedule();
    });
  }
  es.onerror = () => {
    if (es.readyState === EventSource.CLOSED) setStatus('error', 'disconnected');
    else setStatus('reconnecting', 'reconnecting…');
    checkAuth();
  };
}

/** EventSource hides the status of a failed connection: ask the API whether the key is good. */
async function checkAuth() {
  try {
    const r = await fetch('/v1/models', { headers: authHeaders() });
    if (r.status === 401) {
      if (es) es.close();
      setStatus('unauthorized', 'API key needed');
      $('login').hidden = false;
      $('login-error').textContent = apiKey ? 'the server refused this key' : '';
    }
  } catch { /* the server is down: EventSource keeps retrying */ }
}

$('login').addEventListener('submit', (e) => {
  e.preventDefault();
  apiKey = $('login-key').value.trim();
  sessionStorage.setItem(KEY_STORE, apiKey);
  $('login').hidden = true;
  connect();
});

// ---- rendering, throttled: at most every 150 ms, and never more than 1/5 of the time
let pending = false;
let lastRender = 0;
let renderCost = 0;
function schedule() {
  if (pending) return;
  pending = true;
  const wait = Math.max(0, lastRender + Math.max(150, renderCost * 5) - performance.now());
  setTimeout(render, wait);
}

function render() {
  pending = false;
  if (paused) return;
  const t0 = performance.now();
  const h = state.hello;
  if (h) {
    $('model').textContent = `${h.model} · ${h.num_total_blocks} blocks of ${h.block_size} · budget ${
      h.max_num_batched_tokens} tokens · ${h.max_num_seqs} seqs`;
    $('replica').textContent = h.replica_id ? `replica ${h.replica_id}` : '';
  }
  const dropped = $('dropped');
  dropped.dataset.dropped = String(state.dropped);
  dropped.textContent = state.dropped ? `${state.dropped} events dropped` : '';

  const playgroundIds = new Set();
  for (const a of playgroundApiIds) {
    const id = state.apiIds.get(a);
    if (id !== undefined) playgroundIds.add(id);
  }
  const tv = timelineView(state, mode);
  renderTimeline($('timeline'), tv, {
    width: $('timeline-scroll').clientWidth, selectedId, hoverId, playgroundIds,
  });
  const lastStep = state.steps[state.steps.length - 1];
  $('timeline-summary').textContent = tv.numSteps
    ? `${tv.rows.length} requests · steps ${tv.firstStep}–${tv.lastStep} · last step ${
      ((lastStep.end - lastStep.start) * 1000).toFixed(1)} ms, ${lastStep.num_prefill_tokens +
      lastStep.num_decode_tokens}/${lastStep.token_budget} tokens`
    : 'no step yet: send a request';

  const bv = blockMapView(state);
  const focus = hoverId ?? selectedId;
  blockMap.render(bv, focus !== null ? blockTableOrder(state, focus) : null);
  $('blockmap-summary').textContent = `${bv.used}/${bv.total} held · ${bv.shared} shared · ${
    bv.cached} cached${focus !== null ? ` · numbers: #${focus}'s block table` : ''}`;

  renderCharts($('charts'), chartsView(state, Date.now() / 1000 + state.serverClockOffset));
  renderDetail($('request-detail'), $('detail-title'), selectedId !== null ? requestDetail(state, selectedId) : null);
  const link = $('playground-request');
  const pgId = lastPlaygroundApiId && state.apiIds.get(lastPlaygroundApiId);
  if (pgId !== undefined && pgId !== null && pgId !== '') {
    link.hidden = false;
    link.dataset.requestId = String(pgId);
    link.textContent = `request #${pgId} in the timeline`;
  }
  lastRender = performance.now();
  renderCost = lastRender - t0;
}

// Charts slide with time even when no event comes.
setInterval(schedule, 1000);

// ---- interaction
const timeline = $('timeline');
const tooltip = $('tooltip');
function rowOf(target) {
  const g = target.closest?.('[data-testid="timeline-row"]');
  return g ? Number(g.dataset.requestId) : null;
}
timeline.addEventListener('mousemove', (e) => {
  const id = rowOf(e.target);
  if (id !== hoverId) {
    hoverId = id;
    schedule();
  }
  const cell = e.target.closest?.('rect[data-step]');
  if (cell && id !== null) {
    const st = cell.dataset.state;
    const tokens = Number(cell.dataset.tokens || 0);
    tooltip.textContent = `#${id} step ${cell.dataset.step}: ${st === 'prefill' ? 'prefill chunk' : st}${
      tokens ? ` (${tokens} token${tokens === 1 ? '' : 's'})` : ''}${cell.dataset.finishReason ? ` (${cell.dataset.finishReason})` : ''}`;
    tooltip.style.left = `${e.clientX + 12}px`;
    tooltip.style.top = `${e.clientY + 12}px`;
    tooltip.hidden = false;
  } else {
    tooltip.hidden = true;
  }
});
timeline.addEventListener('mouseleave', () => {
  hoverId = null;
  tooltip.hidden = true;
  schedule();
});
// pointerdown, not click: the timeline is redrawn a few times per second, and a press and a
// release on two generations of the same row would make no click on the row.
timeline.addEventListener('pointerdown', (e) => {
  const id = rowOf(e.target);
  selectedId = id === selectedId ? null : id;
  schedule();
});
$('timeline-mode').addEventListener('change', (e) => {
  mode = e.target.value;
  schedule();
});
$('pause').addEventListener('click', (e) => {
  paused = !paused;
  e.target.setAttribute('aria-pressed', String(paused));
  e.target.textContent = paused ? 'Resume' : 'Pause';
  if (!paused) schedule();
});

// ---- playground
let lastPlaygroundApiId = null;
let controller = null;
$('playground').addEventListener('submit', async (e) => {
  e.preventDefault();
  const f = e.target.elements;
  const out = $('playground-output');
  const status = $('playground-status');
  out.textContent = '';
  delete out.dataset.apiId;
  $('playground-request').hidden = true;
  lastPlaygroundApiId = null;
  status.dataset.state = 'streaming';
  status.textContent = 'streaming…';
  controller = new AbortController();
  $('playground-send').disabled = true;
  $('playground-stop').disabled = false;
  try {
    const r = await sendPlayground({
      endpoint: f.endpoint.value,
      prompt: f.prompt.value,
      maxTokens: Number(f.max_tokens.value) || 16,
      temperature: Number(f.temperature.value) || 0,
      model: state.hello?.model,
      apiKey,
      signal: controller.signal,
      onId: (id) => {
        lastPlaygroundApiId = id;
        playgroundApiIds.add(id);
        if (playgroundApiIds.size > 32) playgroundApiIds.delete(playgroundApiIds.values().next().value);
        out.dataset.apiId = id;
        schedule();
      },
      onText: (t) => {
        out.textContent += t;
      },
    });
    status.dataset.state = 'done';
    status.textContent = `done${r.finishReason ? ` (${r.finishReason})` : ''}${r.id ? ` · ${r.id}` : ''}`;
  } catch (err) {
    status.dataset.state = 'error';
    status.textContent = err.name === 'AbortError' ? 'stopped' : String(err.message || err);
  } finally {
    $('playground-send').disabled = false;
    $('playground-stop').disabled = true;
    schedule();
  }
});
$('playground-stop').addEventListener('click', () => controller?.abort());
$('playground-request').addEventListener('click', (e) => {
  e.preventDefault();
  const id = Number(e.target.dataset.requestId);
  selectedId = id;
  schedule();
  setTimeout(() => document.querySelector(`[data-testid="timeline-row"][data-request-id="${id}"]`)
    ?.scrollIntoView({ block: 'nearest' }), 200);
});

// For people poking at the page from the devtools console (tests use the DOM).
window.llmserveUi = { state };

connect();
