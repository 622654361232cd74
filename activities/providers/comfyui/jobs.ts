// A ComfyUI prompt as a Kiln job, for image and video models alike: the model's stored workflow
// with the request's inputs set is queued under Kiln's own prompt id (kilnJobId: the task id, the
// same for every attempt and worker), so a create whose answer was lost is looked up on the box
// (the queue, then the history) instead of sent again or given up.
import type { SafeFetch } from '../../../src/infra/safe-fetch.js';
import { withInputs, type ComfyWorkflow, type InputValue } from '../../../src/shared/comfyui.js';
import { kilnJobId, type JobCheck, type UpstreamJob } from '../../../src/shared/upstream-job.js';
import { TransportFailure, UpstreamFailure } from '../../../src/upstreams/failures.js';
import type { Lookup } from '../contract.js';
import { downloadReference } from '../references.js';
import {
  healthy,
  historyFailure,
  historyOutputs,
  inHistory,
  inQueue,
  locate,
  stopPrompt,
  submitPrompt,
  uploadImage,
  type ComfyCall,
  type Place,
} from './api.js';

/** What a comfyui call carries beside the box: the task and the channel's workflow. */
export interface ComfyJobCall extends ComfyCall {
  input: { id: string };
  model: ComfyCall['model'] & { workflow?: ComfyWorkflow | undefined; referenceMaxBytes?: number };
}

const EXT: Record<string, string> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/webp': 'webp',
  'image/gif': 'gif',
};

/**
 * Steps before the prompt is sent touch the box too (the health check, the reference upload): a
 * failure there provably sent nothing, so it must not read as a create that may have arrived.
 */
async function beforeSend<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    if (err instanceof TransportFailure && err.dispatched)
      throw new TransportFailure(`${err.message} (before the prompt was sent)`, false);
    if (err instanceof UpstreamFailure && (err.info.status ?? 0) >= 500 && !err.info.refused)
      throw new UpstreamFailure(err.code, `${err.message} (before the prompt was sent)`, false, {
        ...err.info,
        refused: true,
      });
    throw err;
  }
}

/** The caller's reference image (a URL, or base64 already inline) stored on the box; its name for LoadImage. */
export async function uploadReference(
  call: ComfyJobCall,
  fetchReference: SafeFetch,
  ref: { data: string; mimeType?: string },
): Promise<string> {
  const got = /^https?:\/\//i.test(ref.data)
    ? await downloadReference(
        fetchReference,
        ref.data,
        call.signal,
        'The reference image',
        call.model.referenceMaxBytes,
      )
    : { mimeType: ref.mimeType ?? 'image/png', data: ref.data };
  const name = `${call.input.id}.${EXT[got.mimeType] ?? 'png'}`;
  return beforeSend(() => uploadImage(call, Buffer.from(got.data, 'base64'), got.mimeType, name));
}

/**
 * Queues the channel's workflow with `inputs` set. The health check comes first (a box that is down
 * fails before anything leaves); `inputs` may upload the reference image, also before the send.
 */
export async function createPrompt(
  call: ComfyJobCall & { dispatching: () => Promise<void> },
  inputs: () => Promise<InputValue[]>,
): Promise<UpstreamJob> {
  const stored = call.model.workflow;
  if (!stored) throw new UpstreamFailure('invalid_request', 'the comfyui channel has no workflow (workflowFile)');
  await beforeSend(() => healthy(call));
  const values = await inputs();
  let workflow: ComfyWorkflow;
  try {
    workflow = withInputs(stored, values);
  } catch (err) {
    // Refused at submit; a task accepted under an older models file may still name such an input.
    throw new UpstreamFailure('invalid_request', `the workflow cannot take the request: ${(err as Error).message}`);
  }
  const id = await submitPrompt(call, workflow, kilnJobId(call.input));
  return { upstreamId: id };
}

function checkOf(call: ComfyCall, place: Place, id: string): JobCheck {
  if (place.at === 'pending') return { state: 'running', progress: 0 };
  if (place.at === 'running') return { state: 'running' };
  if (place.at === 'none')
    throw new UpstreamFailure(
      'upstream_error',
      `the ComfyUI box has prompt ${id} neither queued nor in its history (restarted, or deleted there)`,
    );
  const failed = historyFailure(place.entry, call.key);
  if (failed) throw failed;
  const outputs = historyOutputs(call, place.entry);
  if (!outputs.length) throw new UpstreamFailure('upstream_error', 'the ComfyUI prompt finished without output files');
  return { state: 'completed', outputs };
}

/**
 * One look at the prompt: the history first (a finished prompt is one read), then the queue, then
 * the history again (it may have finished between the two).
 */
export async function checkPrompt(call: ComfyCall, job: UpstreamJob): Promise<JobCheck> {
  const id = job.upstreamId;
  const place = (await inHistory(call, id)) ??
    (await inQueue(call, id)) ??
    (await inHistory(call, id)) ?? { at: 'none' as const };
  return checkOf(call, place, id);
}

/** The prompt Kiln's create may have queued: found in the queue or the history, or certainly not there. */
export async function lookupPrompt(call: ComfyJobCall): Promise<Lookup> {
  const id = kilnJobId(call.input);
  const place = await locate(call, id);
  return place.at === 'none' ? { absent: true } : { found: { upstreamId: id } };
}

export function cancelPrompt(call: ComfyCall, job: UpstreamJob): Promise<void> {
  return stopPrompt(call, job.upstreamId);
}
