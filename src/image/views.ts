// The public shapes of a task, derived from the stored record.
import type { TaskRecord } from '../shared/task.js';

export type TaskView = ReturnType<typeof taskView>;

export function taskView(r: TaskRecord) {
  const base = {
    id: r.id, object: 'image.task' as const, model: r.model, status: r.status as string,
    created_at: r.created_at, finished_at: r.finished_at,
  };
  if (r.status === 'succeeded') {
    return { ...base, response_id: r.response_id, model_version: r.model_version, candidates: r.candidates, error: null };
  }
  if (r.status === 'uncertain') return { ...base, candidates: null, error: null, uncertain_reason: r.uncertain_reason };
  return { ...base, candidates: null, error: r.error };
}

export function notFoundItem(id: string) {
  return { id, object: 'image.task' as const, status: 'not_found', error: { code: 'not_found', message: `Task ${id} was not found.` } };
}
