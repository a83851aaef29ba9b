// End-to-end tests of `llmserve serve` through the official `openai` npm client: what a real
// user's code sees (types, streaming iteration, error classes), not our own HTTP helpers.
//
// Environment (run_openai_client_test.sh sets these):
//   LLMSERVE_URL      the server's origin, e.g. http://127.0.0.1:8123 (required)
//   LLMSERVE_API_KEY  the key the server was started with (--api-key); unset: the server
//                     needs none and the authentication test is skipped
//
// Invariants checked are the API's own (docs/api.md, OpenAI's and vLLM's behaviour): usage
// numbers against POST /tokenize, streamed text against the non-streamed greedy text, stop
// strings against where they first occur in the unstopped text, greedy logprobs against
// their top alternatives; no output text is hard-coded.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const URL_ = process.env.LLMSERVE_URL;
if (!URL_) throw new Error('LLMSERVE_URL (the server origin, e.g. http://127.0.0.1:8000) is not set');
const API_KEY = process.env.LLMSERVE_API_KEY || '';

const client = new OpenAI({
  apiKey: API_KEY || 'unused',
  baseURL: `${URL_}/v1`,
  maxRetries: 0, // a failure must show, not be retried away
  timeout: 60_000,
});

const PROMPT = 'Once upon a time, there was a little girl named Lily.';
const MESSAGES = [{ role: 'user', content: 'Tell me a story about a cat and a dog.' }];

let modelPromise;
/** The served model's id, from GET /v1/models. */
function model() {
  modelPromise ??= client.models.list().then((page) => page.data[0].id);
  return modelPromise;
}

/** POST /tokenize (vLLM's endpoint, outside /v1) -> its `count`. */
async function tokenCount(body) {
  const r = await fetch(`${URL_}/tokenize`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  assert.equal(r.status, 200, `/tokenize answered ${r.status}`);
  const j = await r.json();
  assert.equal(j.count, j.tokens.length);
  return j.count;
}

/** Drains a completion/chat stream: every chunk, in order. */
async function collect(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

/**
 * Checks the streaming contract for one choice index: finish_reason null on every chunk but
 * the last one of that index, and exactly one usage chunk (empty choices) at the very end.
 * Returns { finish, usage }.
 */
function checkStreamShape(chunks, index = 0) {
  const mine = chunks.filter((c) => c.choices.length > 0 && c.choices[0].index === index);
  assert.ok(mine.length >= 1, `no chunk for index ${index}`);
  for (const c of mine.slice(0, -1)) assert.equal(c.choices[0].finish_reason, null);
  const finish = mine.at(-1).choices[0].finish_reason;
  assert.ok(['stop', 'length'].includes(finish), `finish_reason ${finish}`);
  const withUsage = chunks.filter((c) => c.usage);
  assert.equal(withUsage.length, 1, 'include_usage must give usage exactly once');
  assert.equal(withUsage[0], chunks.at(-1), 'the usage chunk comes last');
  assert.deepEqual(withUsage[0].choices, []);
  for (const c of chunks.slice(0, -1)) assert.ok(!c.usage, 'usage only on the last chunk');
  return { finish, usage: withUsage[0].usage };
}

function checkUsage(usage, { promptTokens, maxTokens, finish, n = 1 }) {
  assert.equal(usage.prompt_tokens, promptTokens);
  assert.ok(usage.completion_tokens >= n && usage.completion_tokens <= n * maxTokens,
    `completion_tokens ${usage.completion_tokens} outside [${n}, ${n * maxTokens}]`);
  if (finish === 'length' && n === 1) assert.equal(usage.completion_tokens, maxTokens);
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
  // OpenAI's prompt_tokens_details.cached_tokens: whole 16-token KV blocks from the prefix
  // cache, never the last prompt token.
  const cached = usage.prompt_tokens_details.cached_tokens;
  assert.ok(Number.isInteger(cached) && cached % 16 === 0 && cached < usage.prompt_tokens,
    `cached_tokens ${cached}`);
}

/** Usage without prompt_tokens_details (a repeated prompt hits the prefix cache). */
function totals({ prompt_tokens, completion_tokens, total_tokens }) {
  return { prompt_tokens, completion_tokens, total_tokens };
}

test('models.list() returns the one served model', async () => {
  const page = await client.models.list();
  assert.equal(page.data.length, 1);
  const m = page.data[0];
  assert.equal(typeof m.id, 'string');
  assert.ok(m.id.length > 0);
  assert.equal(m.object, 'model');
  assert.equal(m.max_model_len, 512); // run_openai_client_test.sh passes --max-model-len 512
});

test('completions: non-streaming and streaming greedy agree, usage matches /tokenize', async () => {
  const maxTokens = 40;
  const params = { model: await model(), prompt: PROMPT, max_tokens: maxTokens, temperature: 0 };
  const promptTokens = await tokenCount({ prompt: PROMPT });

  const full = await client.completions.create(params);
  assert.equal(full.object, 'text_completion');
  assert.equal(full.choices.length, 1);
  const choice = full.choices[0];
  assert.equal(choice.index, 0);
  assert.equal(typeof choice.text, 'string');
  assert.ok(choice.text.length > 0);
  assert.ok(['stop', 'length'].includes(choice.finish_reason));
  checkUsage(full.usage, { promptTokens, maxTokens, finish: choice.finish_reason });

  const chunks = await collect(await client.completions.create({
    ...params, stream: true, stream_options: { include_usage: true },
  }));
  const { finish, usage } = checkStreamShape(chunks);
  for (const c of chunks) assert.equal(c.object, 'text_completion');
  const text = chunks.filter((c) => c.choices.length).map((c) => c.choices[0].text).join('');
  assert.equal(text, choice.text, 'streamed greedy text differs from the non-streamed one');
  assert.equal(finish, choice.finish_reason);
  assert.deepEqual(totals(usage), totals(full.usage));
  checkUsage(usage, { promptTokens, maxTokens, finish });
  assert.equal(new Set(chunks.map((c) => c.id)).size, 1, 'one id for the whole stream');
});

test('chat.completions: non-streaming and streaming greedy agree, role chunk first', async () => {
  const maxTokens = 32;
  const params = { model: await model(), messages: MESSAGES, max_tokens: maxTokens, temperature: 0 };
  // The chat prompt is the template's rendering, tokenized with no special tokens added.
  const promptTokens = await tokenCount({ messages: MESSAGES });

  const full = await client.chat.completions.create(params);
  assert.equal(full.object, 'chat.completion');
  assert.equal(full.choices.length, 1);
  const choice = full.choices[0];
  assert.equal(choice.message.role, 'assistant');
  assert.equal(typeof choice.message.content, 'string');
  assert.ok(choice.message.content.length > 0);
  assert.ok(['stop', 'length'].includes(choice.finish_reason));
  checkUsage(full.usage, { promptTokens, maxTokens, finish: choice.finish_reason });

  const chunks = await collect(await client.chat.completions.create({
    ...params, stream: true, stream_options: { include_usage: true },
  }));
  for (const c of chunks) assert.equal(c.object, 'chat.completion.chunk');
  assert.equal(chunks[0].choices[0].delta.role, 'assistant', 'the first chunk carries the role');
  const { finish, usage } = checkStreamShape(chunks);
  const content = chunks.filter((c) => c.choices.length)
    .map((c) => c.choices[0].delta.content ?? '').join('');
  assert.equal(content, choice.message.content);
  assert.equal(finish, choice.finish_reason);
  assert.deepEqual(totals(usage), totals(full.usage));
  // The same conversation again: all its whole blocks but the last token's come from the
  // cache, and the reply is the same (a cache hit changes no bit).
  checkUsage(usage, { promptTokens, maxTokens, finish });
  assert.equal(usage.prompt_tokens_details.cached_tokens, Math.floor((promptTokens - 1) / 16) * 16);
});

test('n: 2 with a seed gives two indexed choices, reproducibly', async () => {
  const maxTokens = 12;
  const params = {
    model: await model(), prompt: PROMPT, max_tokens: maxTokens, temperature: 1, n: 2, seed: 1234,
    ignore_eos: true, // llmserve/vLLM extension, passed through by the client
  };
  const a = await client.completions.create(params);
  assert.deepEqual(a.choices.map((c) => c.index).sort(), [0, 1]);
  for (const c of a.choices) assert.equal(c.finish_reason, 'length');
  // The prompt counted once, completion tokens summed over the samples (vLLM).
  assert.equal(a.usage.prompt_tokens, await tokenCount({ prompt: PROMPT }));
  assert.equal(a.usage.completion_tokens, 2 * maxTokens);
  const b = await client.completions.create(params);
  const texts = (r) => [...r.choices].sort((x, y) => x.index - y.index).map((c) => c.text);
  assert.deepEqual(texts(b), texts(a), 'same seed, same request: same samples');

  // Streaming: both indexes arrive, each with its own final chunk.
  const chunks = await collect(await client.completions.create({
    ...params, stream: true, stream_options: { include_usage: true },
  }));
  for (const index of [0, 1]) {
    const mine = chunks.filter((c) => c.choices.length && c.choices[0].index === index);
    assert.equal(mine.filter((c) => c.choices[0].finish_reason !== null).length, 1);
    assert.equal(mine.at(-1).choices[0].finish_reason, 'length');
    assert.equal(mine.map((c) => c.choices[0].text).join(''), texts(a)[index]);
  }
  assert.equal(chunks.at(-1).usage.completion_tokens, 2 * maxTokens);

  // Chat with n: 2 streams a role chunk for each index before any content.
  const chat = await collect(await client.chat.completions.create({
    model: await model(), messages: MESSAGES, max_tokens: 6, temperature: 1, n: 2, seed: 7,
    stream: true,
  }));
  const firstContent = chat.findIndex((c) => c.choices.length && c.choices[0].delta.content);
  const roles = chat.slice(0, firstContent === -1 ? chat.length : firstContent)
    .filter((c) => c.choices.length && c.choices[0].delta.role === 'assistant')
    .map((c) => c.choices[0].index).sort();
  assert.deepEqual(roles, [0, 1]);
});

test('stop: output ends where the stop string first occurs in the unstopped text', async () => {
  const base = { model: await model(), prompt: PROMPT, max_tokens: 48, temperature: 0, ignore_eos: true };
  const unstopped = (await client.completions.create(base)).choices[0].text;
  assert.ok(unstopped.length >= 12, `need some text to pick a stop string from: ${JSON.stringify(unstopped)}`);
  // A stop string taken from the middle of the text; it may also occur earlier.
  const mid = Math.floor(unstopped.length / 2);
  const stop = unstopped.slice(mid, mid + 4);
  const first = unstopped.indexOf(stop);
  const expected = unstopped.slice(0, first);

  const r = await client.completions.create({ ...base, stop: [stop] });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(r.choices[0].text, expected);

  const chunks = await collect(await client.completions.create({ ...base, stop, stream: true }));
  const streamed = chunks.map((c) => c.choices[0].text).join('');
  assert.equal(streamed, expected);
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'stop');
});

test('logprobs: completions and chat give one entry per token, greedy picks the top one', async () => {
  const maxTokens = 8;
  const r = await client.completions.create({
    model: await model(), prompt: PROMPT, max_tokens: maxTokens, temperature: 0, logprobs: 3,
    ignore_eos: true,
  });
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, r.usage.completion_tokens);
  assert.equal(lp.token_logprobs.length, lp.tokens.length);
  assert.equal(lp.top_logprobs.length, lp.tokens.length);
  assert.equal(lp.text_offset.length, lp.tokens.length);
  assert.equal(lp.tokens.join(''), r.choices[0].text);
  for (let i = 0; i < lp.tokens.length; ++i) {
    const v = lp.token_logprobs[i];
    assert.ok(Number.isFinite(v) && v <= 0, `token_logprobs[${i}] = ${v}`);
    const alternatives = Object.values(lp.top_logprobs[i]);
    assert.ok(alternatives.length >= 1 && alternatives.length <= 3);
    // Greedy: the chosen token is the most likely one.
    assert.ok(Math.abs(v - Math.max(...alternatives)) < 1e-4, `token ${i}: ${v} vs ${alternatives}`);
    if (i > 0) assert.ok(lp.text_offset[i] >= lp.text_offset[i - 1]);
  }

  const chat = await client.chat.completions.create({
    model: await model(), messages: MESSAGES, max_tokens: maxTokens, temperature: 0,
    logprobs: true, top_logprobs: 2, ignore_eos: true,
  });
  const content = chat.choices[0].logprobs.content;
  assert.equal(content.length, chat.usage.completion_tokens);
  assert.equal(content.map((t) => t.token).join(''), chat.choices[0].message.content);
  for (const t of content) {
    assert.ok(Number.isFinite(t.logprob) && t.logprob <= 0);
    assert.ok(Array.isArray(t.bytes));
    assert.equal(t.top_logprobs.length, 2);
    assert.ok(Math.abs(t.logprob - t.top_logprobs[0].logprob) < 1e-4);
    assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob);
  }
});

test('bad requests throw the client\'s typed errors', async () => {
  await assert.rejects(
    client.completions.create({ model: await model(), prompt: PROMPT, max_tokens: -1 }),
    (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, `got ${e?.constructor?.name}: ${e?.message}`);
      assert.equal(e.status, 400);
      assert.equal(e.param, 'max_tokens');
      return true;
    });
  await assert.rejects(
    client.chat.completions.create({ model: await model(), messages: [], max_tokens: 4 }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400);
  await assert.rejects(
    client.completions.create({ model: 'no-such-model', prompt: PROMPT, max_tokens: 4 }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
  // A streaming request that is invalid fails before any chunk, with the same class.
  await assert.rejects(
    client.completions.create({ model: await model(), prompt: PROMPT, max_tokens: 100000, stream: true }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400);
});

test('API key: the right key is accepted, a wrong one gets AuthenticationError 401',
  { skip: API_KEY ? false : 'server started without --api-key (LLMSERVE_API_KEY unset)' },
  async () => {
    const wrong = new OpenAI({ apiKey: `${API_KEY}-wrong`, baseURL: `${URL_}/v1`, maxRetries: 0 });
    await assert.rejects(wrong.models.list(), (e) => {
      assert.ok(e instanceof OpenAI.AuthenticationError, `got ${e?.constructor?.name}`);
      assert.equal(e.status, 401);
      return true;
    });
    await assert.rejects(
      wrong.completions.create({ model: await model(), prompt: PROMPT, max_tokens: 4 }),
      (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
    const r = await client.completions.create({ model: await model(), prompt: PROMPT, max_tokens: 4 });
    assert.equal(r.choices.length, 1);
  });
