// The static summary the Temporal Web UI shows for a task's workflow: kind, model, owner hash and,
// when SUMMARY_PROMPT_CHARS allows, the start of the prompt. It travels as a short bare JSON
// string, which the payload codec leaves readable (src/temporal/codec.ts) only while it fits
// MAX_SUMMARY_BYTES once JSON-encoded; longer would be encrypted and unreadable in the UI, so the
// excerpt is cut to fit. Being plain text in history, the excerpt is off by default: prompts are
// otherwise only in encrypted payloads.
export const MAX_SUMMARY_BYTES = 256;

const encodedBytes = (s: string) => Buffer.byteLength(JSON.stringify(s));

export function taskSummary(kind: string, model: string, owner: string, prompt: string, excerptChars: number): string {
  const head = `${kind} task · ${model} · owner ${owner.slice(0, 12)}`;
  // One line, code points (never half an emoji), and within the byte budget after JSON escaping.
  let chars = excerptChars > 0 ? [...prompt.replace(/\s+/g, ' ').trim()].slice(0, excerptChars) : [];
  const make = (c: string[], cut: boolean) => (c.length ? `${head} · "${c.join('')}${cut ? '…' : ''}"` : head);
  const cut = [...prompt.replace(/\s+/g, ' ').trim()].length > chars.length;
  let summary = make(chars, cut);
  while (encodedBytes(summary) > MAX_SUMMARY_BYTES && chars.length > 0) {
    chars = chars.slice(0, -1);
    summary = make(chars, true);
  }
  // A model id near its 100-character limit leaves no room: the head alone, cut to size.
  while (encodedBytes(summary) > MAX_SUMMARY_BYTES) summary = [...summary].slice(0, -1).join('');
  return summary;
}
