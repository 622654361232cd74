// The submit guard that keeps a request within one Temporal payload (src/image/validate.ts): what
// it measures is the request deflated, as the payload codec sends it. An HTTP body (2 MiB) never
// reaches it; a Gemini batch (4 MiB body, its requests checked one by one) can.
import { randomBytes } from 'node:crypto';
import { deflateRawSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { parseModel, type ImageModel } from '../../../src/config/models.js';
import { LIMITS } from '../../../src/shared/limits.js';
import { validateSubmit } from '../../../src/image/validate.js';

const model = parseModel({ id: 'm', provider: 'local' }) as ImageModel;
/** A request whose tools carry `text`: kept as they are, as Gemini's tools are. */
const request = (text: string) => ({
  contents: [{ role: 'user', parts: [{ text: 'a kiln' }] }],
  tools: [{ googleSearch: { note: text } }],
});
const sizes = (r: unknown) => {
  const json = JSON.stringify(validateSubmit(r, 'url', model));
  return { raw: Buffer.byteLength(json), deflated: deflateRawSync(json).length };
};

describe('the request size guard', () => {
  it('takes a request over the limit whose deflated size is under it', () => {
    const r = request(
      randomBytes(2 * 1024 * 1024)
        .toString('base64')
        .slice(0, LIMITS.requestBytes),
    );
    const { raw, deflated } = sizes(r);
    expect(raw).toBeGreaterThan(LIMITS.requestBytes);
    expect(deflated).toBeLessThanOrEqual(LIMITS.requestBytes);
  });

  it('refuses, with request_too_large, one whose deflated size is over the limit', () => {
    // Random base64 deflates to about 3/4: 3 MiB of it stays above 2 MiB.
    const text = randomBytes(3 * 1024 * 1024)
      .toString('base64')
      .slice(0, 3 * 1024 * 1024);
    expect(deflateRawSync(JSON.stringify(request(text))).length).toBeGreaterThan(LIMITS.requestBytes);
    expect(() => validateSubmit(request(text), 'url', model)).toThrow(
      expect.objectContaining({ code: 'request_too_large' }),
    );
  });
});
