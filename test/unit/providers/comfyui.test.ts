// The comfyui provider's pure parts: API-format workflow checks, the models file's node mapping and
// allow-list, nodeInfoList refusals, the inputs set on the workflow, and how a history entry reads
// (outputs as /view URLs, an execution error naming its node).
import { describe, expect, it } from 'vitest';
import {
  coerceInput,
  comfyuiChannelIssues,
  comfyuiImageRefusal,
  comfyuiVideoRefusal,
  imageDimensions,
  imageInputs,
  videoInputs,
  withInputs,
  workflowProblem,
  type ComfyWorkflow,
} from '../../../src/shared/comfyui.js';
import type { ImageRequest, Part } from '../../../src/shared/image-task.js';
import { historyFailure, historyOutputs } from '../../../activities/providers/comfyui/api.js';
import { pickVideo } from '../../../activities/providers/comfyui/video.js';

const WF: ComfyWorkflow = {
  '3': { class_type: 'EmptyImage', inputs: { width: 512, height: 512, batch_size: 1, color: 0 } },
  '6': { class_type: 'CLIPTextEncode', inputs: { text: 'x', clip: ['1', 1] } },
  '8': { class_type: 'KSampler', inputs: { seed: 1, cfg: 7, denoise: true } },
  '9': { class_type: 'SaveImage', inputs: { images: ['3', 0], filename_prefix: 'kiln' } },
};
const nodes = {
  prompt: { nodeId: '6', fieldName: 'text' },
  width: { nodeId: '3', fieldName: 'width' },
  height: { nodeId: '3', fieldName: 'height' },
};

describe('comfyui workflows', () => {
  it('tells an API-format workflow from the editor format and from broken files', () => {
    expect(workflowProblem(WF)).toBeNull();
    expect(workflowProblem({ nodes: [], links: [] })).toMatch(/editor format/);
    expect(workflowProblem([])).toMatch(/not a JSON object/);
    expect(workflowProblem({})).toMatch(/no nodes/);
    expect(workflowProblem({ '1': { inputs: {} } })).toMatch(/node "1" has no class_type/);
    expect(workflowProblem({ '1': { class_type: 'X' } })).toMatch(/no inputs object/);
  });

  it('the models file: nodes and allowedInputs must be literal inputs; seconds and sizes need their nodes', () => {
    const video = { kind: 'video' as const, seconds: ['4'], sizes: ['512x512'], form: 'video' };
    expect(comfyuiChannelIssues({ workflow: WF, nodes }, video)).toEqual([]);
    expect(comfyuiChannelIssues({ nodes }, video)).toEqual([
      { field: 'workflowFile', message: expect.stringMatching(/needs workflowFile/) },
    ]);
    const bad = comfyuiChannelIssues(
      {
        workflow: WF,
        nodes: { prompt: { nodeId: '6', fieldName: 'clip' }, width: nodes.width },
        allowedInputs: ['8.seed', '8.steps', 'nope', '7.x'],
      },
      { ...video, seconds: ['4', '8'], sizes: ['512x512', '256x256'], form: 'workflow-node' },
    ).map((i) => `${i.field}: ${i.message}`);
    expect(bad).toEqual([
      'nodes: nodes.prompt: input "clip" of node "6" (CLIPTextEncode) is a link to another node, not a value',
      'allowedInputs: node "8" (KSampler) has no input "steps"',
      'allowedInputs: "nope" is not nodeId.fieldName',
      'allowedInputs: node "7" is not in the workflow',
      'nodes: nodes.width and nodes.height go together (the size is sent as both)',
      'nodes: the model accepts seconds 4, 8: set nodes.seconds (or one value in seconds)',
    ]);
    expect(comfyuiChannelIssues({ workflow: WF, nodes: {} }, { ...video, form: 'workflow-node' })).toEqual([
      { field: 'allowedInputs', message: expect.stringMatching(/needs allowedInputs/) },
    ]);
    expect(comfyuiChannelIssues({ workflow: WF, nodes: {} }, { kind: 'image' })).toEqual([
      { field: 'nodes', message: 'a comfyui image model needs nodes.prompt: the model accepts prompt' },
    ]);
    expect(comfyuiChannelIssues({ workflow: WF, nodes: { prompt: nodes.prompt } }, { kind: 'image' })).toEqual([]);
  });

  it('refuses nodeInfoList entries by node, field, allow-list and type', () => {
    const c = { workflow: WF, nodes, allowedInputs: ['8.seed', '8.denoise'] };
    const r = (e: object) =>
      comfyuiVideoRefusal({ prompt: 'p', seconds: '4', size: '1x1', nodeInfoList: [e as never] }, c);
    expect(r({ nodeId: '8', fieldName: 'seed', fieldValue: '12' })).toBeNull();
    expect(r({ nodeId: '8', fieldName: 'cfg', fieldValue: 2 })?.message).toMatch(/not in the model's allowedInputs/);
    expect(r({ nodeId: '8', fieldName: 'denoise', fieldValue: 'maybe' })?.message).toMatch(/takes true or false/);
    expect(r({ nodeId: '2', fieldName: 'seed', fieldValue: 1 })).toEqual({
      field: 'nodeInfoList[0]',
      message: 'node "2" is not in the workflow',
    });
    expect(comfyuiVideoRefusal({ prompt: 'p', seconds: '4', size: '1x1', image: 'https://x/a.png' }, c)?.field).toBe(
      'image',
    );
  });

  it('sets the inputs in their own types and leaves the stored workflow alone', () => {
    const out = withInputs(WF, [
      { nodeId: '6', fieldName: 'text', value: 'a fox' },
      { nodeId: '8', fieldName: 'seed', value: '42' },
      { nodeId: '8', fieldName: 'denoise', value: 'false' },
      { nodeId: '9', fieldName: 'filename_prefix', value: 7 },
    ]);
    expect(out['6']!.inputs.text).toBe('a fox');
    expect(out['8']!.inputs).toEqual({ seed: 42, cfg: 7, denoise: false });
    expect(out['9']!.inputs.filename_prefix).toBe('7');
    expect(WF['6']!.inputs.text).toBe('x');
    expect(() => withInputs(WF, [{ nodeId: '6', fieldName: 'clip', value: 'x' }])).toThrow(/is a link/);
    expect(coerceInput(1, ' ')).toEqual({ problem: 'takes a number' });
  });

  it('maps image and video requests onto the nodes', () => {
    expect(imageDimensions('16:9', '1K')).toEqual({ width: 1024, height: 576 });
    expect(imageDimensions('9:16')).toEqual({ width: 576, height: 1024 });
    expect(imageDimensions(undefined, '2K')).toEqual({ width: 2048, height: 2048 });
    const req = {
      contents: [{ parts: [{ text: 'a fox' }] }],
      generationConfig: { imageConfig: { aspectRatio: '4:3' }, seed: 9 },
    };
    expect(imageInputs(req, { ...nodes, seed: { nodeId: '8', fieldName: 'seed' } }, undefined)).toEqual([
      { nodeId: '6', fieldName: 'text', value: 'a fox' },
      { nodeId: '3', fieldName: 'width', value: 1024 },
      { nodeId: '3', fieldName: 'height', value: 768 },
      { nodeId: '8', fieldName: 'seed', value: 9 },
    ]);
    const v = videoInputs(
      {
        prompt: 'waves',
        seconds: '4',
        size: '320x180',
        nodeInfoList: [{ nodeId: '8', fieldName: 'seed', fieldValue: 3 }],
      },
      {
        ...nodes,
        seconds: { nodeId: '3', fieldName: 'batch_size', scale: 8 },
        size: { nodeId: '9', fieldName: 'filename_prefix' },
      },
      'kiln/t.png',
    );
    expect(v.map((i) => `${i.nodeId}.${i.fieldName}=${String(i.value)}`)).toEqual([
      '6.text=waves',
      '3.batch_size=32',
      '9.filename_prefix=320x180',
      '3.width=320',
      '3.height=180',
      '8.seed=3',
    ]);
  });

  it('refuses image options the channel has no node for', () => {
    const req = (gc: Record<string, unknown>, parts: Part[] = []): ImageRequest => ({
      contents: [{ parts: [{ text: 'p' }, ...parts] }],
      generationConfig: gc,
    });
    const bare = { nodes: { prompt: nodes.prompt } };
    expect(comfyuiImageRefusal(req({}), bare)).toBeNull();
    expect(comfyuiImageRefusal(req({ candidateCount: 1 }), bare)).toBeNull();
    expect(comfyuiImageRefusal(req({ imageConfig: { imageSize: '2K' } }), bare)?.field).toBe(
      'generationConfig.imageConfig.imageSize',
    );
    expect(comfyuiImageRefusal(req({ imageConfig: { imageSize: 'huge' } }), { nodes })?.allowed).toContain('1K');
    expect(comfyuiImageRefusal(req({}, [{ inlineData: { data: 'https://x/a.png' } }]), bare)?.field).toBe(
      'reference images',
    );
  });
});

describe('comfyui history', () => {
  const call = { model: { baseUrl: 'http://box:8188/' }, signal: AbortSignal.timeout(1000) };

  it('reads saved files as /view URLs on the box, previews only when nothing was saved', () => {
    const entry = {
      status: { status_str: 'success', completed: true, messages: [] },
      outputs: {
        '9': { images: [{ filename: 'kiln_00001_.webp', subfolder: '', type: 'output' }], animated: [true] },
        '11': { images: [{ filename: 'p_00001_.png', subfolder: '', type: 'temp' }] },
        '12': { gifs: [{ filename: 'clip.mp4', subfolder: 'video', type: 'output', format: 'video/h264-mp4' }] },
        '13': { text: ['not a file'] },
      },
    };
    expect(historyOutputs(call, entry)).toEqual([
      { url: 'http://box:8188/view?filename=kiln_00001_.webp&subfolder=&type=output', nodeId: '9', fileType: 'webp' },
      { url: 'http://box:8188/view?filename=clip.mp4&subfolder=video&type=output', nodeId: '12', fileType: 'mp4' },
    ]);
    expect(historyOutputs(call, { outputs: { '11': entry.outputs['11'] } })).toHaveLength(1);
    expect(pickVideo(historyOutputs(call, entry))?.fileType).toBe('mp4');
  });

  it('an execution error names the node and its message; an interrupt says so', () => {
    const failed = historyFailure({
      status: {
        status_str: 'error',
        completed: false,
        messages: [
          ['execution_start', { prompt_id: 'p' }],
          [
            'execution_error',
            {
              node_id: '4',
              node_type: 'KSampler',
              exception_message: 'CUDA out of memory',
              exception_type: 'torch.OutOfMemoryError',
            },
          ],
        ],
      },
    });
    expect(failed?.code).toBe('upstream_error');
    expect(failed?.message).toBe(
      'ComfyUI failed the prompt at node 4 (KSampler) [torch.OutOfMemoryError]: CUDA out of memory',
    );
    const stopped = historyFailure({
      status: { status_str: 'error', messages: [['execution_interrupted', { node_id: '9', node_type: 'SaveImage' }]] },
    });
    expect(stopped?.message).toMatch(/interrupted on the box at node 9 \(SaveImage\)/);
    expect(historyFailure({ status: { status_str: 'success', messages: [] } })).toBeNull();
  });
});
