#!/usr/bin/env node
// A stand-in for `llmserve serve` with the dashboard (docs/ui.md), for developing and testing
// the page without the C++ server: serves ui/*.html|js|css at /ui/... the way the server does,
// runs a toy continuous-batching scheduler over a paged KV pool (chunked prefill, prefix
// caching, preemption) in JavaScript, and streams its events on GET /ui/events with the same
// contract. /v1/completions and /v1/chat/completions answer (streamed or not) with
// deterministic text, so a streamed reply equals the non-streamed one.
//
//   node ui/test/mock_server.mjs [--port 8000 (0 = any free)] [--host 127.0.0.1]
//        [--api-key KEY] [--num-blocks 96] [--block-size 16] [--max-num-batched-tokens 64]
//        [--max-num-seqs 6] [--step-ms 40] [--demo] [--show-prompts] [--ui-dir DIR]
//        [--upstream http://127.0.0.1:8000]
//
// --demo keeps a random load running (for looking at the page). --upstream URL: no toy engine;
// the page's files come from --ui-dir (edit and reload, no rebuild) and everything else
// (/ui/events, /v1/*, /metrics, /health) is passed through to a running `llmserve serve`. Prints
// "mock llmserve serving on http://HOST:PORT" once listening; SIGTERM/SIGINT stop it.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));

function parseArgs(argv) {
  const o = {
    port: 8000, host: '127.0.0.1', apiKey: '', numBlocks: 96, blockSize: 16,
    maxNumBatchedTokens: 64, maxNumSeqs: 6, stepMs: 40, demo: false, showPrompts: false,
    uiDir: path.resolve(HERE, '..'),
  };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--port') o.port = Number(next());
    else if (a === '--host') o.host = next();
    else if (a === '--api-key') o.apiKey = next();
    else if (a === '--num-blocks') o.numBlocks = Number(next());
    else if (a === '--block-size') o.blockSize = Number(next());
    else if (a === '--max-num-batched-tokens') o.maxNumBatchedTokens = Number(next());
    else if (a === '--max-num-seqs') o.maxNumSeqs = Number(next());
    else if (a === '--step-ms') o.stepMs = Number(next());
    else if (a === '--demo') o.demo = true;
    else if (a === '--show-prompts') o.showPrompts = true;
    else if (a === '--ui-dir') o.uiDir = path.resolve(next());
    else if (a === '--upstream') o.upstream = next();
    else throw new Error(`unknown argument ${a}`);
  }
  return o;
}

const WORDS = ('once upon a time there was a little cat named Tom who liked to play in the ' +
  'garden with his friend the dog one day they found a big red ball and ran after it until ' +
  'the sun went down and they were very happy').split(' ');

function hashString(s) {
  let h = 2166136261;
  for (let i = 0; i < s.length; ++i) h = Math.imul(h ^ s.charCodeAt(i), 16777619) >>> 0;
  return h;
}

/** The toy tokenizer: 4 characters per token. */
function tokenize(text) {
  const t = [];
  for (let i = 0; i < text.length; i += 4) t.push(text.slice(i, i + 4));
  return t.length ? t : [' '];
}

const now = () => performance.timeOrigin / 1000 + performance.now() / 1000;

class Engine {
  constructor(o) {
    this.o = o;
    this.nextId = 0;
    this.step = 0;
    this.waiting = [];
    this.running = [];
    this.refs = new Array(o.numBlocks).fill(0);
    this.free = [...Array(o.numBlocks).keys()]; // free block ids, LRU order for cached ones
    this.hashOf = new Map(); // block -> prefix hash (full prompt blocks)
    this.byHash = new Map(); // prefix hash -> block
    this.listeners = new Set();
    this.finishedLog = []; // {time, ttft, itls[], outputTokens}
    this.outputTimes = [];
    this.lastKvSent = 0;
    this.kvDirty = true;
    this.timer = null;
  }

  emit(type, data) {
    for (const l of this.listeners) l(type, data);
  }

  submit({ prompt, maxTokens, apiId, onToken, onFinish }) {
    const id = this.nextId++;
    const tokens = tokenize(prompt);
    const seed = hashString(prompt);
    const r = {
      id, apiId, prompt, promptTokens: tokens, numPrompt: tokens.length, maxTokens,
      computed: 0, output: [], blocks: [], arrival: now(), admitted: null, firstToken: null,
      lastToken: null, itl: [], cachedTokens: 0, onToken, onFinish, seed, aborted: false,
    };
    this.waiting.push(r);
    this.emit('request', this.requestInfo(r));
    this.kick();
    return r;
  }

  abort(r) {
    r.aborted = true;
  }

  requestInfo(r) {
    return {
      id: r.id, api_id: r.apiId, arrival: r.arrival, num_prompt_tokens: r.numPrompt,
      num_cached_tokens: r.cachedTokens, num_output_tokens: r.output.length,
      queue_s: r.admitted !== null ? r.admitted - r.arrival : null,
      prefill_s: r.firstToken !== null && r.admitted !== null ? r.firstToken - r.admitted : null,
      ttft_s: r.firstToken !== null ? r.firstToken - r.arrival : null,
      itl_ms: r.finishReason ? r.itl.map((s) => s * 1000) : null,
      finish_reason: r.finishReason ?? null,
      prompt: this.o.showPrompts ? r.prompt : null,
    };
  }

  kick() {
    if (!this.timer) this.timer = setTimeout(() => this.tick(), this.o.stepMs);
  }

  blockHash(r, i) {
    return hashString(r.promptTokens.slice(0, (i + 1) * this.o.blockSize).join('')) + ':' + i;
  }

  takeFree() {
    // Prefer never-cached blocks; else evict the least recently freed cached one.
    let k = this.free.findIndex((b) => !this.hashOf.has(b));
    if (k < 0) k = 0;
    if (k >= this.free.length) return null;
    const b = this.free.splice(k, 1)[0];
    const h = this.hashOf.get(b);
    if (h !== undefined) {
      this.hashOf.delete(b);
      this.byHash.delete(h);
    }
    return b;
  }

  release(r) {
    for (const b of r.blocks) {
      this.refs[b] -= 1;
      if (this.refs[b] === 0) this.free.push(b);
    }
    r.blocks = [];
    this.kvDirty = true;
  }

  /** Grows r's block table to hold n tokens; false (nothing taken) if the pool is short. */
  ensureBlocks(r, n) {
    const need = Math.ceil(n / this.o.blockSize) - r.blocks.length;
    if (need <= 0) return true;
    if (need > this.free.length) return false;
    for (let i = 0; i < need; ++i) {
      const b = this.takeFree();
      this.refs[b] = 1;
      r.blocks.push(b);
    }
    this.kvDirty = true;
    return true;
  }

  /** On admission: the longest run of cached full prompt blocks. */
  takePrefix(r) {
    const bs = this.o.blockSize;
    const full = Math.floor((r.numPrompt - 1) / bs);
    for (let i = 0; i < full; ++i) {
      const b = this.byHash.get(this.blockHash(r, i));
      if (b === undefined) break;
      if (this.refs[b] === 0) this.free.splice(this.free.indexOf(b), 1);
      this.refs[b] += 1;
      r.blocks.push(b);
    }
    r.computed = r.blocks.length * bs;
    r.cachedTokens = r.computed;
  }

  tick() {
    this.timer = null;
    const start = now();
    const o = this.o;
    let budget = o.maxNumBatchedTokens;
    const scheduled = [];
    const preempted = [];
    const finished = [];
    for (const r of [...this.waiting, ...this.running]) {
      if (r.aborted && !r.finishReason) this.finish(r, 'abort', finished);
    }
    // Running first, in admission order.
    for (let i = 0; i < this.running.length && budget > 0; ++i) {
      const r = this.running[i];
      const total = r.numPrompt + r.output.length;
      const n = Math.min(total - r.computed, budget);
      if (n <= 0) continue;
      while (!this.ensureBlocks(r, r.computed + n)) {
        const victim = this.running[this.running.length - 1];
        this.running.pop();
        this.release(victim);
        victim.computed = 0;
        preempted.push(victim.id);
        this.waiting.unshift(victim);
        const si = scheduled.findIndex((e) => e.r === victim);
        if (si >= 0) {
          budget += scheduled[si].tokens;
          scheduled.splice(si, 1);
        }
        if (victim === r) break;
      }
      if (!this.running.includes(r)) break;
      scheduled.push({ r, tokens: n, prefill: r.computed + n < total || r.computed < r.numPrompt });
      budget -= n;
    }
    // Then admit waiting requests, FCFS, while seats, budget and blocks last.
    while (!preempted.length && this.waiting.length && budget > 0 &&
           this.running.length < o.maxNumSeqs) {
      const r = this.waiting[0];
      if (r.computed === 0) this.takePrefix(r);
      const total = r.numPrompt + r.output.length;
      const n = Math.min(total - r.computed, budget);
      if (!this.ensureBlocks(r, r.computed + n)) {
        this.release(r);
        r.computed = 0;
        break;
      }
      this.waiting.shift();
      if (r.admitted === null) r.admitted = start;
      this.running.push(r);
      scheduled.push({ r, tokens: n, prefill: true });
      budget -= n;
    }
    // "Execute": a step costs a little per token.
    const end = start + 0.002 + 0.0001 * (o.maxNumBatchedTokens - budget);
    for (const e of scheduled) {
      const r = e.r;
      r.computed += e.tokens;
      // Full prompt blocks become cacheable.
      const bs = o.blockSize;
      for (let i = 0; i < Math.floor(Math.min(r.computed, r.numPrompt) / bs); ++i) {
        const b = r.blocks[i];
        if (!this.hashOf.has(b)) {
          const h = this.blockHash(r, i);
          if (!this.byHash.has(h)) {
            this.byHash.set(h, b);
            this.hashOf.set(b, h);
          }
        }
      }
      if (r.computed >= r.numPrompt + r.output.length) {
        const word = WORDS[(r.seed + r.output.length) % WORDS.length];
        const text = (r.output.length ? ' ' : '') + word;
        r.output.push(text);
        if (r.firstToken === null) r.firstToken = end;
        else r.itl.push(end - r.lastToken);
        r.lastToken = end;
        this.outputTimes.push(end);
        r.onToken?.(text);
        if (r.output.length >= r.maxTokens) this.finish(r, 'length', finished);
      }
    }
    if (scheduled.length || preempted.length || finished.length) {
      const used = this.refs.filter((x) => x > 0).length;
      const cached = this.free.filter((b) => this.hashOf.has(b)).length;
      this.emit('step', {
        step: this.step, start, end,
        scheduled: scheduled.map((e) => ({ id: e.r.id, tokens: e.tokens, prefill: e.prefill })),
        preempted, waiting: this.waiting.map((r) => r.id),
        num_running: this.running.length, num_waiting: this.waiting.length,
        num_prefill_tokens: scheduled.filter((e) => e.prefill).reduce((a, e) => a + e.tokens, 0),
        num_decode_tokens: scheduled.filter((e) => !e.prefill).reduce((a, e) => a + e.tokens, 0),
        token_budget: o.maxNumBatchedTokens, num_used_blocks: used, num_cached_blocks: cached,
        kv_cache_usage: used / o.numBlocks,
        finished: finished.map((r) => ({ id: r.id, finish_reason: r.finishReason })),
      });
      this.step += 1;
    }
    for (const r of finished) this.emit('request', this.requestInfo(r));
    this.maybeKv(false);
    if (this.waiting.length || this.running.length) this.kick();
  }

  finish(r, reason, finished) {
    r.finishReason = reason;
    this.running = this.running.filter((x) => x !== r);
    this.waiting = this.waiting.filter((x) => x !== r);
    this.release(r);
    finished.push(r);
    this.finishedLog.push({ time: now(), ttft: r.firstToken !== null ? r.firstToken - r.arrival : null,
      itls: r.itl.slice() });
    r.onFinish?.(reason);
  }

  kvSnapshot() {
    const tables = {};
    for (const r of this.running) tables[String(r.id)] = r.blocks.slice();
    return {
      step: Math.max(0, this.step - 1), num_total_blocks: this.o.numBlocks,
      ref_counts: this.refs.slice(), cached: this.free.filter((b) => this.hashOf.has(b)),
      block_tables: tables,
    };
  }

  /** kv events at most 4 per second, and only after a change (or when forced). */
  maybeKv(force) {
    const t = Date.now();
    if (!force && (!this.kvDirty || t - this.lastKvSent < 250)) {
      if (this.kvDirty && !this.kvTimer) {
        this.kvTimer = setTimeout(() => {
          this.kvTimer = null;
          this.maybeKv(false);
        }, 260);
      }
      return;
    }
    this.kvDirty = false;
    this.lastKvSent = t;
    this.emit('kv', this.kvSnapshot());
  }

  metrics() {
    const t = now();
    const recent = this.finishedLog.filter((f) => f.time >= t - 60);
    this.finishedLog = recent;
    this.outputTimes = this.outputTimes.filter((x) => x >= t - 10);
    const pct = (vals) => {
      if (!vals.length) return { p50: null, p90: null, p99: null };
      const s = vals.slice().sort((a, b) => a - b);
      const q = (p) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))];
      return { p50: q(0.5), p90: q(0.9), p99: q(0.99) };
    };
    return {
      time: t, num_running: this.running.length, num_waiting: this.waiting.length,
      kv_cache_usage: this.refs.filter((x) => x > 0).length / this.o.numBlocks,
      output_tokens_per_s: this.outputTimes.filter((x) => x >= t - 1).length,
      ttft_s: pct(recent.map((f) => f.ttft).filter((x) => x !== null)),
      itl_s: pct(recent.flatMap((f) => f.itls)),
    };
  }
}

const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8' };

function sendJson(res, status, body, headers = {}) {
  res.writeHead(status, { 'Content-Type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    let s = '';
    req.setEncoding('utf8');
    req.on('data', (c) => { s += c; });
    req.on('end', () => resolve(s));
    req.on('error', reject);
  });
}

export function startMockServer(options = {}) {
  const o = { ...parseArgs([]), ...options };
  const engine = new Engine(o);
  const model = 'mock-stories';
  let requestSeq = 0;
  const sseClients = new Set();

  const authorized = (req, url, allowQuery) => {
    if (!o.apiKey) return true;
    const h = req.headers.authorization || '';
    if (h === `Bearer ${o.apiKey}`) return true;
    return allowQuery && url.searchParams.get('api_key') === o.apiKey;
  };
  const unauthorized = (res) => sendJson(res, 401, { error: {
    message: "missing or invalid API key; send 'Authorization: Bearer <key>'",
    type: 'AuthenticationError', param: null, code: null } });

  function serveEvents(req, res) {
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache',
      Connection: 'keep-alive' });
    const send = (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify(data)}\n\n`);
    send('hello', { model, replica_id: null, num_total_blocks: o.numBlocks,
      block_size: o.blockSize, max_num_batched_tokens: o.maxNumBatchedTokens,
      max_num_seqs: o.maxNumSeqs, show_prompts: o.showPrompts, server_time: now() });
    send('kv', engine.kvSnapshot());
    send('metrics', engine.metrics());
    engine.listeners.add(send);
    sseClients.add(res);
    req.on('close', () => {
      engine.listeners.delete(send);
      sseClients.delete(res);
    });
  }

  async function serveCompletion(req, res, chat) {
    let body;
    try {
      body = JSON.parse(await readBody(req));
    } catch {
      return sendJson(res, 400, { error: { message: 'invalid JSON', type: 'BadRequestError' } });
    }
    const prompt = chat
      ? (body.messages || []).map((m) => `${m.role}: ${m.content}\n`).join('') + 'assistant:'
      : String(body.prompt ?? '');
    if (!prompt) return sendJson(res, 400, { error: { message: 'empty prompt', type: 'BadRequestError' } });
    const maxTokens = Math.max(1, Math.min(Number(body.max_tokens ?? 16), 256));
    const apiId = `${chat ? 'chatcmpl' : 'cmpl'}-${(++requestSeq).toString(16).padStart(8, '0')}`;
    const created = Math.floor(Date.now() / 1000);
    const object = chat ? 'chat.completion.chunk' : 'text_completion';
    const stream = Boolean(body.stream);
    let text = '';
    if (stream) {
      res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
      if (chat) {
        res.write(`data: ${JSON.stringify({ id: apiId, object, created, model, choices: [
          { index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] })}\n\n`);
      }
    }
    const chunk = (t, finish) => (chat
      ? { id: apiId, object, created, model, choices: [{ index: 0, delta: finish ? {} : { content: t },
        finish_reason: finish }] }
      : { id: apiId, object, created, model, choices: [{ index: 0, text: t, logprobs: null,
        finish_reason: finish }] });
    const r = engine.submit({
      prompt, maxTokens, apiId,
      onToken: (t) => {
        text += t;
        if (stream) res.write(`data: ${JSON.stringify(chunk(t, null))}\n\n`);
      },
      onFinish: (reason) => {
        const usage = { prompt_tokens: tokenize(prompt).length, completion_tokens: maxTokens,
          total_tokens: tokenize(prompt).length + maxTokens };
        if (stream) {
          res.write(`data: ${JSON.stringify(chunk('', reason))}\n\n`);
          res.end('data: [DONE]\n\n');
          return;
        }
        sendJson(res, 200, chat
          ? { id: apiId, object: 'chat.completion', created, model, usage, choices: [
            { index: 0, message: { role: 'assistant', content: text }, finish_reason: reason }] }
          : { id: apiId, object: 'text_completion', created, model, usage, choices: [
            { index: 0, text, logprobs: null, finish_reason: reason }] });
      },
    });
    res.on('close', () => { if (!r.finishReason) engine.abort(r); });
  }

  function serveUi(res, name) {
    if (!/^[A-Za-z0-9_.-]+\.(html|js|css)$/.test(name)) return sendJson(res, 404, { error: { message: 'not found' } });
    const file = path.join(o.uiDir, name);
    fs.readFile(file, (err, data) => {
      if (err) return sendJson(res, 404, { error: { message: 'not found' } });
      res.writeHead(200, { 'Content-Type': TYPES[path.extname(name)], 'Cache-Control': 'no-cache' });
      res.end(data);
    });
  }

  function proxy(req, res) {
    const up = new URL(req.url, o.upstream);
    const preq = http.request(up, { method: req.method, headers: { ...req.headers, host: up.host } }, (pres) => {
      res.writeHead(pres.statusCode, pres.headers);
      pres.pipe(res);
    });
    preq.on('error', (e) => sendJson(res, 502, { error: { message: `upstream: ${e.message}` } }));
    res.on('close', () => preq.destroy());
    req.pipe(preq);
  }

  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    const p = url.pathname;
    if (o.upstream && !(p === '/ui' || p === '/ui/' || (p.startsWith('/ui/') && p !== '/ui/events'))) {
      return proxy(req, res);
    }
    if (p === '/health') return res.end();
    if (p === '/ui' || p === '/ui/') {
      if (!authorized(req, url, true)) return unauthorized(res);
      return serveUi(res, 'index.html');
    }
    if (p === '/ui/events') {
      if (!authorized(req, url, true)) return unauthorized(res);
      return serveEvents(req, res);
    }
    if (p.startsWith('/ui/')) {
      if (!authorized(req, url, true)) return unauthorized(res);
      return serveUi(res, p.slice(4));
    }
    if (p === '/metrics') {
      const m = engine.metrics();
      res.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4' });
      return res.end(`# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{model_name="${model}"} ${m.kv_cache_usage}\n` +
        `# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="${model}"} ${m.num_running}\n`);
    }
    if (p.startsWith('/v1/')) {
      if (!authorized(req, url, false)) return unauthorized(res);
      if (p === '/v1/models') {
        return sendJson(res, 200, { object: 'list', data: [{ id: model, object: 'model', owned_by: 'llmserve' }] });
      }
      if (req.method === 'POST' && p === '/v1/completions') return serveCompletion(req, res, false);
      if (req.method === 'POST' && p === '/v1/chat/completions') return serveCompletion(req, res, true);
    }
    sendJson(res, 404, { error: { message: `no route ${req.method} ${p}` } });
  });

  const metricsTimer = o.upstream ? null : setInterval(() => engine.emit('metrics', engine.metrics()), 1000);
  let demoTimer = null;
  if (o.demo) {
    const prompts = ['Once upon a time, there was a little girl named Lily. She loved to play outside.',
      'Once upon a time, there was a little girl named Lily. She had a red ball.',
      'Tom and his dog went to the park to play with a big ball and a stick.',
      'The sun was shining and the birds were singing in the tall green trees.'];
    let k = 0;
    demoTimer = setInterval(() => {
      if (engine.waiting.length > 4) return;
      const prompt = prompts[k % prompts.length] + ' '.repeat(k % 3);
      k += 1;
      engine.submit({ prompt, maxTokens: 8 + ((k * 7) % 40), apiId: `cmpl-demo${k}` });
    }, 300);
  }
  const close = () => new Promise((resolve) => {
    if (metricsTimer) clearInterval(metricsTimer);
    if (demoTimer) clearInterval(demoTimer);
    for (const res of sseClients) res.destroy();
    server.closeIdleConnections?.();
    server.closeAllConnections?.();
    server.close(() => resolve());
  });
  return new Promise((resolve) => {
    server.listen(o.port, o.host, () => {
      resolve({ server, engine, port: server.address().port, url: `http://${o.host}:${server.address().port}`, close });
    });
  });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const o = parseArgs(process.argv.slice(2));
  const m = await startMockServer(o);
  console.log(`mock llmserve serving on ${m.url}`);
  const stop = () => m.close().then(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
