// Multi-turn TTFT through a load balancer, with or without session affinity (issue 19;
// driven by replicas_bench.sh). C conversations run at once, each of T turns; every turn
// resends the whole history (previous turns and replies) plus U new words as one
// /v1/completions prompt, streams O tokens and records the time to the first content chunk.
// With --session, each conversation sends its own X-Session-Id (nginx's affinity config
// hashes it). Prints one JSON object: TTFT per turn (mean over conversations), mean TTFT of
// the turns after the first, and the prefix-cache hit rate over the run summed over the
// replicas' /metrics (each given as --replica URL).
//   node replicas_multiturn.mjs --url http://127.0.0.1:8080 [--session] [--conversations 8]
//        [--turns 5] [--words 150] [--output 32] [--think-ms 400] --replica http://127.0.0.1:8001 ...
const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i < 0 ? dflt : args[i + 1];
};
const URL_ = opt("url");
const SESSION = args.includes("--session");
const C = Number(opt("conversations", 8));
const T = Number(opt("turns", 5));
const U = Number(opt("words", 150));
const O = Number(opt("output", 32));
// A user's think time between a reply and the next turn, uniform in [0, THINK] ms: without it
// the conversations move in lockstep and least_conn's tie-breaking can pin each one to a
// replica by accident.
const THINK = Number(opt("think-ms", 400));
const replicas = args.flatMap((a, i) => (a === "--replica" ? [args[i + 1]] : []));

// A deterministic word stream (xorshift), so that both runs send the same text.
let state = 0x9e3779b9;
const rand = () => {
  state ^= state << 13; state >>>= 0;
  state ^= state >>> 17;
  state ^= state << 5; state >>>= 0;
  return state / 2 ** 32;
};
const WORDS = ("the a little girl boy dog cat sun tree house went saw happy sad big small ran " +
  "played found said looked wanted friend mom dad park ball red blue day night").split(" ");
const words = (n) => Array.from({ length: n }, () => WORDS[Math.floor(rand() * WORDS.length)]).join(" ");

async function metricsSum() {
  let queries = 0, hits = 0;
  for (const r of replicas) {
    const text = await (await fetch(r + "/metrics")).text();
    for (const line of text.split("\n")) {
      if (line.startsWith("vllm:prefix_cache_queries_total{")) queries += Number(line.split(" ").at(-1));
      if (line.startsWith("vllm:prefix_cache_hits_total{")) hits += Number(line.split(" ").at(-1));
    }
  }
  return { queries, hits };
}

async function turn(prompt, sid) {
  const headers = { "Content-Type": "application/json" };
  if (sid) headers["X-Session-Id"] = sid;
  const t0 = performance.now();
  const res = await fetch(URL_ + "/v1/completions", {
    method: "POST",
    headers,
    body: JSON.stringify({ prompt, max_tokens: O, ignore_eos: true, temperature: 0, stream: true }),
  });
  if (res.status !== 200) throw new Error(`status ${res.status}: ${await res.text()}`);
  let ttft = null, text = "", buf = "";
  const decoder = new TextDecoder();
  for await (const part of res.body) {
    buf += decoder.decode(part, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const ev = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (!ev.startsWith("data: ") || ev === "data: [DONE]") continue;
      const j = JSON.parse(ev.slice(6));
      const t = j.choices?.[0]?.text ?? "";
      if (t && ttft === null) ttft = performance.now() - t0;
      text += t;
    }
  }
  return { ttft, text, replica: res.headers.get("x-replica-id") };
}

const perTurn = Array.from({ length: T }, () => []);
const placements = [];
const before = await metricsSum();
const t0 = performance.now();
const prompts = Array.from({ length: C }, () => Array.from({ length: T }, () => words(U)));
const think = Array.from({ length: C }, () => Array.from({ length: T }, () => rand() * THINK));
const turnsOn = {};
await Promise.all(
  Array.from({ length: C }, async (_, c) => {
    let history = "";
    const seen = new Set();
    for (let t = 0; t < T; ++t) {
      if (t > 0) await new Promise((r) => setTimeout(r, think[c][t]));
      history += (history ? "\n" : "") + prompts[c][t];
      const r = await turn(history, SESSION ? `conv-${c}` : null);
      perTurn[t].push(r.ttft);
      seen.add(r.replica);
      turnsOn[r.replica] = (turnsOn[r.replica] ?? 0) + 1;
      history += r.text;
    }
    placements.push(seen.size);
  }),
);
const after = await metricsSum();
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
const later = perTurn.slice(1).flat();
console.log(JSON.stringify({
  session_affinity: SESSION,
  conversations: C, turns: T, words_per_turn: U, output_tokens: O,
  duration_s: (performance.now() - t0) / 1000,
  ttft_ms_per_turn: perTurn.map((xs) => Math.round(mean(xs))),
  ttft_ms_mean_after_first_turn: Math.round(mean(later)),
  replicas_per_conversation_mean: mean(placements),
  turns_per_replica: turnsOn,
  prefix_cache_hit_rate: (after.hits - before.hits) / Math.max(1, after.queries - before.queries),
}));
