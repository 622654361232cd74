// The embedded chat model: no network, a deterministic reply that describes its inputs (messages,
// each image's format and pixel size as read from its bytes, the text). Tokens are words here:
// `max_tokens` cuts the reply after that many words; `seed` picks the wording.
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ChatCall, ChatChunk, ChatCompletion, ChatProvider, Usage } from './types.js';

const OPENINGS = [
  'Here is what I received.',
  'This is what arrived.',
  'Your request, as I see it.',
  'A description of your input.',
  'What you sent me, in short.',
];
const QUOTE_WORDS = 24;

const words = (s: string) => s.split(/\s+/).filter(Boolean);
const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

interface Reply {
  words: string[];
  finish: 'stop' | 'length';
  usage: Usage;
}

export function localReply({ request, images }: Pick<ChatCall, 'request' | 'images'>): Reply {
  const { messages } = request;
  const texts = messages.map((m) => m.content.flatMap((c) => (c.type === 'text' ? [c.text] : [])).join(' '));
  const inputWords = texts.reduce((n, t) => n + words(t).length, 0);
  const roles = (['system', 'user', 'assistant'] as const)
    .map((r) => [r, messages.filter((m) => m.role === r).length] as const)
    .filter(([, n]) => n > 0)
    .map(([r, n]) => `${n} ${r}`);
  const seed = request.seed ?? 0;
  const lines = [
    OPENINGS[((seed % OPENINGS.length) + OPENINGS.length) % OPENINGS.length],
    `You sent ${plural(messages.length, 'message')} (${roles.join(', ')}) ` +
      `with ${plural(images.length, 'image')} and ${plural(inputWords, 'word')} of text.`,
    ...images.map(
      (im, i) =>
        `Image ${i + 1}: ${im.format.toUpperCase()}, ${im.width}×${im.height} pixels, ${plural(im.bytes, 'byte')}.`,
    ),
  ];
  const lastUser = [...messages].reverse().findIndex((m) => m.role === 'user');
  const said = lastUser < 0 ? [] : words(texts[messages.length - 1 - lastUser]);
  lines.push(
    said.length === 0
      ? 'Your last message has no text.'
      : `Your last message begins: "${said.slice(0, QUOTE_WORDS).join(' ')}${said.length > QUOTE_WORDS ? ' …' : ''}"`,
  );
  const all = words(lines.join(' '));
  const max = request.max_tokens ?? Infinity;
  const out = all.slice(0, max);
  const prompt = inputWords + images.length;
  return {
    words: out,
    finish: out.length < all.length ? 'length' : 'stop',
    usage: { prompt_tokens: prompt, completion_tokens: out.length, total_tokens: prompt + out.length },
  };
}

const ids = () => ({ id: `chatcmpl-${randomBytes(12).toString('hex')}`, created: Math.floor(Date.now() / 1000) });

export class LocalChatProvider implements ChatProvider {
  async complete(call: ChatCall): Promise<ChatCompletion> {
    if (call.model.latencyMs) await sleep(call.model.latencyMs, undefined, { signal: call.signal });
    const r = localReply(call);
    return {
      ...ids(),
      object: 'chat.completion',
      model: call.model.id,
      choices: [{ index: 0, message: { role: 'assistant', content: r.words.join(' ') }, finish_reason: r.finish }],
      usage: r.usage,
    };
  }

  async stream(call: ChatCall): Promise<AsyncIterable<ChatChunk>> {
    if (call.model.latencyMs) await sleep(call.model.latencyMs, undefined, { signal: call.signal });
    const r = localReply(call);
    const base = { ...ids(), object: 'chat.completion.chunk' as const, model: call.model.id };
    const chunk = (delta: ChatChunk['choices'][number]['delta'], finish: string | null = null): ChatChunk => ({
      ...base,
      choices: [{ index: 0, delta, finish_reason: finish }],
    });
    const usage = call.request.stream_options?.include_usage === true;
    return (async function* () {
      yield chunk({ role: 'assistant', content: '' });
      for (const [i, w] of r.words.entries()) yield chunk({ content: i === 0 ? w : ` ${w}` });
      yield chunk({}, r.finish);
      if (usage) yield { ...base, choices: [], usage: r.usage };
    })();
  }
}
