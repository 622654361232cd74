// The video forms: a video model's prompt, seconds and size (only the values GET /v1/models says the
// model takes: the pro model offers 10/15/25 s and its two sizes), an optional image URL; the
// workflow-node form adds `nodeInfoList` rows (nodeId, fieldName, fieldValue).
import { useEffect, useState } from 'preact/hooks';
import type { Kiln, ModelInfo, NodeInfo } from '../../src/client/index.js';
import { checkHttpUrl } from '../../src/shared/http-url.js';
import { LIMITS, chars } from '../../src/shared/limits.js';
import { fromVideo, type Row } from './rows.js';
import { Choices, Field, FieldMessage, filledIn, useSubmit, valueOf } from './ui.js';
import type { ApiError, FieldError as FieldErrorOf } from './ui.js';

type Target = 'prompt' | 'model' | 'seconds' | 'size' | 'image' | 'nodes' | 'form';
type FieldError = FieldErrorOf<Target>;

/** The field an API refusal belongs to, read from its code and message. */
function fieldOf(e: ApiError): FieldError {
  const node = /nodeInfoList\.(\d+)/.exec(e.message);
  if (node || /nodeInfoList/.test(e.message))
    return { field: 'nodes', ...(node ? { index: Number(node[1]) } : {}), ...e };
  if (e.code === 'prompt_too_long' || /prompt/i.test(e.message)) return { field: 'prompt', ...e };
  if (e.code === 'model_not_found') return { field: 'model', ...e };
  if (/^seconds|at seconds/.test(e.message)) return { field: 'seconds', ...e };
  if (/^size|at size/.test(e.message)) return { field: 'size', ...e };
  if (/image/.test(e.message) || e.code.startsWith('invalid_reference')) return { field: 'image', ...e };
  return { field: 'form', ...e };
}

function checkImage(url: string): FieldError | null {
  if (!url.trim()) return null;
  try {
    checkHttpUrl(url.trim(), 'image');
    return null;
  } catch (err) {
    return { field: 'image', ...(err as ApiError) };
  }
}

/** A number or boolean typed as such goes as one; anything else is sent as the text it is. */
function typed(v: string): NodeInfo['fieldValue'] {
  if (v === 'true' || v === 'false') return v === 'true';
  return /^-?\d+(\.\d+)?$/.test(v.trim()) && Number.isFinite(Number(v)) ? Number(v) : v;
}

const MAX_NODES = 64;
const EMPTY_NODE = { nodeId: '', fieldName: '', fieldValue: '' };
const NODE_LABELS = { nodeId: 'Node id', fieldName: 'Field name', fieldValue: 'Value' };

export function VideoForm(props: {
  mode: 'video' | 'node';
  client: Kiln;
  models: ModelInfo[];
  onSubmitted: (row: Row) => void;
  onUnauthorized: () => void;
}) {
  const { mode } = props;
  const models = props.models.filter((m) => m.kind === 'video' && (m.form === 'workflow-node') === (mode === 'node'));
  const p = mode === 'node' ? 'node' : 'video';
  const [model, setModel] = useState('');
  const [prompt, setPrompt] = useState('');
  const [seconds, setSeconds] = useState('');
  const [size, setSize] = useState('');
  const [image, setImage] = useState('');
  const [nodes, setNodes] = useState<{ nodeId: string; fieldName: string; fieldValue: string }[]>([]);
  const { busy, clear, errorFor, change, submit } = useSubmit(fieldOf, props.onUnauthorized);
  useEffect(() => setModel((m) => m || models[0]?.id || ''), [props.models]);
  const info = models.find((m) => m.id === model);
  // Only what the model takes; its first value is the API's default.
  const secondsValues = info?.seconds ?? [];
  const sizeValues = info?.sizes ?? [];
  const sec = secondsValues.includes(seconds) ? seconds : (secondsValues[0] ?? '');
  const siz = sizeValues.includes(size) ? size : (sizeValues[0] ?? '');

  const over = chars(prompt) > LIMITS.promptChars;
  const imageError = checkImage(image);
  const incomplete = nodes.some((n) => !n.nodeId.trim() || !n.fieldName.trim());
  const needsPrompt = mode === 'video' && !prompt.trim();
  const setNode = (i: number, key: keyof typeof EMPTY_NODE, v: string) => {
    setNodes((prev) => prev.map((n, j) => (j === i ? { ...n, [key]: v } : n)));
    clear();
  };

  const create = submit(async () => {
    const video = await props.client.videos.create({
      model,
      prompt,
      ...filledIn({
        seconds: sec,
        size: siz,
        image: image.trim(),
        nodeInfoList:
          mode === 'node' && nodes.length ? nodes.map((n) => ({ ...n, fieldValue: typed(n.fieldValue) })) : undefined,
      }),
    });
    props.onSubmitted({ ...fromVideo(video), prompt: prompt || undefined, loaded: false });
    setPrompt('');
  });

  if (models.length === 0)
    return (
      <section class="card create" aria-labelledby={`${p}-title`}>
        <h2 id={`${p}-title`}>{mode === 'node' ? 'New workflow run' : 'New video'}</h2>
        <p class="empty">This Kiln has no {mode === 'node' ? 'workflow-node' : 'video'} model configured.</p>
      </section>
    );
  return (
    <form class="card create" id={`${p}-form`} onSubmit={create} aria-labelledby={`${p}-title`} noValidate>
      <h2 id={`${p}-title`}>{mode === 'node' ? 'New workflow run' : 'New video'}</h2>
      <Field
        id={`${p}-prompt`}
        label={mode === 'node' ? 'Prompt (optional)' : 'Prompt'}
        error={errorFor('prompt')}
        invalid={over}
        noteClass={over ? 'counter over' : 'counter'}
        note={`${chars(prompt).toLocaleString('en')} / ${LIMITS.promptChars.toLocaleString('en')}`}
      >
        {(c) => <textarea {...c} rows={3} value={prompt} onInput={(e) => change(setPrompt)(valueOf(e))} />}
      </Field>
      <div class="row">
        <Field id={`${p}-model`} label="Model" error={errorFor('model')}>
          {(c) => <Choices control={c} value={model} values={models.map((m) => m.id)} onChange={change(setModel)} />}
        </Field>
        <Field id={`${p}-seconds`} label="Seconds" error={errorFor('seconds')}>
          {(c) => <Choices control={c} value={sec} values={secondsValues} onChange={change(setSeconds)} />}
        </Field>
        <Field id={`${p}-size`} label="Size" error={errorFor('size')}>
          {(c) => <Choices control={c} value={siz} values={sizeValues} onChange={change(setSize)} />}
        </Field>
      </div>
      <Field id={`${p}-image`} label="Start image URL (optional)" error={errorFor('image') ?? imageError}>
        {(c) => (
          <input
            {...c}
            type="url"
            value={image}
            placeholder="https://example.com/first-frame.png"
            onInput={(e) => change(setImage)(valueOf(e))}
          />
        )}
      </Field>
      {mode === 'node' && (
        <fieldset class="field nodes">
          <legend>
            Node fields ({nodes.length} / {MAX_NODES})
          </legend>
          {nodes.map((n, i) => (
            <div class="node-row" key={i} data-row={i}>
              {(['nodeId', 'fieldName', 'fieldValue'] as const).map((k) => (
                <Field key={k} id={`node-${i}-${k}`} label={`${NODE_LABELS[k]} ${i + 1}`} class="compact">
                  {(c) => <input {...c} type="text" value={n[k]} onInput={(e) => setNode(i, k, valueOf(e))} />}
                </Field>
              ))}
              <button
                type="button"
                class="secondary small"
                aria-label={`Remove node field row ${i + 1}`}
                onClick={() => setNodes((prev) => prev.filter((_, j) => j !== i))}
              >
                Remove
              </button>
              <FieldMessage id={`node-${i}-error`} error={errorFor('nodes', i)} />
            </div>
          ))}
          <FieldMessage id="nodes-error" error={errorFor('nodes')?.index === undefined ? errorFor('nodes') : null} />
          {nodes.length < MAX_NODES && (
            <button
              type="button"
              class="secondary small"
              id="add-node"
              onClick={() => setNodes((prev) => [...prev, { ...EMPTY_NODE }])}
            >
              Add node field
            </button>
          )}
        </fieldset>
      )}
      <button
        type="submit"
        id={`${p}-submit`}
        disabled={busy || !model || needsPrompt || over || !!imageError || incomplete}
      >
        {busy ? 'Submitting…' : mode === 'node' ? 'Run workflow' : 'Generate video'}
      </button>
      <FieldMessage id={`${p}-form-error`} error={errorFor('form')} />
    </form>
  );
}
