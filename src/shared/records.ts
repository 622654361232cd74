// The records the read model stores, of any kind: image and video tasks share the ids' keyspace and ranks.
import type { ImageTaskRecord } from './image-task.js';
import type { VideoTaskRecord } from './video-task.js';

export type AnyTaskRecord = ImageTaskRecord | VideoTaskRecord;
