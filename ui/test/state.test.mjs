// Unit tests of the dashboard's state (ui/state.js): events in, view models out.
//   cd ui && npm test      (or: node --test ui/test/)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  createState, reduce, timelineView, blockMapView, blockTableOrder, requestDetail, chartsView,
  linePath, niceMax, SseParser, chunkText, fmtSeconds, ownerColor,
} from '../state.js';

const HELLO = { model: 'm', replica_id: null, num_total_blocks: 8, block_size: 16,
  max_num_batched_tokens: 32, max_num_seqs: 4, show_prompts: false, server_time: 100 };

function step(n, fields = {}) {
  return { step: n, start: 100 + n * 0.01, end: 100 + n * 0.01 + 0.008, scheduled: [], preempted: [],
    waiting: [], num_running: 0, num_waiting: 0, num_prefill_tokens: 0, num_decode_tokens: 0,
    token_budget: 32, num_used_blocks: 0, num_cached_blocks: 0, kv_cache_usage: 0, finished: [],
    ...fields };
}

function scripted() {
  const s = createState();
  reduce(s, 'hello', HELLO);
  reduce(s, 'request', { id: 0, api_id: 'cmpl-a', arrival: 100, num_prompt_tokens: 40 });
  reduce(s, 'request', { id: 1, api_id: 'cmpl-b', arrival: 100, num_prompt_tokens: 8 });
  // Step 0: #0 prefill chunk of 32, #1 waits. Step 1: #0 last chunk (8), #1 prefill 8.
  reduce(s, 'step', step(0, { scheduled: [{ id: 0, tokens: 32, prefill: true }], waiting: [1] }));
  reduce(s, 'step', step(1, { scheduled: [{ id: 0, tokens: 8, prefill: true }, { id: 1, tokens: 8, prefill: true }] }));
  // Step 2: both decode; #1 finishes. Step 3: #0 preempted. Step 4: #0 waits, then decodes.
  reduce(s, 'step', step(2, { scheduled: [{ id: 0, tokens: 1, prefill: false }, { id: 1, tokens: 1, prefill: false }],
    finished: [{ id: 1, finish_reason: 'length' }] }));
  reduce(s, 'step', step(3, { preempted: [0], waiting: [0] }));
  reduce(s, 'step', step(4, { scheduled: [{ id: 0, tokens: 41, prefill: true }] }));
  return s;
}

test('timeline: one row per request, one cell per step it appears in, states from the step records', () => {
  const s = scripted();
  const v = timelineView(s, 'steps');
  assert.equal(v.firstStep, 0);
  assert.equal(v.lastStep, 4);
  assert.deepEqual(v.rows.map((r) => r.id), [0, 1]);
  const cells = (id) => v.rows.find((r) => r.id === id).cells.map((c) => [c.step, c.state, c.tokens]);
  assert.deepEqual(cells(0), [[0, 'prefill', 32], [1, 'prefill', 8], [2, 'decode', 1], [3, 'preempted', 0],
    [4, 'prefill', 41]]);
  assert.deepEqual(cells(1), [[0, 'waiting', 0], [1, 'prefill', 8], [2, 'decode', 1]]);
  const r1 = v.rows.find((r) => r.id === 1);
  assert.equal(r1.api_id, 'cmpl-b');
  assert.equal(r1.done, true);
  assert.deepEqual(r1.finished, { step: 2, x: 3, reason: 'length' });
  // Columns are steps relative to the first kept one.
  assert.deepEqual(v.rows[0].cells.map((c) => [c.x0, c.x1]), [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5]]);
});

test('timeline wall mode: cells span each step\'s start..end in seconds since the first step', () => {
  const s = scripted();
  const v = timelineView(s, 'wall');
  const c = v.rows[0].cells[1];
  assert.ok(Math.abs(c.x0 - 0.01) < 1e-9 && Math.abs(c.x1 - 0.018) < 1e-9);
  assert.ok(Math.abs(v.span - 0.048) < 1e-9);
});

test('a request finished while not scheduled gets a finished cell', () => {
  const s = createState();
  reduce(s, 'step', step(0, { waiting: [5] }));
  reduce(s, 'step', step(1, { finished: [{ id: 5, finish_reason: 'abort' }] }));
  const v = timelineView(s);
  assert.deepEqual(v.rows[0].cells.map((c) => c.state), ['waiting', 'finished']);
  assert.equal(requestDetail(s, 5).finish_reason, 'abort');
});

test('memory is bounded: steps, cells and requests beyond the caps are dropped', () => {
  const s = createState({ maxSteps: 50, maxRequests: 20 });
  for (let n = 0; n < 2000; ++n) {
    const id = Math.floor(n / 10); // a new request every 10 steps, 10 steps long
    reduce(s, 'request', { id, api_id: `cmpl-${id}` });
    reduce(s, 'step', step(n, { scheduled: [{ id, tokens: 1, prefill: n % 10 === 0 }],
      finished: n % 10 === 9 ? [{ id, finish_reason: 'stop' }] : [] }));
  }
  assert.ok(s.steps.length <= 50 + 8, `steps kept: ${s.steps.length}`);
  assert.ok(s.requests.size <= 20, `requests kept: ${s.requests.size}`);
  assert.ok(s.apiIds.size <= s.requests.size);
  const v = timelineView(s);
  for (const r of v.rows) for (const c of r.cells) assert.ok(c.step >= v.firstStep);
  assert.ok(s.stepSeries.length <= s.options.maxStepSeries * 1.2);
  for (let i = 0; i < 1000; ++i) reduce(s, 'metrics', { time: i });
  assert.ok(s.metrics.length <= s.options.maxMetrics * 1.2);
});

test('a step number going backwards (a restarted server) starts the timeline over', () => {
  const s = scripted();
  reduce(s, 'step', step(0, { scheduled: [{ id: 0, tokens: 3, prefill: true }] }));
  const v = timelineView(s);
  assert.equal(v.numSteps, 1);
  assert.deepEqual(v.rows.map((r) => r.cells.length), [1]);
});

test('a hello for another model or pool resets; the same one (a reconnect) keeps the data', () => {
  const s = scripted();
  reduce(s, 'hello', HELLO);
  assert.equal(timelineView(s).rows.length, 2);
  reduce(s, 'hello', { ...HELLO, num_total_blocks: 16 });
  assert.equal(timelineView(s).rows.length, 0);
});

const KV = { step: 4, num_total_blocks: 8, ref_counts: [2, 1, 1, 0, 0, 1, 0, 0], cached: [3, 4],
  block_tables: { 0: [0, 1, 2], 1: [0, 5] } };

test('block map: one cell per block; held = ref count > 0; owners, shared and cached marked', () => {
  const s = scripted();
  reduce(s, 'kv', KV);
  const v = blockMapView(s);
  assert.equal(v.total, 8);
  assert.equal(v.cells.length, 8);
  assert.equal(v.used, KV.ref_counts.filter((x) => x > 0).length);
  assert.equal(v.shared, 1);
  assert.deepEqual(v.cells.map((c) => c.state), ['used', 'used', 'used', 'cached', 'cached', 'used', 'free', 'free']);
  assert.deepEqual(v.cells[0].owners.map((o) => o.id).sort(), [0, 1]);
  assert.equal(v.cells[5].owner, 1);
  assert.equal(v.cells[6].owner, null);
  assert.equal(v.step, 4);
});

test('block map before any snapshot: num_total_blocks free cells from hello', () => {
  const s = createState();
  reduce(s, 'hello', HELLO);
  const v = blockMapView(s);
  assert.equal(v.cells.length, 8);
  assert.ok(v.cells.every((c) => c.state === 'free'));
});

test('block table order: 1-based positions; kept after the request leaves the snapshot', () => {
  const s = scripted();
  reduce(s, 'kv', KV);
  assert.deepEqual([...blockTableOrder(s, 0)], [[0, 1], [1, 2], [2, 3]]);
  reduce(s, 'kv', { ...KV, block_tables: { 1: [0, 5] } });
  assert.deepEqual([...blockTableOrder(s, 0)], [[0, 1], [1, 2], [2, 3]]);
  const d = requestDetail(s, 0);
  assert.deepEqual(d.blocks, [0, 1, 2]);
  assert.equal(d.blocks_live, false);
  assert.equal(requestDetail(s, 1).blocks_live, true);
});

test('request detail: timings, ITL summary, counts from the step records', () => {
  const s = scripted();
  reduce(s, 'request', { id: 1, api_id: 'cmpl-b', arrival: 100, num_prompt_tokens: 8, num_cached_tokens: 0,
    num_output_tokens: 2, queue_s: 0.01, prefill_s: 0.008, ttft_s: 0.018, itl_ms: [3, 1, 2], finish_reason: 'length',
    prompt: null });
  const d = requestDetail(s, 1);
  assert.equal(d.api_id, 'cmpl-b');
  assert.equal(d.ttft_s, 0.018);
  assert.deepEqual({ n: d.itl_ms.n, mean: d.itl_ms.mean, p50: d.itl_ms.p50, max: d.itl_ms.max },
    { n: 3, mean: 2, p50: 2, max: 3 });
  assert.equal(d.finish_reason, 'length');
  assert.equal(d.scheduled_steps, 2);
  assert.equal(d.prefill_tokens, 8);
  assert.equal(requestDetail(s, 0).preemptions, 1);
  assert.equal(requestDetail(s, 99), null);
  assert.equal(s.apiIds.get('cmpl-b'), 1);
});

test('charts: the metrics series over the window; paths move as time passes', () => {
  const s = createState();
  for (let t = 0; t < 10; ++t) {
    reduce(s, 'metrics', { time: 1000 + t, num_running: t, num_waiting: 1, kv_cache_usage: t / 10,
      output_tokens_per_s: 5, ttft_s: { p50: 0.1, p90: 0.2, p99: null }, itl_s: { p50: null, p90: null, p99: null } });
  }
  const a = chartsView(s, 1010);
  const ids = a.map((c) => c.id);
  assert.deepEqual(ids, ['running-waiting', 'kv-usage', 'tokens-per-step', 'output-tps', 'ttft', 'itl']);
  const rw = a[0];
  assert.deepEqual(rw.lines[0].values, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  assert.equal(a[1].lines[0].values[5], 50);
  assert.deepEqual(a[4].lines[2].values, Array(10).fill(null));
  const box = (c) => ({ x0: c.x0, x1: c.x1, yMax: c.yMax, width: 300, height: 100 });
  const b = chartsView(s, 1012);
  assert.notEqual(linePath(rw.xs, rw.lines[0].values, box(rw)), linePath(b[0].xs, b[0].lines[0].values, box(b[0])));
});

test('linePath: scaled, clamped, broken at nulls', () => {
  const d = linePath([0, 1, 2, 3], [0, 5, null, 20], { x0: 0, x1: 3, yMax: 10, width: 30, height: 10 });
  assert.equal(d, 'M0.0,10.0L10.0,5.0M30.0,0.0');
  assert.equal(linePath([], [], { x0: 0, x1: 1, yMax: 1, width: 1, height: 1 }), '');
  assert.equal(niceMax([{ values: [0.7] }]), 1);
  assert.equal(niceMax([{ values: [130] }]), 200);
  assert.equal(niceMax([{ values: [] }], 100), 100);
});

test('SseParser: events split anywhere, CRLF, comments, multi-line data', () => {
  const p = new SseParser();
  const text = ': comment\r\nevent: step\r\ndata: {"a":\r\ndata: 1}\r\n\r\ndata: [DONE]\n\n';
  const out = [];
  for (const ch of text) out.push(...p.push(ch));
  assert.deepEqual(out, [{ event: 'step', data: '{"a":\n1}' }, { event: 'message', data: '[DONE]' }]);
});

test('chunkText: completions text, chat delta content, nothing else', () => {
  assert.equal(chunkText({ choices: [{ text: 'a' }] }), 'a');
  assert.equal(chunkText({ choices: [{ delta: { content: 'b' } }] }), 'b');
  assert.equal(chunkText({ choices: [{ delta: { role: 'assistant' } }] }), '');
  assert.equal(chunkText({ choices: [] }), '');
});

test('formatting helpers', () => {
  assert.equal(fmtSeconds(null), '-');
  assert.equal(fmtSeconds(0.0123), '12.3 ms');
  assert.equal(fmtSeconds(1.5), '1.50 s');
  assert.equal(ownerColor(0), ownerColor(20));
  assert.notEqual(ownerColor(0), ownerColor(1));
});

test('index.html lists every ui/*.js module in its import map (so ?api_key= reaches each)', () => {
  const ui = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  const html = fs.readFileSync(path.join(ui, 'index.html'), 'utf8');
  const listed = JSON.parse(html.match(/var MODULES = (\[[^\]]*\])/)[1].replace(/'/g, '"')).sort();
  const files = fs.readdirSync(ui).filter((f) => f.endsWith('.js')).sort();
  assert.deepEqual(listed, files);
});
