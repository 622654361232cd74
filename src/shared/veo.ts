// How a video task's `seconds` and `size` read in the Gemini API's Veo parameters (the
// `gemini-veo` provider), and which google.rpc status ends a task with which Kiln code. The models
// file is refused at start-up when a model offers a value this table cannot express, so no task
// can carry one to the upstream.
// Pure module: safe to value-import from workflow code.
import type { TaskFailureCode } from './errors.js';

/** `durationSeconds` Veo takes: Veo 3.x 4, 6 or 8; Veo 2 5 to 8. Each model's own subset is the upstream's to check. */
export const VEO_MIN_SECONDS = 4;
export const VEO_MAX_SECONDS = 8;

/** A gemini-veo model's `seconds` when the models file names none: Veo's default duration first. */
export const VEO_DEFAULT_SECONDS = ['8', '4', '6'] as const;

export interface VeoShape {
  aspectRatio: '16:9' | '9:16';
  /** Left out for 720p, Veo's default, so the sizes work on Veo 2 too (which takes no `resolution`). */
  resolution?: '1080p' | '4k';
}

/** Kiln's `size` (`WxH`) → Veo's aspect ratio and resolution. */
export const VEO_SIZES: Readonly<Record<string, VeoShape>> = {
  '1280x720': { aspectRatio: '16:9' },
  '720x1280': { aspectRatio: '9:16' },
  '1920x1080': { aspectRatio: '16:9', resolution: '1080p' },
  '1080x1920': { aspectRatio: '9:16', resolution: '1080p' },
  '3840x2160': { aspectRatio: '16:9', resolution: '4k' },
  '2160x3840': { aspectRatio: '9:16', resolution: '4k' },
};

/** The Veo `parameters` of one task; undefined when a value cannot be expressed (refused at start-up). */
export function veoParameters(seconds: string, size: string): (VeoShape & { durationSeconds: number }) | undefined {
  const shape = VEO_SIZES[size];
  const n = Number(seconds);
  if (!shape || !veoSeconds(seconds)) return undefined;
  return { durationSeconds: n, ...shape };
}

function veoSeconds(s: string): boolean {
  const n = Number(s);
  return /^\d+$/.test(s) && n >= VEO_MIN_SECONDS && n <= VEO_MAX_SECONDS;
}

/** Why a model's `seconds` / `sizes` cannot go to a gemini-veo channel: one message per value, empty when all can. */
export function veoRefusals(options: { seconds: readonly string[]; sizes: readonly string[] }): {
  field: 'seconds' | 'sizes';
  message: string;
}[] {
  const out: { field: 'seconds' | 'sizes'; message: string }[] = [];
  for (const s of options.seconds)
    if (!veoSeconds(s))
      out.push({
        field: 'seconds',
        message:
          `seconds "${s}" cannot be sent to gemini-veo: Veo takes durationSeconds ` +
          `${VEO_MIN_SECONDS} to ${VEO_MAX_SECONDS} (set the model's seconds)`,
      });
  for (const s of options.sizes)
    if (!VEO_SIZES[s])
      out.push({
        field: 'sizes',
        message:
          `size "${s}" cannot be sent to gemini-veo: Veo takes ${Object.keys(VEO_SIZES).join(', ')} ` +
          `(16:9 or 9:16 at 720p, 1080p or 4k; set the model's sizes)`,
      });
  return out;
}

/** google.rpc.Code by number: an operation's `error.code` is the number, an HTTP error body's `status` the name. */
const RPC_NAMES = [
  'OK',
  'CANCELLED',
  'UNKNOWN',
  'INVALID_ARGUMENT',
  'DEADLINE_EXCEEDED',
  'NOT_FOUND',
  'ALREADY_EXISTS',
  'PERMISSION_DENIED',
  'RESOURCE_EXHAUSTED',
  'FAILED_PRECONDITION',
  'ABORTED',
  'OUT_OF_RANGE',
  'UNIMPLEMENTED',
  'INTERNAL',
  'UNAVAILABLE',
  'DATA_LOSS',
  'UNAUTHENTICATED',
] as const;

/** The rpc codes whose cause Kiln knows; every other one (INTERNAL, UNAVAILABLE, UNKNOWN …) is upstream_error. */
const BY_RPC: Readonly<Record<string, TaskFailureCode>> = {
  INVALID_ARGUMENT: 'invalid_request',
  FAILED_PRECONDITION: 'invalid_request',
  OUT_OF_RANGE: 'invalid_request',
  NOT_FOUND: 'invalid_request',
  ALREADY_EXISTS: 'invalid_request',
  UNAUTHENTICATED: 'auth_failed',
  PERMISSION_DENIED: 'auth_failed',
  RESOURCE_EXHAUSTED: 'upstream_rate_limited',
  DEADLINE_EXCEEDED: 'upstream_timeout',
};

/** The rpc code's name for a number or a name (`"UNKNOWN"` for anything else). */
export function rpcName(code: unknown): string {
  if (typeof code === 'number') return RPC_NAMES[code] ?? 'UNKNOWN';
  return typeof code === 'string' && (RPC_NAMES as readonly string[]).includes(code) ? code : 'UNKNOWN';
}

/** A google.rpc code (number or name) → the task's failure code. */
export function rpcToCode(code: unknown): TaskFailureCode {
  return BY_RPC[rpcName(code)] ?? 'upstream_error';
}
