// ComfyUI's API-format workflows (the `prompt` of POST /prompt: node id → {class_type, inputs}) and
// how Kiln's requests set their inputs: the models file's `nodes` mapping (prompt, reference image,
// seconds, size …) and, for workflow-node models, the caller's nodeInfoList within the model's
// `allowedInputs`. What a workflow cannot take is refused at start-up (the models file) or at
// submit (the request), never dropped. Pure module: the API's checks import it too.
import type { ImageRequest } from './image-task.js';
import { promptText, referenceImages } from './prompt.js';
import type { NodeInfo, VideoRequest } from './video-task.js';

export interface ComfyNode {
  class_type: string;
  inputs: Record<string, unknown>;
  [k: string]: unknown;
}
/** An API-format workflow: what ComfyUI's "Export (API)" writes and POST /prompt takes as `prompt`. */
export type ComfyWorkflow = Record<string, ComfyNode>;

/** Where one of Kiln's values goes: `{nodeId, fieldName}`; `scale` multiplies a number (seconds → frames). */
export interface NodeField {
  nodeId: string;
  fieldName: string;
  scale?: number | undefined;
}

/** The models file's `nodes` of a comfyui channel. */
export interface ComfyNodes {
  prompt?: NodeField | undefined;
  image?: NodeField | undefined;
  seconds?: NodeField | undefined;
  size?: NodeField | undefined;
  width?: NodeField | undefined;
  height?: NodeField | undefined;
  seed?: NodeField | undefined;
  count?: NodeField | undefined;
}

/** What the checks read of a comfyui channel. */
export interface ComfyChannel {
  workflow?: ComfyWorkflow | undefined;
  nodes: ComfyNodes;
  allowedInputs?: string[] | undefined;
}

/** One input to set: a node's field and its value. */
export interface InputValue {
  nodeId: string;
  fieldName: string;
  value: unknown;
}

/** Why a file's JSON is not an API-format workflow, or null when it is one. */
export function workflowProblem(json: unknown): string | null {
  if (!json || typeof json !== 'object' || Array.isArray(json)) return 'it is not a JSON object of nodes';
  const o = json as Record<string, unknown>;
  // The editor's own save format (nodes[] and links[]) is not what POST /prompt takes.
  if (Array.isArray(o.nodes) && Array.isArray(o.links))
    return 'it is in the editor format (nodes and links); export it with "Export (API)"';
  const ids = Object.keys(o);
  if (!ids.length) return 'it has no nodes';
  for (const id of ids) {
    const n = o[id] as Partial<ComfyNode> | null;
    if (!n || typeof n !== 'object' || typeof n.class_type !== 'string' || n.class_type === '')
      return `node "${id.slice(0, 40)}" has no class_type`;
    if (!n.inputs || typeof n.inputs !== 'object' || Array.isArray(n.inputs))
      return `node "${id.slice(0, 40)}" (${n.class_type}) has no inputs object`;
  }
  return null;
}

/** An input that takes another node's output: `["4", 0]`. Such an input is part of the graph, not a value. */
export function isLink(v: unknown): boolean {
  return Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && typeof v[1] === 'number';
}

/** Why `at` cannot be set in `workflow`, or null when it is a literal input of a node of it. */
export function fieldProblem(workflow: ComfyWorkflow, nodeId: string, fieldName: string): string | null {
  const node = Object.hasOwn(workflow, nodeId) ? workflow[nodeId] : undefined;
  if (!node) return `node "${nodeId}" is not in the workflow`;
  if (!Object.hasOwn(node.inputs, fieldName))
    return `node "${nodeId}" (${node.class_type}) has no input "${fieldName}"`;
  if (isLink(node.inputs[fieldName]))
    return `input "${fieldName}" of node "${nodeId}" (${node.class_type}) is a link to another node, not a value`;
  return null;
}

/** `"6.text"` → node "6", field "text" (node ids of subgraphs hold ':' but no '.'; the last '.' splits). */
export function splitAllowed(entry: string): { nodeId: string; fieldName: string } | null {
  const i = entry.lastIndexOf('.');
  if (i <= 0 || i === entry.length - 1) return null;
  return { nodeId: entry.slice(0, i), fieldName: entry.slice(i + 1) };
}

/**
 * The models file's problems of one comfyui channel: `nodes` and `allowedInputs` name literal inputs
 * of the workflow, and a video model can send every `seconds` and `size` it accepts.
 */
export function comfyuiChannelIssues(
  c: ComfyChannel,
  model: { kind: 'image' } | { kind: 'video'; seconds: readonly string[]; sizes: readonly string[]; form: string },
): { field: string; message: string }[] {
  const out: { field: string; message: string }[] = [];
  const wf = c.workflow;
  if (!wf) return [{ field: 'workflowFile', message: 'comfyui needs workflowFile (an API-format workflow)' }];
  for (const [name, at] of Object.entries(c.nodes) as [string, NodeField | undefined][]) {
    if (!at) continue;
    const p = fieldProblem(wf, at.nodeId, at.fieldName);
    if (p) out.push({ field: 'nodes', message: `nodes.${name}: ${p}` });
  }
  for (const entry of c.allowedInputs ?? []) {
    const at = splitAllowed(entry);
    const p = at ? fieldProblem(wf, at.nodeId, at.fieldName) : `"${entry}" is not nodeId.fieldName`;
    if (p) out.push({ field: 'allowedInputs', message: p });
  }
  const n = c.nodes;
  if (!n.width !== !n.height)
    out.push({ field: 'nodes', message: 'nodes.width and nodes.height go together (the size is sent as both)' });
  // The prompt is never dropped: a model that takes one says where it goes (the workflow-node form
  // takes a placeholder and nodeInfoList instead).
  if (!n.prompt && (model.kind === 'image' || model.form !== 'workflow-node'))
    out.push({ field: 'nodes', message: `a comfyui ${model.kind} model needs nodes.prompt: the model accepts prompt` });
  if (model.kind === 'video') {
    if (model.form === 'workflow-node' && !c.allowedInputs)
      out.push({
        field: 'allowedInputs',
        message: 'a comfyui model of form workflow-node needs allowedInputs: the inputs nodeInfoList may set',
      });
    if (model.seconds.length > 1 && !n.seconds)
      out.push({
        field: 'nodes',
        message: `the model accepts seconds ${model.seconds.join(', ')}: set nodes.seconds (or one value in seconds)`,
      });
    if (model.sizes.length > 1 && !n.size && !n.width)
      out.push({
        field: 'nodes',
        message: `the model accepts sizes ${model.sizes.join(', ')}: set nodes.size or nodes.width and nodes.height (or one value in sizes)`,
      });
  }
  return out;
}

/** A value for an input whose stored value is `current`: a number stays a number, a switch a switch. */
export function coerceInput(current: unknown, value: unknown): { value: unknown } | { problem: string } {
  if (typeof current === 'number' && typeof value === 'string') {
    const n = Number(value.trim());
    return value.trim() !== '' && Number.isFinite(n) ? { value: n } : { problem: 'takes a number' };
  }
  if (typeof current === 'boolean' && typeof value === 'string') {
    if (value === 'true' || value === 'false') return { value: value === 'true' };
    return { problem: 'takes true or false' };
  }
  if (typeof current === 'string' && typeof value !== 'string') return { value: String(value) };
  if (typeof current === 'number' && typeof value === 'boolean') return { problem: 'takes a number' };
  return { value };
}

/** Why the caller's nodeInfoList entry cannot be sent to this workflow, or null. */
export function nodeInfoProblem(c: ComfyChannel, entry: NodeInfo): string | null {
  const wf = c.workflow;
  if (!wf) return 'the model has no workflow';
  const p = fieldProblem(wf, entry.nodeId, entry.fieldName);
  if (p) return p;
  if (!(c.allowedInputs ?? []).includes(`${entry.nodeId}.${entry.fieldName}`))
    return `input "${entry.fieldName}" of node "${entry.nodeId}" is not in the model's allowedInputs`;
  const v = coerceInput(wf[entry.nodeId]!.inputs[entry.fieldName], entry.fieldValue);
  return 'problem' in v ? `input "${entry.fieldName}" of node "${entry.nodeId}" ${v.problem}` : null;
}

/** A video request's refusal by a comfyui channel: the field, and why. */
export function comfyuiVideoRefusal(r: VideoRequest, c: ComfyChannel): { field: string; message: string } | null {
  if (r.image !== undefined && !c.nodes.image)
    return { field: 'image', message: "the model's workflow takes no reference image (no nodes.image)" };
  for (const [i, entry] of (r.nodeInfoList ?? []).entries()) {
    const p = nodeInfoProblem(c, entry);
    if (p) return { field: `nodeInfoList[${i}]`, message: p };
  }
  return null;
}

/** The `generationConfig` fields a comfyui workflow can take (each through its node). */
const IMAGE_CONFIG_FIELDS = new Set(['responseModalities', 'imageConfig', 'candidateCount', 'seed']);

/** One option of an image request a comfyui channel cannot take. */
export interface ComfyRefusal {
  field: string;
  got: string;
  allowed: readonly string[];
}

/** Why an image request cannot go to this comfyui channel, or null when all it asks can be set. */
export function comfyuiImageRefusal(request: ImageRequest, c: ComfyChannel): ComfyRefusal | null {
  const n = c.nodes;
  const refs = referenceImages(request).length;
  if (refs > (n.image ? 1 : 0))
    return { field: 'reference images', got: String(refs), allowed: n.image ? ['0', '1'] : ['0 (no nodes.image)'] };
  if (request.tools?.length) return { field: 'tools', got: `${request.tools.length} tools`, allowed: ['none'] };
  if (request.systemInstruction)
    return { field: 'systemInstruction', got: 'a system instruction', allowed: ['none (put it in the prompt)'] };
  const gc = request.generationConfig ?? {};
  for (const k of Object.keys(gc))
    if (!IMAGE_CONFIG_FIELDS.has(k))
      return { field: `generationConfig.${k}`, got: JSON.stringify(gc[k]) ?? '', allowed: ['(omit it)'] };
  const modalities = gc.responseModalities;
  if (Array.isArray(modalities) && !modalities.includes('IMAGE'))
    return { field: 'generationConfig.responseModalities', got: modalities.join(','), allowed: ['IMAGE'] };
  const count = gc.candidateCount;
  if (count !== undefined && count !== 1 && !(n.count && Number.isInteger(count) && (count as number) >= 1))
    return {
      field: 'generationConfig.candidateCount',
      got: String(count),
      allowed: n.count ? ['a whole number from 1'] : ['1 (no nodes.count)'],
    };
  if (gc.seed !== undefined && !(n.seed && Number.isSafeInteger(gc.seed)))
    return {
      field: 'generationConfig.seed',
      got: String(gc.seed),
      allowed: n.seed ? ['a whole number'] : ['(omit it: no nodes.seed)'],
    };
  const ic = gc.imageConfig ?? {};
  for (const k of Object.keys(ic))
    if (k !== 'aspectRatio' && k !== 'imageSize')
      return { field: `generationConfig.imageConfig.${k}`, got: String(ic[k]), allowed: ['aspectRatio', 'imageSize'] };
  for (const k of ['aspectRatio', 'imageSize'] as const)
    if (ic[k] !== undefined && !n.width)
      return {
        field: `generationConfig.imageConfig.${k}`,
        got: String(ic[k]),
        allowed: ['(omit it: the workflow sets its own size; no nodes.width and nodes.height)'],
      };
  if (ic.imageSize !== undefined && sideOf(ic.imageSize) === null)
    return {
      field: 'generationConfig.imageConfig.imageSize',
      got: ic.imageSize,
      allowed: ['1K', '2K', '4K', 'a longer side in pixels'],
    };
  return null;
}

/** A resolution tier's longer side: `1K` is 1024, `2K` 2048; a bare number is pixels. */
function sideOf(tier: string): number | null {
  const k = /^([1-9]\d?(?:\.\d)?)K$/i.exec(tier);
  if (k) return Math.round(Number(k[1]) * 1024);
  return /^[1-9]\d{1,4}$/.test(tier) ? Number(tier) : null;
}

/** ComfyUI's latent sizes step by 8 pixels. */
const STEP = 8;

/** Width and height of an image request: the tier's longer side (1K without one), the ratio's other side in steps of 8. */
export function imageDimensions(aspectRatio?: string, imageSize?: string): { width: number; height: number } {
  const side = (imageSize !== undefined ? sideOf(imageSize) : null) ?? 1024;
  const [w, h] = (aspectRatio ?? '1:1').split(':').map(Number) as [number, number];
  const short = Math.max(STEP, Math.round((side * Math.min(w, h)) / Math.max(w, h) / STEP) * STEP);
  return w >= h ? { width: side, height: short } : { width: short, height: side };
}

const put = (out: InputValue[], at: NodeField | undefined, value: unknown) => {
  if (at && value !== undefined) out.push({ nodeId: at.nodeId, fieldName: at.fieldName, value });
};
const scaled = (at: NodeField | undefined, n: number) => Math.round(n * (at?.scale ?? 1));

/** An image request's inputs; `image` is the reference's name on the box (uploaded first). */
export function imageInputs(request: ImageRequest, nodes: ComfyNodes, image?: string): InputValue[] {
  const out: InputValue[] = [];
  const gc = request.generationConfig;
  const ic = gc?.imageConfig;
  put(out, nodes.prompt, promptText(request));
  put(out, nodes.image, image);
  if (nodes.width && (ic?.aspectRatio !== undefined || ic?.imageSize !== undefined)) {
    const d = imageDimensions(ic.aspectRatio, ic.imageSize);
    put(out, nodes.width, d.width);
    put(out, nodes.height, d.height);
  }
  if (typeof gc?.candidateCount === 'number') put(out, nodes.count, gc.candidateCount);
  if (typeof gc?.seed === 'number') put(out, nodes.seed, gc.seed);
  return out;
}

/** A video request's inputs (the model's mapping, then the caller's nodeInfoList, which wins). */
export function videoInputs(r: VideoRequest, nodes: ComfyNodes, image?: string): InputValue[] {
  const out: InputValue[] = [];
  put(out, nodes.prompt, r.prompt);
  put(out, nodes.image, image);
  put(out, nodes.seconds, nodes.seconds ? scaled(nodes.seconds, Number(r.seconds)) : undefined);
  put(out, nodes.size, r.size);
  const m = /^(\d+)x(\d+)$/.exec(r.size);
  if (m && nodes.width && nodes.height) {
    put(out, nodes.width, Number(m[1]));
    put(out, nodes.height, Number(m[2]));
  }
  for (const e of r.nodeInfoList ?? []) out.push({ nodeId: e.nodeId, fieldName: e.fieldName, value: e.fieldValue });
  return out;
}

/**
 * A copy of `workflow` with `inputs` set, each value in its input's own type. An input the workflow
 * no longer has (a models file changed under a queued task) throws, naming it.
 */
export function withInputs(workflow: ComfyWorkflow, inputs: InputValue[]): ComfyWorkflow {
  const out = structuredClone(workflow);
  for (const i of inputs) {
    const p = fieldProblem(out, i.nodeId, i.fieldName);
    if (p) throw new RangeError(p);
    const node = out[i.nodeId]!;
    const v = coerceInput(node.inputs[i.fieldName], i.value);
    if ('problem' in v) throw new RangeError(`input "${i.fieldName}" of node "${i.nodeId}" ${v.problem}`);
    node.inputs[i.fieldName] = v.value;
  }
  return out;
}
