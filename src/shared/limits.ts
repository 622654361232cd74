// Request limits of the contract, shared by the body parser and every submit check.
// Pure module: safe to value-import from workflow code.

export const LIMITS = {
  promptChars: 4000,
  referenceImages: 8,
  contents: 64,
  partsPerContent: 64,
  bodyBytes: 2 * 1024 * 1024,
  /** Nesting depth of the passed-through JSON (tools, generationConfig): deeper overflows serializers. */
  jsonDepth: 64,
  /**
   * The request travels as one Temporal payload, whose hard limit is 2 MiB with the task envelope
   * around it: the serialized request, deflated as the payload codec sends it, must leave room for
   * that envelope.
   */
  requestBytes: 2 * 1024 * 1024 - 8 * 1024,
} as const;

/** Counts characters as a person does (code points), not UTF-16 units. */
export const chars = (s: string): number => [...s].length;
