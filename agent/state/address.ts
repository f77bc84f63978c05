/**
 * IP addresses as they may reach nft text: validated and canonical, or rejected.
 * Service objects are user input; only what passes here is ever rendered.
 */
import { isIPv4 } from 'node:net';
import { createHash } from 'node:crypto';

export type Family = 'ip' | 'ip6';

export interface Address {
  readonly family: Family;
  /** Canonical text: dotted quad, or RFC 5952 compressed lower-case IPv6. */
  readonly addr: string;
}

/** Parse a Service address; `undefined` for anything that is not a plain unicast-style IP. */
export function parseAddress(raw: string): Address | undefined {
  if (raw.length === 0 || raw.length > 45) return undefined;
  if (isIPv4(raw)) {
    if (raw === '0.0.0.0') return undefined;
    return { family: 'ip', addr: raw };
  }
  // Only hex digits, colons and dots (for ::ffff:a.b.c.d); no zones (%eth0), no brackets.
  if (!/^[0-9A-Fa-f:.]+$/.test(raw) || !raw.includes(':')) return undefined;
  let host: string;
  try {
    host = new URL(`http://[${raw}]/`).hostname;
  } catch {
    return undefined;
  }
  const addr = host.slice(1, -1);
  if (addr === '::') return undefined;
  return { family: 'ip6', addr };
}

/** A transport protocol flowhint programs. */
export type Proto = 'tcp' | 'udp';

/** The `"family addr"` key of an address in the desired state's maps; `keyToAddress` reads it back. */
export function addressKey(a: Address): string {
  return `${a.family} ${a.addr}`;
}

export function keyToAddress(key: string): Address {
  const [family, addr] = key.split(' ') as [Family, string];
  return { family, addr };
}

/** 16 hex characters of SHA-256: the only form in which names reach nft text. */
export function shortHash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 16);
}
