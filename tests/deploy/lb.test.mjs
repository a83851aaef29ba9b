// llmserve replicas behind nginx, driven by the official `openai` npm client (run by
// deploy_e2e.sh, which starts the replicas and the two nginx instances: LB_URL least_conn,
// LB_AFFINITY_URL consistent hash on X-Session-Id). The tests run in order: the last ones kill,
// restart and drain replicas.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import net from "node:net";
import fs from "node:fs";
import path from "node:path";
import OpenAI from "openai";

const LB_URL = process.env.LB_URL;
const LB_AFFINITY_URL = process.env.LB_AFFINITY_URL;
const REPLICAS = JSON.parse(process.env.REPLICAS); // [{id, port}]
const PIDS_DIR = process.env.PIDS_DIR;
const LOG_DIR = process.env.LOG_DIR;
const BIN = process.env.LLMSERVE_BIN;
const SERVE_ARGS = JSON.parse(process.env.SERVE_ARGS);
const DEPLOY_DIR = process.env.DEPLOY_DIR;
const NGINX = process.env.NGINX;
const IDS = REPLICAS.map((r) => r.id);
const byId = Object.fromEntries(REPLICAS.map((r) => [r.id, r]));

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/// Rejects after `ms`: no test may hang on a dead connection.
function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no result within ${ms} ms`)), ms);
    }),
  ]);
}

/// The openai client against `baseURL`; no client-side retries, so that every retry seen is
/// nginx's.
function client(baseURL, headers = {}) {
  return new OpenAI({
    baseURL: baseURL + "/v1",
    apiKey: "unused",
    maxRetries: 0,
    timeout: 60_000,
    defaultHeaders: headers,
  });
}

const lb = client(LB_URL);
let MODEL = "";

function pidOf(id) {
  return Number(fs.readFileSync(path.join(PIDS_DIR, id), "utf8").trim());
}
function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/// Prometheus text of one replica, parsed into {series: value}.
async function metrics(id) {
  const text = await (await fetch(`http://127.0.0.1:${byId[id].port}/metrics`)).text();
  const out = {};
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const i = line.lastIndexOf(" ");
    out[line.slice(0, i)] = Number(line.slice(i + 1));
  }
  return out;
}
function metric(page, name) {
  // The one series of `name` (labels: model_name only).
  const key = Object.keys(page).find((k) => k === name || k.startsWith(name + "{"));
  return key === undefined ? NaN : page[key];
}
function failureCount(page, reason) {
  const key = Object.keys(page).find(
    (k) => k.startsWith("llmserve:request_failure_total{") && k.includes(`reason="${reason}"`),
  );
  return key === undefined ? NaN : page[key];
}

async function waitHealthy(port, ms = 30_000) {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/health`)).status === 200) return;
    } catch {}
    await sleep(100);
  }
  throw new Error(`replica on port ${port} not healthy within ${ms} ms`);
}

/// Starts replica `id` again on its old port (nginx's config names it); records its pid for
/// the driver's cleanup.
function restartReplica(id) {
  const log = fs.openSync(path.join(LOG_DIR, `${id}.restart.log`), "a");
  const env = { ...process.env };
  delete env.LLMSERVE_API_KEY;
  const child = spawn(
    BIN,
    ["serve", ...SERVE_ARGS, "--host", "127.0.0.1", "--port", String(byId[id].port),
     "--replica-id", id],
    { stdio: ["ignore", log, log], env },
  );
  fs.writeFileSync(path.join(PIDS_DIR, id), String(child.pid));
  child.unref();
  return child;
}

function freePort() {
  return new Promise((resolve) => {
    const srv = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/// Starts a process whose pid the driver's cleanup will kill (recorded under PIDS_DIR).
function spawnTracked(name, cmd, argv) {
  const log = fs.openSync(path.join(LOG_DIR, `${name}.log`), "a");
  const env = { ...process.env };
  delete env.LLMSERVE_API_KEY;
  const child = spawn(cmd, argv, { stdio: ["ignore", log, log], env });
  fs.writeFileSync(path.join(PIDS_DIR, name), String(child.pid));
  child.unref();
  return child;
}

/// One streaming completion; resolves to {replica, finish, text, chunks} or rejects.
async function stream(c, body, onStart) {
  const { data, response } = await c.completions
    .create({ model: MODEL, stream: true, ...body })
    .withResponse();
  const replica = response.headers.get("x-replica-id");
  let finish = null;
  let text = "";
  let chunks = 0;
  for await (const chunk of data) {
    chunks += 1;
    if (chunks === 1 && onStart) onStart(replica, data);
    text += chunk.choices[0]?.text ?? "";
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  return { replica, finish, text, chunks };
}

test("completions, chat and streaming through nginx (openai client)", async () => {
  await waitHealthy(REPLICAS[0].port);
  for (const r of REPLICAS) await waitHealthy(r.port);
  for (let i = 0; i < 100; ++i) {  // nginx up
    try {
      if ((await fetch(LB_URL + "/lb-health")).ok && (await fetch(LB_AFFINITY_URL + "/lb-health")).ok) break;
    } catch {}
    await sleep(100);
  }

  const models = await lb.models.list();
  assert.equal(models.data.length, 1);
  MODEL = models.data[0].id;
  assert.ok(IDS.includes(models.data[0].replica_id), JSON.stringify(models.data[0]));

  const { data: completion, response } = await lb.completions
    .create({ model: MODEL, prompt: "Once upon a time", max_tokens: 16, temperature: 0 })
    .withResponse();
  assert.ok(IDS.includes(response.headers.get("x-replica-id")));
  assert.ok(completion.choices[0].text.length > 0);
  assert.equal(completion.usage.completion_tokens, 16);

  // Greedy answers are the same whichever replica gives them.
  const again = await lb.completions.create({
    model: MODEL, prompt: "Once upon a time", max_tokens: 16, temperature: 0,
  });
  assert.equal(again.choices[0].text, completion.choices[0].text);

  const chat = await lb.chat.completions.create({
    model: MODEL,
    messages: [{ role: "user", content: "Tell me a story about a cat." }],
    max_tokens: 12,
  });
  assert.equal(chat.choices[0].message.role, "assistant");
  assert.ok(chat.choices[0].message.content.length > 0);

  const s = await stream(lb, { prompt: "Lily and Ben", max_tokens: 24, temperature: 0 });
  assert.ok(IDS.includes(s.replica));
  assert.ok(s.chunks >= 2, `only ${s.chunks} chunks: SSE buffered?`);
  assert.ok(["length", "stop"].includes(s.finish));

  const chatStream = await lb.chat.completions.create({
    model: MODEL,
    messages: [{ role: "user", content: "Hello" }],
    max_tokens: 8,
    stream: true,
  });
  let content = "";
  for await (const chunk of chatStream) content += chunk.choices[0]?.delta?.content ?? "";
  assert.ok(content.length > 0);
});

test("100 concurrent streams complete and are spread over the replicas", async () => {
  const counts = Object.fromEntries(IDS.map((id) => [id, 0]));
  const results = await withTimeout(
    Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        stream(lb, { prompt: `Story number ${i}:`, max_tokens: 48, ignore_eos: true, seed: i }),
      ),
    ),
    60_000,
    "100 streams",
  );
  for (const r of results) {
    assert.equal(r.finish, "length");
    counts[r.replica] += 1;
  }
  console.log("streams per replica:", JSON.stringify(counts));
  for (const id of IDS) assert.ok(counts[id] >= 10, `replica ${id} got ${counts[id]}/100`);
});

test("session affinity: one X-Session-Id, one replica, prefix-cache hits there", async () => {
  const system =
    "You are a storyteller. Every story is about a small town by the sea, where a girl named " +
    "Lily lives with her dog Max. They like to walk on the beach, find shells, and talk to " +
    "the old fisherman who tells them about the big whale he saw when he was young. ";
  const before = Object.fromEntries(
    await Promise.all(IDS.map(async (id) => [id, metric(await metrics(id), "vllm:prefix_cache_hits_total")])),
  );
  const sessions = Array.from({ length: 12 }, (_, i) => `session-${i}`);
  const placement = {};
  await withTimeout(
    Promise.all(
      sessions.map(async (sid) => {
        const c = client(LB_AFFINITY_URL, { "X-Session-Id": sid });
        const messages = [{ role: "system", content: system + sid }];
        const seen = new Set();
        for (let turn = 0; turn < 4; ++turn) {
          messages.push({ role: "user", content: `Turn ${turn}: what happens next?` });
          const { data, response } = await c.chat.completions
            .create({ model: MODEL, messages, max_tokens: 16, ignore_eos: true })
            .withResponse();
          seen.add(response.headers.get("x-replica-id"));
          messages.push({ role: "assistant", content: data.choices[0].message.content });
        }
        assert.equal(seen.size, 1, `${sid} reached ${[...seen]}`);
        placement[sid] = [...seen][0];
      }),
    ),
    60_000,
    "affinity sessions",
  );
  const used = new Set(Object.values(placement));
  console.log("session placement:", JSON.stringify(placement));
  assert.ok(used.size >= 2, "12 sessions all hashed to one replica");
  for (const id of used) {
    const after = metric(await metrics(id), "vllm:prefix_cache_hits_total");
    assert.ok(after > before[id], `replica ${id}: prefix cache hits ${before[id]} -> ${after}`);
  }
  // And the same session again later, through a fresh client: still the same replica.
  for (const sid of sessions.slice(0, 4)) {
    const { response } = await client(LB_AFFINITY_URL, { "X-Session-Id": sid })
      .completions.create({ model: MODEL, prompt: "x", max_tokens: 1 })
      .withResponse();
    assert.equal(response.headers.get("x-replica-id"), placement[sid]);
  }
});

test("a client hang-up at nginx frees the replica's KV blocks within a second", async () => {
  let replica = null;
  let sdkStream = null;
  let started;
  const startedP = new Promise((r) => (started = r));
  const run = stream(
    lb,
    { prompt: "Once upon a time", max_tokens: 3500, ignore_eos: true },
    (id, data) => {
      replica = id;
      sdkStream = data;
      started();
    },
  );
  const streamP = (async () => {
    try {
      return await run;
    } catch (e) {
      return { error: e };
    }
  })();
  await withTimeout(startedP, 20_000, "stream start");
  const pageBefore = await metrics(replica);
  assert.ok(metric(pageBefore, "vllm:num_requests_running") >= 1, "stream not running");
  assert.ok(metric(pageBefore, "vllm:kv_cache_usage_perc") > 0);
  const disconnectsBefore = failureCount(pageBefore, "client_disconnect");
  // Hang up mid-stream: the SDK's abort closes the connection to nginx (a closed tab).
  const t0 = Date.now();
  sdkStream.controller.abort();
  let freedAfter = null;
  while (Date.now() - t0 < 3000) {
    const p = await metrics(replica);
    if (metric(p, "vllm:num_requests_running") === 0 && metric(p, "vllm:kv_cache_usage_perc") === 0) {
      freedAfter = Date.now() - t0;
      assert.equal(failureCount(p, "client_disconnect"), disconnectsBefore + 1);
      break;
    }
    await sleep(20);
  }
  console.log(`KV blocks freed ${freedAfter} ms after the hang-up`);
  assert.ok(freedAfter !== null && freedAfter <= 1000, `freed after ${freedAfter} ms`);
  const r = await withTimeout(streamP, 5000, "aborted stream");
  assert.ok(r.error || r.finish !== "length", "the stream ran to its end despite the hang-up");
});

test("a 429 (queue full) from one replica is retried on another by nginx", async () => {
  // A replica that takes 1 running + 1 waiting request and refuses the next with 429, beside
  // r0, behind an nginx of their own rendered from the same template.
  const tinyPort = await freePort();
  const tiny = spawnTracked("tiny", BIN, ["serve", ...SERVE_ARGS, "--host", "127.0.0.1",
    "--port", String(tinyPort), "--replica-id", "tiny", "--max-num-seqs", "1",
    "--max-waiting", "1"]);
  await waitHealthy(tinyPort);
  // Directly, the third concurrent request gets 429 with Retry-After.
  // (Staggered: AsyncEngine's count comes from the last engine step's snapshot, so a burst
  // that arrives within one step can all be admitted to the queue.)
  // Streams, so that each status is known at once; the admitted ones are hung up on after.
  const hangUp = new AbortController();
  const direct = await Promise.all(Array.from({ length: 3 }, async (_, i) => {
    await sleep(150 * i);
    return fetch(`http://127.0.0.1:${tinyPort}/v1/completions`, {
      method: "POST", headers: { "Content-Type": "application/json" }, signal: hangUp.signal,
      body: JSON.stringify({ prompt: "x", max_tokens: 3000, ignore_eos: true, stream: true }),
    });
  }));
  const refused = direct.filter((r) => r.status === 429);
  assert.equal(refused.length, 1, direct.map((r) => r.status).join(","));
  assert.ok(Number(refused[0].headers.get("retry-after")) >= 1);
  hangUp.abort();
  await Promise.all(direct.map((r) => r.text().catch(() => "")));
  await withTimeout((async () => {
    while (!/vllm:num_requests_running\{[^}]*\} 0/.test(
      await (await fetch(`http://127.0.0.1:${tinyPort}/metrics`)).text())) await sleep(20);
  })(), 5000, "tiny idle again");

  const lbPort = await freePort();
  const prefix = path.join(LOG_DIR, "lb_429");
  fs.mkdirSync(prefix, { recursive: true });
  const conf = execFileSync(path.join(DEPLOY_DIR, "nginx", "render.sh"), [
    "--prefix", prefix, "--listen", `127.0.0.1:${lbPort}`, "--workers", "1",
    `127.0.0.1:${tinyPort}`, `127.0.0.1:${byId.r0.port}`]);
  fs.writeFileSync(path.join(prefix, "nginx.conf"), conf);
  spawnTracked("nginx_429", NGINX, ["-p", prefix, "-e", path.join(prefix, "error.log"),
    "-c", path.join(prefix, "nginx.conf"), "-g", "daemon off;"]);
  for (let i = 0; i < 100; ++i) {
    try { if ((await fetch(`http://127.0.0.1:${lbPort}/lb-health`)).ok) break; } catch {}
    await sleep(50);
  }
  const before = failureCount(await metrics("r0"), "queue_full");
  const tinyBefore = await (await fetch(`http://127.0.0.1:${tinyPort}/metrics`)).text();
  // least_conn sends tiny a third request once r0 holds as many: tiny answers 429, nginx
  // passes the request on to r0. Streams, so that acceptance shows at once (a 429 can only
  // come before the headers); every one is hung up on once accepted.
  const hangUps = [];
  const replies = await withTimeout(Promise.all(Array.from({ length: 8 }, async (_, i) => {
    await sleep(60 * i);
    const ac = new AbortController();
    hangUps.push(ac);
    const r = await fetch(`http://127.0.0.1:${lbPort}/v1/completions`, {
      method: "POST", headers: { "Content-Type": "application/json" }, signal: ac.signal,
      body: JSON.stringify({ model: MODEL, prompt: `q${i}`, max_tokens: 2000, ignore_eos: true,
                             stream: true }),
    });
    assert.equal(r.status, 200);
    return r.headers.get("x-replica-id");
  })), 30_000, "requests through the 429 nginx");
  for (const ac of hangUps) ac.abort();
  const idle = async (url) => {
    while (!/vllm:num_requests_running\{[^}]*\} 0/.test(await (await fetch(url)).text()))
      await sleep(20);
  };
  await withTimeout(Promise.all([idle(`http://127.0.0.1:${tinyPort}/metrics`),
                                 idle(`http://127.0.0.1:${byId.r0.port}/metrics`)]),
                    5000, "replicas idle after the hang-ups");
  const tinyAfter = await (await fetch(`http://127.0.0.1:${tinyPort}/metrics`)).text();
  const queueFull = (t) => Number(t.match(/llmserve:request_failure_total\{[^}]*reason="queue_full"[^}]*\} (\S+)/)[1]);
  const retried = fs.readFileSync(path.join(prefix, "access.log"), "utf8")
    .split("\n").filter((l) => l.includes("ustatus=429, 200")).length;
  console.log(`429: replicas ${JSON.stringify(replies)}; tiny refused ` +
              `${queueFull(tinyAfter) - queueFull(tinyBefore)}, nginx retried ${retried}`);
  assert.ok(queueFull(tinyAfter) > queueFull(tinyBefore), "tiny never answered 429");
  assert.ok(retried >= 1, "no 429 was retried by nginx");
  assert.equal(failureCount(await metrics("r0"), "queue_full"), before);
  process.kill(tiny.pid, "SIGKILL");
});

const HAPROXY = process.env.HAPROXY || "/usr/sbin/haproxy";
test("HAProxy (deploy/haproxy/haproxy.cfg): streaming, leastconn, a SIGTERM drain loses nothing",
     { skip: fs.existsSync(HAPROXY) ? false : "haproxy not installed" }, async () => {
  // Its own replica "hp" beside r0; the config's bind and server lines pointed at them.
  const hpPort = await freePort();
  const hp = spawnTracked("hp", BIN, ["serve", ...SERVE_ARGS, "--host", "127.0.0.1",
    "--port", String(hpPort), "--replica-id", "hp"]);
  await waitHealthy(hpPort);
  const haPort = await freePort();
  const cfg = fs.readFileSync(path.join(DEPLOY_DIR, "haproxy", "haproxy.cfg"), "utf8")
    .replace(/bind 127\.0\.0\.1:8080/, `bind 127.0.0.1:${haPort}`)
    .replace(/server r0 127\.0\.0\.1:8001/, `server r0 127.0.0.1:${byId.r0.port}`)
    .replace(/server r1 127\.0\.0\.1:8002/, `server hp 127.0.0.1:${hpPort}`);
  assert.ok(cfg.includes(`127.0.0.1:${hpPort}`) && cfg.includes(`127.0.0.1:${haPort}`));
  const cfgPath = path.join(LOG_DIR, "haproxy.cfg");
  fs.writeFileSync(cfgPath, cfg);
  spawnTracked("haproxy", HAPROXY, ["-db", "-f", cfgPath]);
  const base = `http://127.0.0.1:${haPort}`;
  // Both servers up: rise 2 x inter 2 s from start.
  const ha = client(base);
  const upUntil = Date.now() + 15_000;
  let both = false;
  while (!both && Date.now() < upUntil) {
    try {
      const ids = await Promise.all(Array.from({ length: 4 }, () =>
        ha.completions.create({ model: MODEL, prompt: "hi", max_tokens: 2 }).withResponse()
          .then(({ response }) => response.headers.get("x-replica-id"))));
      both = ids.includes("hp") && ids.includes("r0");
    } catch {}
    if (!both) await sleep(200);
  }
  assert.ok(both, "HAProxy did not spread requests over both servers");
  const s = await stream(ha, { prompt: "Lily", max_tokens: 24, temperature: 0 });
  assert.ok(s.chunks >= 2 && s.finish === "length", JSON.stringify(s));

  // Drain hp with streams on it; requests during the drain all succeed.
  const startedOn = [];
  let allStarted;
  const allStartedP = new Promise((r) => (allStarted = r));
  const N = 8;
  const streams = Array.from({ length: N }, (_, i) =>
    stream(ha, { prompt: `H${i}`, max_tokens: 400, ignore_eos: true }, (id) => {
      startedOn.push(id);
      if (startedOn.length === N) allStarted();
    }));
  await withTimeout(allStartedP, 20_000, "streams started");
  assert.ok(startedOn.includes("hp"), JSON.stringify(startedOn));
  process.kill(hp.pid, "SIGTERM");
  const during = await withTimeout(Promise.all(Array.from({ length: 12 }, async (_, i) => {
    await sleep(50 * i);
    const { response } = await ha.completions
      .create({ model: MODEL, prompt: `d${i}`, max_tokens: 4 }).withResponse();
    return response.headers.get("x-replica-id");
  })), 30_000, "requests during the drain");
  assert.ok(!during.includes("hp"));
  for (const r of await withTimeout(Promise.all(streams), 30_000, "drained streams"))
    assert.equal(r.finish, "length");
  console.log(`HAProxy: ${startedOn.filter((x) => x === "hp").length} streams finished on the ` +
              `draining replica, ${during.length} requests during the drain served by r0`);
});

test("SIGKILL of one replica: not-started requests succeed, in-flight streams fail, it rejoins", async () => {
  const victim = "r1";
  const victimPid = pidOf(victim);
  const startedOn = [];
  let allStarted;
  const allStartedP = new Promise((r) => (allStarted = r));
  const N = 24;
  const streams = Array.from({ length: N }, (_, i) =>
    stream(lb, { prompt: `Tale ${i}`, max_tokens: 600, ignore_eos: true }, (id) => {
      startedOn.push(id);
      if (startedOn.length === N) allStarted();
    }).then(
      (r) => ({ ok: true, ...r }),
      (e) => ({ ok: false, error: String(e) }),
    ),
  );
  await withTimeout(allStartedP, 30_000, "streams started");
  const onVictim = startedOn.filter((id) => id === victim).length;
  assert.ok(onVictim > 0, "no stream on the victim");
  process.kill(victimPid, "SIGKILL");
  const t0 = Date.now();
  // New requests right after the kill: none may be lost (nginx retries refused connections).
  const fresh = await withTimeout(
    Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        lb.completions
          .create({ model: MODEL, prompt: `after ${i}`, max_tokens: 4 }, {})
          .withResponse()
          .then(({ response }) => response.headers.get("x-replica-id")),
      ),
    ),
    30_000,
    "requests after the kill",
  );
  assert.ok(!fresh.includes(victim));
  const results = await withTimeout(Promise.all(streams), 45_000, "streams after the kill");
  const failed = results.filter((r) => !r.ok);
  const completed = results.filter((r) => r.ok && r.finish === "length");
  console.log(
    `SIGKILL: ${onVictim} streams on ${victim}, ${failed.length} failed ` +
      `(${failed[0]?.error ?? "-"}), ${completed.length} completed, all settled after ` +
      `${Date.now() - t0} ms`,
  );
  // The victim's streams fail (cleanly: an error, not a hang, not a truncated "success").
  assert.equal(failed.length, onVictim);
  assert.equal(completed.length, N - onVictim);
  for (const r of results) if (r.ok) assert.notEqual(r.replica, victim);

  // Restart on the same port; nginx tries it again after fail_timeout (2 s) and it rejoins.
  restartReplica(victim);
  await waitHealthy(byId[victim].port);
  const until = Date.now() + 20_000;
  let rejoined = false;
  while (!rejoined && Date.now() < until) {
    const batch = await Promise.all(
      Array.from({ length: 6 }, () =>
        lb.completions
          .create({ model: MODEL, prompt: "back?", max_tokens: 2 })
          .withResponse()
          .then(({ response }) => response.headers.get("x-replica-id")),
      ),
    );
    rejoined = batch.includes(victim);
    if (!rejoined) await sleep(250);
  }
  assert.ok(rejoined, `${victim} did not get traffic again within 20 s of its restart`);
});

test("SIGTERM drain of one replica loses nothing", async () => {
  const victim = "r2";
  const pid = pidOf(victim);
  const startedOn = [];
  let allStarted;
  const allStartedP = new Promise((r) => (allStarted = r));
  const N = 18;
  const streams = Array.from({ length: N }, (_, i) =>
    stream(lb, { prompt: `Drain ${i}`, max_tokens: 400, ignore_eos: true }, (id) => {
      startedOn.push(id);
      if (startedOn.length === N) allStarted();
    }),
  );
  await withTimeout(allStartedP, 30_000, "streams started");
  assert.ok(startedOn.includes(victim), "no stream on the drained replica");
  process.kill(pid, "SIGTERM");
  // Requests sent while it drains: its 503 sends them to the others.
  const during = await withTimeout(
    Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        lb.completions
          .create({ model: MODEL, prompt: `during ${i}`, max_tokens: 4 })
          .withResponse()
          .then(({ response }) => response.headers.get("x-replica-id")),
      ),
    ),
    30_000,
    "requests during the drain",
  );
  assert.ok(!during.includes(victim), "a request reached the draining replica");
  const results = await withTimeout(Promise.all(streams), 45_000, "streams during the drain");
  for (const r of results) assert.equal(r.finish, "length", JSON.stringify(r));
  // It exits by itself once drained.
  const until = Date.now() + 20_000;
  while (alive(pid) && Date.now() < until) await sleep(100);
  assert.ok(!alive(pid), "drained replica did not exit");
  console.log(
    `SIGTERM: ${startedOn.filter((id) => id === victim).length} streams finished on ` +
      `${victim} while it drained, ${during.length} new requests served by the others`,
  );
});
