// Chat playground: text and image attachments in, the answer streamed in as it arrives (SSE through
// Kiln's client). The conversation lives in this page only.
import { useEffect, useRef, useState } from 'preact/hooks';
import { AuthenticationError, userMessage, type ChatMessage, type Kiln } from '../../src/client/index.js';
import { Choices, ErrorBox, Field, describeError, valueOf, type ApiError } from './ui.js';

interface Turn {
  role: 'user' | 'assistant';
  text: string;
  /** Object URLs of the attached images (previews). */
  images: string[];
  message: ChatMessage;
}

export function ChatPanel({ client, onUnauthorized }: { client: Kiln; onUnauthorized: () => void }) {
  const [models, setModels] = useState<string[] | null>(null);
  const [model, setModel] = useState('');
  const [turns, setTurns] = useState<Turn[]>([]);
  const [text, setText] = useState('');
  const [files, setFiles] = useState<File[]>([]);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);
  const fileInput = useRef<HTMLInputElement>(null);

  useEffect(() => {
    client
      .models()
      .then((all) => {
        const ids = all.filter((m) => m.kind === 'chat').map((m) => m.id);
        setModels(ids);
        setModel((m) => m || ids[0] || '');
      })
      .catch((err) => (err instanceof AuthenticationError ? onUnauthorized() : setModels([])));
  }, [client]);

  const send = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const images = await Promise.all(
        files.map(async (f) => ({ mimeType: f.type || 'image/png', bytes: new Uint8Array(await f.arrayBuffer()) })),
      );
      const user: Turn = {
        role: 'user',
        text,
        images: files.map((f) => URL.createObjectURL(f)),
        message: userMessage({ text, images }),
      };
      const history = [...turns, user];
      setTurns([...history, { role: 'assistant', text: '', images: [], message: assistant('') }]);
      setText('');
      setFiles([]);
      if (fileInput.current) fileInput.current.value = '';
      let answer = '';
      for await (const chunk of client.chat.completions.stream({ model, messages: history.map((t) => t.message) })) {
        const delta = chunk.choices?.[0]?.delta?.content;
        if (!delta) continue;
        answer += delta;
        const now = answer;
        setTurns((prev) => [
          ...prev.slice(0, -1),
          { role: 'assistant', text: now, images: [], message: assistant(now) },
        ]);
      }
    } catch (err) {
      if (err instanceof AuthenticationError) return onUnauthorized();
      setTurns((prev) => (prev.at(-1)?.role === 'assistant' && !prev.at(-1)?.text ? prev.slice(0, -2) : prev));
      setError(describeError(err));
    } finally {
      setBusy(false);
    }
  };

  if (models !== null && models.length === 0)
    return (
      <section class="card chat">
        <h2>Chat</h2>
        <p class="empty">This Kiln has no chat model configured.</p>
      </section>
    );
  return (
    <section class="card chat" aria-labelledby="chat-title">
      <h2 id="chat-title">Chat</h2>
      <ol class="chat-log" aria-live="polite">
        {turns.map((t, i) => (
          <li key={i} class={`turn turn-${t.role}`} data-role={t.role}>
            <span class="turn-who">{t.role === 'user' ? 'You' : 'Assistant'}</span>
            <p class="turn-text">{t.text || (busy && t.role === 'assistant' ? '…' : '')}</p>
            {t.images.map((src, j) => (
              <img key={j} src={src} alt={`Attachment ${j + 1}`} class="turn-image" />
            ))}
          </li>
        ))}
      </ol>
      <form onSubmit={send} class="chat-form">
        <Field id="chat-model" label="Model">
          {(c) => <Choices control={c} value={model} values={models ?? []} onChange={setModel} />}
        </Field>
        <Field id="chat-text" label="Message">
          {(c) => <textarea {...c} rows={3} value={text} onInput={(e) => setText(valueOf(e))} />}
        </Field>
        <Field id="chat-files" label="Images (optional)">
          {(c) => (
            <input
              {...c}
              ref={fileInput}
              type="file"
              accept="image/png,image/jpeg,image/webp,image/gif"
              multiple
              onChange={(e) => setFiles([...((e.target as HTMLInputElement).files ?? [])])}
            />
          )}
        </Field>
        <button type="submit" id="chat-send" disabled={busy || !model || !text.trim()}>
          {busy ? 'Answering…' : 'Send'}
        </button>
        <ErrorBox error={error} />
      </form>
    </section>
  );
}

function assistant(text: string): ChatMessage {
  return { role: 'assistant', content: [{ type: 'text', text }] };
}
