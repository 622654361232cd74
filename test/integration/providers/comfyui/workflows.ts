// The stored workflows the comfyui tests configure, and where their models put Kiln's inputs.
export const IMAGE_WORKFLOW = new URL('./workflows/image.json', import.meta.url).pathname;
export const IMAGE_NODES = {
  prompt: { nodeId: '6', fieldName: 'text' },
  image: { nodeId: '5', fieldName: 'image' },
  width: { nodeId: '3', fieldName: 'width' },
  height: { nodeId: '3', fieldName: 'height' },
  count: { nodeId: '3', fieldName: 'batch_size' },
  seed: { nodeId: '4', fieldName: 'seed' },
};

export const VIDEO_WORKFLOW = new URL('./workflows/video.json', import.meta.url).pathname;
/** Seconds as frames at 8 per second; the size as the empty image's width and height. */
export const VIDEO_NODES = {
  prompt: { nodeId: '6', fieldName: 'text' },
  image: { nodeId: '2', fieldName: 'image' },
  seconds: { nodeId: '1', fieldName: 'batch_size', scale: 8 },
  width: { nodeId: '1', fieldName: 'width' },
  height: { nodeId: '1', fieldName: 'height' },
};
