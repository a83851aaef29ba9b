// Structured outputs and tool calls through the official `openai` npm client, checked by an
// outside validator (ajv, with ajv-formats for the formats the grammar enforces). The server
// runs stories260K with Qwen2.5's chat template (so the tool-call format, hermes, is detected
// from the template); the model knows nothing of JSON or tools, so everything it writes that
// fits comes from the grammar.
//
// Environment: LLMSERVE_URL (required), LLMSERVE_API_KEY, LLMSERVE_MASKBENCH_DIR (the MaskBench
// sample, ../shared/testdata/structured_output/maskbench/data).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import Ajv from 'ajv';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

const URL_ = process.env.LLMSERVE_URL;
if (!URL_) throw new Error('LLMSERVE_URL is not set');
const client = new OpenAI({
  apiKey: process.env.LLMSERVE_API_KEY || 'unused',
  baseURL: `${URL_}/v1`,
  maxRetries: 0,
  timeout: 120_000,
});
const MESSAGES = [{ role: 'user', content: 'Describe Lily and her dog.' }];

let modelPromise;
function model() {
  modelPromise ??= client.models.list().then((page) => page.data[0].id);
  return modelPromise;
}

/** An ajv validator for `schema` (2020-12 when it says so, else draft-07), or null when ajv
 * itself cannot compile it (draft-04 spellings, ...). */
function validator(schema) {
  const is2020 = typeof schema.$schema === 'string' && schema.$schema.includes('2020-12');
  const ajv = is2020 ? new Ajv2020({ strict: false }) : new Ajv({ strict: false });
  addFormats(ajv);
  try {
    return ajv.compile(schema);
  } catch {
    return null;
  }
}

const PERSON = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 12 },
    age: { type: 'integer', minimum: 1, maximum: 99 },
    born: { type: 'string', format: 'date' },
    tags: { type: 'array', items: { enum: ['kind', 'brave', 'shy'] }, maxItems: 2 },
  },
  required: ['name', 'age', 'born'],
  additionalProperties: false,
};

test('json_schema replies validate with ajv whenever finish_reason is stop', async () => {
  const validate = validator(PERSON);
  let stops = 0;
  for (let seed = 0; seed < 6; seed++) {
    const r = await client.chat.completions.create({
      model: await model(),
      messages: MESSAGES,
      max_tokens: 200,
      seed,
      response_format: { type: 'json_schema', json_schema: { name: 'person', schema: PERSON, strict: true } },
    });
    const c = r.choices[0];
    assert.ok(['stop', 'length'].includes(c.finish_reason), c.finish_reason);
    if (c.finish_reason !== 'stop') continue;
    stops++;
    const value = JSON.parse(c.message.content);
    assert.ok(validate(value), `${c.message.content}: ${JSON.stringify(validate.errors)}`);
  }
  assert.ok(stops >= 3, `only ${stops} of 6 replies completed the schema`);
});

test('MaskBench schemas: accepted ones give ajv-valid outputs, refused ones a 400 naming the keyword', async () => {
  const dir = process.env.LLMSERVE_MASKBENCH_DIR;
  assert.ok(dir && fs.existsSync(dir), 'LLMSERVE_MASKBENCH_DIR is not set or missing');
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
  let checked = 0, refused = 0, stopped = 0;
  for (let i = 0; i < files.length; i += 60) {
    const { schema } = JSON.parse(fs.readFileSync(path.join(dir, files[i]), 'utf8'));
    try {
      const r = await client.chat.completions.create({
        model: await model(),
        messages: MESSAGES,
        max_tokens: 200,
        seed: i,
        response_format: { type: 'json_schema', json_schema: { name: 'maskbench', schema } },
      });
      checked++;
      const c = r.choices[0];
      if (c.finish_reason !== 'stop') continue;
      stopped++;
      const validate = validator(schema);
      if (!validate) continue; // ajv cannot compile this draft; the grammar still ran
      assert.ok(validate(JSON.parse(c.message.content)),
        `${files[i]}: ${c.message.content} ${JSON.stringify(validate.errors)}`);
    } catch (e) {
      assert.ok(e instanceof OpenAI.BadRequestError, `${files[i]}: ${e}`);
      assert.equal(e.param, 'response_format');
      assert.match(e.message, /keyword|schema|JSON/, `${files[i]}: ${e.message}`);
      refused++;
    }
  }
  assert.ok(checked >= 15, `only ${checked} schemas compiled (${refused} refused)`);
  assert.ok(stopped >= 3, `only ${stopped} replies completed their schema`);
});

test('json_object, regex and choice', async () => {
  const base = { model: await model(), messages: MESSAGES, max_tokens: 120 };
  for (let seed = 0; seed < 3; seed++) {
    const o = await client.chat.completions.create({ ...base, seed, response_format: { type: 'json_object' } });
    if (o.choices[0].finish_reason === 'stop') {
      const v = JSON.parse(o.choices[0].message.content);
      assert.equal(typeof v, 'object');
      assert.ok(v !== null && !Array.isArray(v));
    }
    const re = '(Lily|Tom) has [1-9] (cats|dogs)\\.';
    const r = await client.chat.completions.create({ ...base, seed, structured_outputs: { regex: re } });
    if (r.choices[0].finish_reason === 'stop')
      assert.match(r.choices[0].message.content, new RegExp(`^(?:${re})$`));
    const c = await client.chat.completions.create({ ...base, seed, structured_outputs: { choice: ['up', 'down'] } });
    assert.equal(c.choices[0].finish_reason, 'stop');
    assert.ok(['up', 'down'].includes(c.choices[0].message.content));
  }
});

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string', maxLength: 16 }, unit: { enum: ['c', 'f'] } },
        required: ['city', 'unit'],
        additionalProperties: false,
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'add',
      parameters: {
        type: 'object',
        properties: { a: { type: 'integer', minimum: 0, maximum: 99 }, b: { type: 'integer', minimum: 0, maximum: 99 } },
        required: ['a', 'b'],
        additionalProperties: false,
      },
    },
  },
];
const validators = Object.fromEntries(TOOLS.map((t) => [t.function.name, validator(t.function.parameters)]));

function checkCalls(message, onlyName) {
  assert.ok(Array.isArray(message.tool_calls) && message.tool_calls.length >= 1, JSON.stringify(message));
  message.tool_calls.forEach((call) => {
    assert.equal(call.type, 'function');
    assert.match(call.id, /^call_[A-Za-z0-9]{24}$/);
    if (onlyName) assert.equal(call.function.name, onlyName);
    const v = validators[call.function.name];
    assert.ok(v, `unknown tool ${call.function.name}`);
    assert.ok(v(JSON.parse(call.function.arguments)), `${call.function.arguments} ${JSON.stringify(v.errors)}`);
  });
}

test('tool_choice required and named: tool_calls that validate; the stream helper rebuilds the same message', async () => {
  let completed = 0;
  for (const tool_choice of ['required', { type: 'function', function: { name: 'add' } }]) {
    for (let seed = 0; seed < 3; seed++) {
      const req = { model: await model(), messages: MESSAGES, tools: TOOLS, tool_choice, max_tokens: 160, seed };
      const whole = await client.chat.completions.create(req);
      const c = whole.choices[0];
      if (c.finish_reason === 'length') continue;
      completed++;
      assert.equal(c.finish_reason, 'tool_calls');
      assert.equal(c.message.content, null);
      checkCalls(c.message, typeof tool_choice === 'object' ? 'add' : undefined);

      const stream = client.chat.completions.stream(req);
      const final = await stream.finalChatCompletion();
      const m = final.choices[0].message;
      assert.equal(final.choices[0].finish_reason, 'tool_calls');
      assert.equal(m.tool_calls.length, c.message.tool_calls.length);
      m.tool_calls.forEach((call, i) => {
        assert.equal(call.function.name, c.message.tool_calls[i].function.name);
        assert.equal(call.function.arguments, c.message.tool_calls[i].function.arguments);
      });
    }
  }
  assert.ok(completed >= 2, `only ${completed} forced replies completed`);
});

test('parallel_tool_calls false: exactly one call', async () => {
  for (let seed = 0; seed < 3; seed++) {
    const r = await client.chat.completions.create({
      model: await model(), messages: MESSAGES, tools: TOOLS, tool_choice: 'required',
      parallel_tool_calls: false, max_tokens: 160, seed,
    });
    if (r.choices[0].finish_reason === 'tool_calls') assert.equal(r.choices[0].message.tool_calls.length, 1);
  }
});

test('auto (hermes, detected from the template) answers, and tool results go back through the template', async () => {
  const r = await client.chat.completions.create({
    model: await model(), messages: MESSAGES, tools: TOOLS, max_tokens: 30, seed: 1,
  });
  assert.ok(['stop', 'length', 'tool_calls'].includes(r.choices[0].finish_reason));
  // A conversation with a call and its result: the template renders the result (hermes'
  // <tool_response>), and the request is served.
  const call = { id: 'call_abcdefghijklmnopqrstuvwx', type: 'function', function: { name: 'add', arguments: '{"a": 2, "b": 3}' } };
  const messages = [
    { role: 'user', content: 'What is 2 + 3?' },
    { role: 'assistant', content: null, tool_calls: [call] },
    { role: 'tool', tool_call_id: call.id, content: '5' },
  ];
  const next = await client.chat.completions.create({ model: await model(), messages, tools: TOOLS, max_tokens: 8 });
  assert.equal(next.choices[0].message.role, 'assistant');
  const tok = await fetch(`${URL_}/tokenize`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages, tools: TOOLS }),
  });
  assert.equal(tok.status, 200);
  const detok = await fetch(`${URL_}/detokenize`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ tokens: (await tok.json()).tokens }),
  });
  const rendered = (await detok.json()).prompt;
  assert.match(rendered, /<tool_response>\n5\n<\/tool_response>/);
  // The call's arguments reach the template as the object they encode (vLLM's rule).
  assert.match(rendered, /<tool_call>\n\{"name": "add", "arguments": \{"a": 2, "b": 3\}\}\n<\/tool_call>/);
});

test('bad constraints: 400 naming the field, through the client error classes', async () => {
  const base = { model: await model(), messages: MESSAGES, max_tokens: 5 };
  const cases = [
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { not: {} } } } }, 'response_format', /not/],
    [{ structured_outputs: { regex: '(' } }, 'structured_outputs', /regex|\(/],
    [{ tools: TOOLS, tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice', /nope/],
  ];
  for (const [extra, param, words] of cases) {
    await assert.rejects(client.chat.completions.create({ ...base, ...extra }), (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, String(e));
      assert.equal(e.param, param);
      assert.match(e.message, words);
      return true;
    });
  }
});
