// The playground: one streamed completion or chat request to the OpenAI API, with the API key
// when one is set. Its reply's `id` (cmpl-… / chatcmpl-…) is the api_id that the `request`
// event carries, which is how the page finds the request in the timeline.
import { SseParser, chunkText } from './state.js';

/**
 * Sends the request and streams the reply: onId(id) once the first chunk names it,
 * onText(piece) per chunk. Resolves to {id, text, finishReason}; rejects with an Error whose
 * message carries the HTTP status and the API's error message.
 */
export async function sendPlayground({ endpoint, prompt, maxTokens, temperature, model, apiKey,
  signal, onId = () => {}, onText = () => {} }) {
  const path = endpoint === 'chat' ? '/v1/chat/completions' : '/v1/completions';
  const body = { stream: true, max_tokens: maxTokens, temperature };
  if (model) body.model = model;
  if (endpoint === 'chat') body.messages = [{ role: 'user', content: prompt }];
  else body.prompt = prompt;
  const headers = { 'Content-Type': 'application/json' };
  if (apiKey) headers.Authorization = `Bearer ${apiKey}`;
  const r = await fetch(path, { method: 'POST', headers, body: JSON.stringify(body), signal });
  if (!r.ok) {
    let msg = r.statusText;
    try {
      msg = (await r.json()).error?.message || msg;
    } catch { /* not JSON */ }
    throw new Error(`HTTP ${r.status}: ${msg}`);
  }
  const reader = r.body.getReader();
  const decoder = new TextDecoder();
  const parser = new SseParser();
  let id = null;
  let text = '';
  let finishReason = null;
  for (;;) {
    const { value, done } = await reader.read();
    const events = parser.push(done ? decoder.decode() + '\n\n' : decoder.decode(value, { stream: true }));
    for (const ev of events) {
      if (ev.data === '[DONE]') return { id, text, finishReason };
      let chunk;
      try {
        chunk = JSON.parse(ev.data);
      } catch {
        continue;
      }
      if (chunk.error) throw new Error(chunk.error.message || 'error in stream');
      if (chunk.id && id === null) {
        id = chunk.id;
        onId(id);
      }
      const piece = chunkText(chunk);
      if (piece) {
        text += piece;
        onText(piece);
      }
      const fr = chunk.choices?.[0]?.finish_reason;
      if (fr) finishReason = fr;
    }
    if (done) return { id, text, finishReason };
  }
}
