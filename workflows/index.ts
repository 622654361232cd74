// Bundle entry for the worker: every workflow Kiln runs.
export { imageTaskWorkflow, getTaskQuery } from './image-task.js';
export { videoTaskWorkflow, getVideoTaskQuery } from './video-task.js';
export { webhookDeliveryWorkflow } from './webhook-delivery.js';
