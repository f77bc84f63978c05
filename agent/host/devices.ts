/**
 * Devices for the flowtable and this node's own addresses (for NodePorts), read with
 * `ip -j link` / `ip -j addr` through a Runner, and filtered purely.
 *
 * Default selection, as kindnet does: every oper-up, non-loopback interface. Or, as Calico
 * does, include/exclude regular expressions (`--devices`, `--exclude-devices`).
 */
import { z } from 'zod';
import type { Runner } from '../../lib/exec.ts';
import { FlowhintError } from '../../lib/errors.ts';
import { parseAddress, type Address } from '../state/address.ts';
import { isRenderableDevice } from '../nft/names.ts';

const Link = z.looseObject({
  ifname: z.string(),
  flags: z.array(z.string()).default([]),
  operstate: z.string().optional(),
  link_type: z.string().optional(),
});
const Links = z.array(Link);
const AddrInfo = z.looseObject({ local: z.string().optional(), scope: z.string().optional() });
const Addrs = z.array(
  z.looseObject({
    ifname: z.string(),
    flags: z.array(z.string()).default([]),
    addr_info: z.array(AddrInfo).default([]),
  }),
);

export interface DeviceFilter {
  include?: RegExp | undefined;
  exclude?: RegExp | undefined;
}

export type LinkInfo = z.infer<typeof Link>;

export function isOperUp(l: LinkInfo): boolean {
  if (l.link_type === 'loopback' || l.flags.includes('LOOPBACK')) return false;
  if (l.operstate === 'UP') return true;
  // Devices without carrier reporting (tun, dummy, some veths) say UNKNOWN while running.
  return l.operstate === 'UNKNOWN' && l.flags.includes('UP') && l.flags.includes('LOWER_UP');
}

export function selectDevices(links: readonly LinkInfo[], f: DeviceFilter): { devices: string[]; skipped: string[] } {
  const devices: string[] = [];
  const skipped: string[] = [];
  for (const l of links) {
    if (!isOperUp(l)) continue;
    if (f.include && !f.include.test(l.ifname)) continue;
    if (f.exclude && f.exclude.test(l.ifname)) continue;
    if (!isRenderableDevice(l.ifname)) {
      skipped.push(l.ifname);
      continue;
    }
    devices.push(l.ifname);
  }
  return { devices: devices.sort(), skipped };
}

async function ipJson(run: Runner, args: string[]): Promise<unknown> {
  const r = await run(['ip', '-j', ...args]);
  if (r.code !== 0)
    throw new FlowhintError(
      'FH_IP_FAILED',
      `ip -j ${args.join(' ')} failed: ${r.stderr.trim()}; is iproute2 installed?`,
    );
  return JSON.parse(r.stdout || '[]');
}

export async function listLinks(run: Runner): Promise<LinkInfo[]> {
  return Links.parse(await ipJson(run, ['link', 'show']));
}

/** Global-scope addresses of up, non-loopback interfaces: where NodePorts are reached. */
export async function listNodeAddresses(run: Runner): Promise<Address[]> {
  const out: Address[] = [];
  for (const i of Addrs.parse(await ipJson(run, ['addr', 'show']))) {
    if (i.flags.includes('LOOPBACK') || !i.flags.includes('UP')) continue;
    for (const a of i.addr_info) {
      if (a.scope !== 'global' || !a.local) continue;
      const p = parseAddress(a.local);
      if (p) out.push(p);
    }
  }
  return out;
}
