// The image form: model, prompt with the 4,000-character counter, aspect ratio, the image sizes the
// model allows (GET /v1/models), up to 8 reference URLs checked as the API checks them.
import { useEffect, useState } from 'preact/hooks';
import type { Kiln, ModelInfo } from '../../src/client/index.js';
import { checkHttpUrl } from '../../src/shared/http-url.js';
import { LIMITS, chars } from '../../src/shared/limits.js';
import type { Row } from './rows.js';
import { Choices, Field, FieldMessage, filledIn, useSubmit, valueOf } from './ui.js';
import type { ApiError, FieldError as FieldErrorOf } from './ui.js';

const ASPECTS = ['1:1', '16:9', '9:16', '4:3', '3:4', '3:2', '2:3', '21:9'];
const DEFAULT_SIZES = ['1K', '2K', '4K'];

type Target = 'prompt' | 'model' | 'aspect' | 'size' | 'refs' | 'form';
type FieldError = FieldErrorOf<Target>;

/** The field an API refusal belongs to, read from its code and message. */
function fieldOf(e: ApiError): FieldError {
  const ref = /reference image (\d+)/.exec(e.message);
  if (e.code === 'prompt_too_long' || /prompt/i.test(e.message)) return { field: 'prompt', ...e };
  if (e.code.startsWith('invalid_reference_image') || e.code === 'too_many_reference_images')
    return { field: 'refs', ...(ref ? { index: Number(ref[1]) - 1 } : {}), ...e };
  if (e.code === 'model_not_found') return { field: 'model', ...e };
  if (/aspectRatio/.test(e.message)) return { field: 'aspect', ...e };
  if (/imageSize/.test(e.message)) return { field: 'size', ...e };
  return { field: 'form', ...e };
}

/** The API's own check of a reference URL (src/shared/http-url.ts), run before submitting. */
function checkReference(url: string, i: number): FieldError | null {
  try {
    checkHttpUrl(url.trim(), 'inlineData.data', `reference image ${i + 1}`);
    return null;
  } catch (err) {
    const e = err as ApiError;
    return { field: 'refs', index: i, code: e.code, message: e.message };
  }
}

export function ImageForm(props: {
  client: Kiln;
  models: ModelInfo[];
  onSubmitted: (row: Row) => void;
  onUnauthorized: () => void;
}) {
  const models = props.models.filter((m) => (m.kind ?? 'image') === 'image');
  const [model, setModel] = useState('');
  const [prompt, setPrompt] = useState('');
  const [aspect, setAspect] = useState('');
  const [size, setSize] = useState('');
  const [refs, setRefs] = useState<string[]>([]);
  const { busy, apiError, clear, errorFor, change, submit } = useSubmit(fieldOf, props.onUnauthorized);
  useEffect(() => setModel((m) => m || models[0]?.id || ''), [props.models]);
  const sizes = models.find((m) => m.id === model)?.image_sizes ?? DEFAULT_SIZES;
  // A size chosen for another model is dropped when this one does not take it.
  const sizeValue = sizes.includes(size) ? size : '';

  const count = chars(prompt);
  const over = count > LIMITS.promptChars;
  // Checked as the API checks them, so most refusals show before a request is made.
  const refErrors = refs.map((r, i) => checkReference(r, i));
  const invalid = over || refErrors.some(Boolean) || refs.length > LIMITS.referenceImages;

  const create = submit(async () => {
    const task = await props.client.tasks.create({
      model,
      prompt,
      ...filledIn({
        aspectRatio: aspect,
        imageSize: sizeValue,
        references: refs.length ? refs.map((r) => r.trim()) : undefined,
      }),
    });
    props.onSubmitted({
      id: task.id,
      kind: 'image',
      model: task.model,
      status: task.status,
      created_at: task.created_at ?? Math.floor(Date.now() / 1000),
      prompt,
      media: [],
      loaded: false,
    });
    setPrompt('');
  });

  return (
    <form class="card create" onSubmit={create} aria-labelledby="create-title" noValidate>
      <h2 id="create-title">New image</h2>
      <Field
        id="prompt"
        label="Prompt"
        error={errorFor('prompt')}
        invalid={over}
        noteClass={over ? 'counter over' : 'counter'}
        note={
          <>
            {count.toLocaleString('en')} / {LIMITS.promptChars.toLocaleString('en')}
            {over && ' — too long'}
          </>
        }
      >
        {(c) => (
          <textarea
            {...c}
            rows={4}
            value={prompt}
            onInput={(e) => change(setPrompt)(valueOf(e))}
            placeholder="A lighthouse at dusk, oil painting"
          />
        )}
      </Field>
      <div class="row">
        <Field id="model" label="Model" error={errorFor('model')}>
          {(c) => <Choices control={c} value={model} values={models.map((m) => m.id)} onChange={change(setModel)} />}
        </Field>
        <Field id="aspect" label="Aspect ratio" error={errorFor('aspect')}>
          {(c) => <Choices control={c} value={aspect} values={ASPECTS} auto="Auto" onChange={change(setAspect)} />}
        </Field>
        <Field id="size" label="Image size" error={errorFor('size')}>
          {(c) => <Choices control={c} value={sizeValue} values={sizes} auto="Auto" onChange={change(setSize)} />}
        </Field>
      </div>
      <fieldset class="field refs">
        <legend>
          Reference images ({refs.length} / {LIMITS.referenceImages})
        </legend>
        {refs.map((r, i) => {
          const err = errorFor('refs', i) ?? (r.trim() ? refErrors[i] : null);
          return (
            <div class="ref-row" key={i}>
              <label class="visually-hidden" for={`ref-${i}`}>
                Reference image {i + 1} URL
              </label>
              <input
                id={`ref-${i}`}
                class="ref"
                type="url"
                value={r}
                placeholder="https://example.com/style.png"
                aria-invalid={!!err}
                aria-describedby={err ? `ref-${i}-error` : undefined}
                onInput={(e) => {
                  const v = valueOf(e);
                  setRefs((prev) => prev.map((x, j) => (j === i ? v : x)));
                  clear();
                }}
              />
              <button
                type="button"
                class="secondary small"
                aria-label={`Remove reference image ${i + 1}`}
                onClick={() => setRefs((prev) => prev.filter((_, j) => j !== i))}
              >
                Remove
              </button>
              <FieldMessage id={`ref-${i}-error`} error={err} />
            </div>
          );
        })}
        <FieldMessage
          id="refs-error"
          error={apiError?.field === 'refs' && apiError.index === undefined ? apiError : null}
        />
        {refs.length < LIMITS.referenceImages && (
          <button type="button" class="secondary small" id="add-reference" onClick={() => setRefs((p) => [...p, ''])}>
            Add reference image URL
          </button>
        )}
      </fieldset>
      <button type="submit" id="create-submit" disabled={busy || !model || !prompt.trim() || invalid}>
        {busy ? 'Submitting…' : 'Generate'}
      </button>
      <FieldMessage id="form-error" error={errorFor('form')} />
    </form>
  );
}
