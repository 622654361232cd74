// The models file's `workflowFile` (comfyui): an API-format workflow stored beside the models file,
// read once at start and kept on the model as `workflow`. A file that is missing or is no such
// workflow stops start-up, naming the field and the file.
import { readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { workflowProblem } from '../shared/comfyui.js';

type Issue = (path: (string | number)[], message: string) => void;

/** The raw entry with its `workflowFile` read into `workflow` (a fresh object; the input is not changed). */
function withWorkflow(entry: unknown, baseDir: string, path: (string | number)[], issue: Issue): unknown {
  if (!entry || typeof entry !== 'object' || Array.isArray(entry)) return entry;
  const e = entry as Record<string, unknown>;
  if (e.workflowFile === undefined) return entry;
  if (typeof e.workflowFile !== 'string' || e.workflowFile === '') {
    issue([...path, 'workflowFile'], 'workflowFile is a path (relative to the models file, or absolute)');
    return entry;
  }
  const file = isAbsolute(e.workflowFile) ? e.workflowFile : resolve(baseDir, e.workflowFile);
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    issue([...path, 'workflowFile'], `${file} cannot be read as JSON (${why})`);
    return entry;
  }
  const problem = workflowProblem(json);
  if (problem) {
    issue([...path, 'workflowFile'], `${file} is not an API-format ComfyUI workflow: ${problem}`);
    return entry;
  }
  return { ...e, workflow: json };
}

/**
 * The models file's models with each `workflowFile` (a model's or a channel's) read into `workflow`;
 * `baseDir` is where relative paths start (the models file's directory).
 */
export function readWorkflowFiles(
  models: unknown,
  baseDir: string,
  issue: Issue,
  at: (string | number)[] = [],
): unknown {
  const one = (m: unknown, path: (string | number)[]) => {
    const model = withWorkflow(m, baseDir, path, issue);
    const channels = (model as { channels?: unknown } | null)?.channels;
    if (!Array.isArray(channels)) return model;
    return {
      ...(model as object),
      channels: channels.map((c, j) => withWorkflow(c, baseDir, [...path, 'channels', j], issue)),
    };
  };
  return Array.isArray(models) ? models.map((m, i) => one(m, [...at, i])) : one(models, at);
}
