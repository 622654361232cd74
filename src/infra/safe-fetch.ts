// Fetches a URL that a caller (or an upstream) supplied, without letting it reach this machine's
// network: every address a name resolves to must be public unicast, the connection goes to exactly
// the address that was checked (the check runs inside the socket's own lookup, so a second DNS
// answer cannot slip in), redirects are followed by hand and each hop is checked again, and the
// body is capped in size and must have an accepted content type.
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { request as httpRequest, type IncomingMessage, type RequestOptions } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';

export type Resolver = (hostname: string) => Promise<LookupAddress[]>;

export interface SafeFetchPolicy {
  /** Largest body accepted, in bytes (a call may ask for less or more). */
  maxBytes: number;
  /** Redirect hops followed before giving up. */
  maxRedirects: number;
  /** Whether a response's media type (lower case, without parameters) is acceptable. */
  acceptType: (mediaType: string) => boolean;
  /** DNS resolution; the system resolver by default. Tests inject names of their own. */
  resolve?: Resolver;
  /**
   * Addresses or CIDR ranges exempt from the refusal rules. Test-only: it lets a fake server on
   * 127.0.0.2 stand in for a public host while 127.0.0.1 and every other rule stay enforced.
   */
  allow?: string[];
}

export interface Fetched {
  data: Buffer;
  mediaType: string;
  url: string;
}

/** The URL cannot be used: refused by policy, unreachable, or its answer is not acceptable. */
export class UnusableUrl extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnusableUrl';
  }
}

const systemResolve: Resolver = (hostname) =>
  new Promise((resolve, reject) => {
    dnsLookup(hostname, { all: true, verbatim: true }, (err, addresses) => (err ? reject(err) : resolve(addresses)));
  });

/** Why an address must not be contacted, or null when it is public unicast (or explicitly allowed). */
export function refusedAddress(address: string, allow: string[] = []): string | null {
  if (!ipaddr.isValid(address)) return 'not an IP address';
  // process() turns IPv4-mapped IPv6 (::ffff:127.0.0.1) into the IPv4 address it carries.
  const ip = ipaddr.process(address);
  for (const entry of allow) {
    const [net, bits] = entry.includes('/')
      ? ipaddr.parseCIDR(entry)
      : [ipaddr.process(entry), ip.kind() === 'ipv4' ? 32 : 128];
    if (net.kind() === ip.kind() && ip.match(net, bits)) return null;
  }
  const range = ip.range();
  // Only ordinary unicast is allowed: private, loopback, link-local (metadata 169.254.169.254),
  // CGNAT, unique-local, multicast, unspecified, reserved and the IPv6 ranges that embed IPv4
  // (6to4, Teredo, NAT64) are all refused.
  return range === 'unicast' ? null : `${range} address`;
}

export function createSafeFetch(policy: SafeFetchPolicy) {
  const resolve = policy.resolve ?? systemResolve;
  const allow = policy.allow ?? [];
  for (const entry of allow) {
    if (!ipaddr.isValid(entry) && !ipaddr.isValidCIDR(entry))
      throw new Error(`allow-list entry "${entry}" is not an IP address or CIDR range`);
  }

  const check = (host: string, address: string) => {
    const why = refusedAddress(address, allow);
    if (why) throw new UnusableUrl(`${host} resolves to a ${why} (${address}), which is not fetched`);
  };

  // Runs inside net.connect: the address it returns is the one the socket connects to.
  const guardedLookup: LookupFunction = (hostname, options, callback) => {
    resolve(hostname)
      .then((addresses) => {
        if (addresses.length === 0) throw new UnusableUrl(`${hostname} does not resolve`);
        for (const a of addresses) check(hostname, a.address);
        if (options.all) (callback as (e: null, a: LookupAddress[]) => void)(null, addresses);
        else callback(null, addresses[0]!.address, addresses[0]!.family);
      })
      .catch((err: Error) =>
        callback(
          err instanceof UnusableUrl
            ? err
            : new UnusableUrl(
                `${hostname} could not be resolved (${(err as NodeJS.ErrnoException).code ?? err.message})`,
              ),
          '',
          0,
        ),
      );
  };

  async function hop(url: URL, signal: AbortSignal): Promise<IncomingMessage> {
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new UnusableUrl(`the scheme ${url.protocol} is not fetched`);
    if (url.username || url.password) throw new UnusableUrl('URLs with credentials are not fetched');
    const host = url.hostname.replace(/^\[|\]$/g, '');
    // A literal address never goes through lookup: check it here.
    if (ipaddr.isValid(host)) check(host, host);
    const options: RequestOptions = {
      method: 'GET',
      agent: false,
      lookup: guardedLookup,
      signal,
      headers: { accept: 'image/*', 'user-agent': 'kiln-reference-fetch' },
    };
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    return new Promise((resolveRes, reject) => {
      const req = send(url, options, resolveRes);
      req.on('error', reject);
      req.end();
    });
  }

  return async function safeFetch(raw: string, signal: AbortSignal, maxBytes = policy.maxBytes): Promise<Fetched> {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new UnusableUrl('not an absolute URL');
    }
    for (let redirects = 0; ; redirects++) {
      let res: IncomingMessage;
      try {
        res = await hop(url, signal);
      } catch (err) {
        if (err instanceof UnusableUrl || signal.aborted) throw err;
        const e = err as NodeJS.ErrnoException;
        if (e.cause instanceof UnusableUrl) throw e.cause;
        throw new UnusableUrl(`${url.host} could not be reached (${e.code ?? e.message})`);
      }
      const status = res.statusCode ?? 0;
      if (status >= 300 && status < 400 && res.headers.location) {
        res.resume();
        if (redirects >= policy.maxRedirects) throw new UnusableUrl(`more than ${policy.maxRedirects} redirects`);
        url = new URL(res.headers.location, url);
        continue;
      }
      if (status < 200 || status >= 300) {
        res.resume();
        throw new UnusableUrl(`${url.host} answered ${status}`);
      }
      const mediaType = (res.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
      if (!policy.acceptType(mediaType)) {
        res.destroy();
        throw new UnusableUrl(`the content type "${mediaType || '(none)'}" is not accepted`);
      }
      const declared = Number(res.headers['content-length']);
      if (Number.isFinite(declared) && declared > maxBytes) {
        res.destroy();
        throw new UnusableUrl(`its ${declared} bytes are over the limit of ${maxBytes}`);
      }
      return { data: await readCapped(res, maxBytes), mediaType, url: url.href };
    }
  };
}

export type SafeFetch = ReturnType<typeof createSafeFetch>;

async function readCapped(res: IncomingMessage, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for await (const chunk of res as AsyncIterable<Buffer>) {
      total += chunk.length;
      if (total > maxBytes) {
        res.destroy();
        throw new UnusableUrl(`the body is over the limit of ${maxBytes} bytes`);
      }
      chunks.push(chunk);
    }
  } catch (err) {
    if (err instanceof UnusableUrl) throw err;
    throw new UnusableUrl(`the download broke off (${(err as Error).message})`);
  }
  return Buffer.concat(chunks);
}
