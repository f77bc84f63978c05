/**
 * The agent's status document, written atomically to `<state-dir>/status.json` after every
 * sync, and read by `flowhint status` (a separate process) with a zod schema.
 */
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import type { Address } from '../state/address.ts';
import type { DesiredState } from '../state/desired.ts';
import { BYPASS_DETAIL, bypassText, type Bypass } from '../host/local-delivery.ts';
import { OTHER_FLOWTABLE_DETAIL, flowtableText, type Flowtable } from '../host/other-flowtables.ts';
import type { AcctResult } from '../host/accounting.ts';
import type { MarkBits } from '../host/conntrack.ts';
import { FAMILY, TABLE } from '../nft/transaction.ts';
import { KUBE_PROXY_MEANING, KUBE_PROXY_MODES, type KubeProxyMode } from '../../api/index.ts';

export const DEFAULT_STATE_DIR = '/run/flowhint';

const SyncKind = z.enum(['full', 'partial', 'devices']);
/** A full sync rewrites the table; a partial one the Services that changed; `devices` the flowtable's devices. */
export type SyncKind = z.infer<typeof SyncKind>;

/** One sync's outcome, as the agent keeps it. */
export interface SyncResult {
  readonly kind: SyncKind;
  readonly ok: boolean;
  readonly durationMs: number;
  readonly error?: string;
  /** Full syncs: whether the table differed from what the last transaction left (drift). */
  readonly drift?: boolean;
  /** When it ended (ISO 8601). */
  readonly at: string;
}

const ServiceStatus = z.object({
  service: z.string(),
  /** Written by agents before 0.2 (a hash of the name); ignored. */
  id: z.string().optional(),
  /** Absent in documents written before ShortLived existed: LongLived. */
  hint: z.enum(['LongLived', 'ShortLived']).default('LongLived'),
  threshold: z.number(),
  /** ShortLived: the conntrack timeout programmed, in seconds. */
  timeoutSeconds: z.number().optional(),
  /** ShortLived: its conntrack entries now (live, like offloadedNow). */
  conntrackEntries: z.number().nullable().optional(),
  addresses: z.array(z.string()),
  ports: z.array(z.string()),
  nodePorts: z.array(z.string()),
  offloadedNow: z.number().nullable().optional(),
  /** Ports this node delivers locally (kube-proxy IPVS mode, a local address): never offloaded. */
  notOffloaded: z
    .array(
      z.object({
        address: z.string(),
        proto: z.enum(['tcp', 'udp']),
        port: z.number(),
        reason: z.enum(['ipvs', 'local-address']),
      }),
    )
    .optional(),
});

export const StatusDoc = z.object({
  version: z.literal(1),
  pid: z.number(),
  updatedAt: z.string(),
  node: z.object({
    mode: z.enum(['supported', 'degraded']),
    detail: z.string(),
    /** ShortLived's `ct timeout` support (absent in documents of older agents). */
    conntrackTimeout: z.object({ supported: z.boolean(), detail: z.string() }).optional(),
    /** Whether the kernel changes a live flowtable's devices in place (absent: not probed, or an older agent). */
    flowtableDeviceUpdate: z.object({ supported: z.boolean(), detail: z.string() }).optional(),
    conntrackAccounting: z.object({ enabled: z.boolean(), detail: z.string() }),
    nodeAddresses: z.array(z.string()),
    /** The kube-proxy mode found on the node (absent in documents of older agents). */
    kubeProxyMode: z.enum(KUBE_PROXY_MODES).optional(),
    /** The conntrack mark bits the ruleset sets; `flowhint status` filters its dumps on them (absent from older agents). */
    conntrackMarks: z.object({ long: z.number().int(), short: z.number().int() }).optional(),
  }),
  table: z.string(),
  devices: z.array(z.string()),
  /** Other owners' flowtables sharing our devices, with the shared ones (absent from older agents). */
  otherFlowtables: z
    .array(
      z.object({ table: z.string(), name: z.string(), priority: z.number().nullable(), devices: z.array(z.string()) }),
    )
    .default([]),
  services: z.array(ServiceStatus),
  invalid: z.array(z.object({ service: z.string(), code: z.string(), reason: z.string() })),
  lastSync: z
    .object({ at: z.string(), kind: SyncKind, ok: z.boolean(), durationMs: z.number(), error: z.string().optional() })
    .nullable(),
});
export type StatusDoc = z.infer<typeof StatusDoc>;

export function servicesStatus(
  state: DesiredState,
  bypassed: ReadonlyMap<string, readonly Bypass[]> = new Map(),
): StatusDoc['services'] {
  return [...state.services.values()]
    .sort((a, b) => a.key.localeCompare(b.key))
    .map((e) => ({
      service: e.key,
      hint: e.hint,
      threshold: e.threshold,
      ...(e.timeout === undefined ? {} : { timeoutSeconds: e.timeout }),
      addresses: e.vips.map((v) => v.addr),
      ports: e.ports.map((p) => `${p.proto}/${p.port}`),
      nodePorts: e.nodePorts.map((p) => `${p.proto}/${p.port}`),
      ...(bypassed.has(e.key) ? { notOffloaded: [...(bypassed.get(e.key) ?? [])] } : {}),
    }));
}

/** What the status document is made of; the agent's own state, read when it is written. */
export interface StatusInput {
  readonly pid: number;
  readonly now: Date;
  /** The node's support (host/node-support.ts). */
  readonly support: {
    readonly flowtable: boolean;
    readonly flowtableDetail: string;
    /** Device changes on a live flowtable (host/device-probe.ts); undefined: not probed. */
    readonly deviceUpdate?: boolean | undefined;
    readonly deviceUpdateDetail?: string;
    readonly ctTimeout: boolean;
    readonly ctTimeoutDetail: string;
    /** Which of the node's conntrack timeouts could not be read (empty or absent: all were). */
    readonly nodeTimeoutsProblem?: string;
    readonly acct: AcctResult;
  };
  readonly nodeAddresses: readonly Address[];
  /** The kube-proxy mode found on the node (host/kube-proxy-mode.ts); undefined: not read yet. */
  readonly kubeProxyMode?: KubeProxyMode | undefined;
  /** The conntrack mark bits the ruleset sets. */
  readonly marks?: MarkBits | undefined;
  /** What is programmed (none yet: undefined) and the flowtable's devices. */
  readonly applied: { readonly state: DesiredState; readonly devices: readonly string[] } | undefined;
  readonly otherFlowtables: readonly Flowtable[];
  readonly bypassed: ReadonlyMap<string, readonly Bypass[]>;
  readonly refused: ReadonlyArray<{ service: string; code: string; reason: string }>;
  readonly lastSync: SyncResult | undefined;
}

/** The status document (pure). */
export function statusDoc(s: StatusInput): StatusDoc {
  const { support, lastSync: ls } = s;
  const durationMs = ls ? Math.round(ls.durationMs * 10) / 10 : 0;
  return {
    version: 1,
    pid: s.pid,
    updatedAt: s.now.toISOString(),
    node: {
      mode: support.flowtable ? 'supported' : 'degraded',
      detail: support.flowtableDetail,
      conntrackTimeout: {
        supported: support.ctTimeout,
        detail: [support.ctTimeoutDetail, support.nodeTimeoutsProblem].filter(Boolean).join('; '),
      },
      ...(support.deviceUpdate === undefined
        ? {}
        : { flowtableDeviceUpdate: { supported: support.deviceUpdate, detail: support.deviceUpdateDetail ?? '' } }),
      conntrackAccounting: { enabled: support.acct.enabled, detail: support.acct.detail },
      nodeAddresses: s.nodeAddresses.map((a) => a.addr),
      ...(s.kubeProxyMode === undefined ? {} : { kubeProxyMode: s.kubeProxyMode }),
      ...(s.marks ? { conntrackMarks: { long: s.marks.long, short: s.marks.short } } : {}),
    },
    table: `${FAMILY} ${TABLE}`,
    devices: [...(s.applied?.devices ?? [])],
    otherFlowtables: s.otherFlowtables.map((f) => ({ ...f, devices: [...f.devices] })),
    services: s.applied ? servicesStatus(s.applied.state, s.bypassed) : [],
    invalid: s.refused.map((r) => ({ service: r.service, code: r.code, reason: r.reason })),
    lastSync: ls ? { at: ls.at, kind: ls.kind, ok: ls.ok, durationMs, ...(ls.error ? { error: ls.error } : {}) } : null,
  };
}

export async function writeStatus(dir: string, doc: StatusDoc): Promise<void> {
  await mkdir(dir, { recursive: true });
  const tmp = join(dir, `.status.${process.pid}.tmp`);
  await writeFile(tmp, `${JSON.stringify(doc, null, 2)}\n`);
  await rename(tmp, join(dir, 'status.json'));
}

export async function readStatus(dir: string): Promise<StatusDoc | undefined> {
  let text: string;
  try {
    text = await readFile(join(dir, 'status.json'), 'utf8');
  } catch {
    return undefined;
  }
  return StatusDoc.parse(JSON.parse(text));
}

export function formatStatus(s: StatusDoc): string {
  const lines: string[] = [];
  lines.push(`node: ${s.node.mode === 'supported' ? 'supported' : 'degraded'}: ${s.node.detail}`);
  lines.push(
    `conntrack accounting: ${s.node.conntrackAccounting.enabled ? 'on' : 'OFF'} (${s.node.conntrackAccounting.detail})`,
  );
  if (s.node.conntrackTimeout)
    lines.push(
      `conntrack timeouts (ShortLived): ${s.node.conntrackTimeout.supported ? 'supported' : `DEGRADED: ${s.node.conntrackTimeout.detail}`}`,
    );
  if (s.node.flowtableDeviceUpdate && !s.node.flowtableDeviceUpdate.supported)
    lines.push(`flowtable devices: DEGRADED: ${s.node.flowtableDeviceUpdate.detail}`);
  if (s.node.kubeProxyMode)
    lines.push(`kube-proxy: ${s.node.kubeProxyMode} (${KUBE_PROXY_MEANING[s.node.kubeProxyMode]})`);
  const devices =
    s.node.mode === 'degraded' ? 'n/a (degraded)' : s.devices.length > 0 ? s.devices.join(', ') : '(none)';
  lines.push(`table: ${s.table}; devices: ${devices}`);
  for (const f of s.otherFlowtables) lines.push(`other flowtable: ${flowtableText(f)}: ${OTHER_FLOWTABLE_DETAIL}`);
  const ls = s.lastSync;
  lines.push(
    `last sync: ${ls ? `${ls.at} ${ls.kind} ${ls.ok ? 'ok' : `FAILED: ${ls.error ?? ''}`} (${ls.durationMs} ms)` : 'none yet'}`,
  );
  lines.push(`services (${s.services.length}):`);
  for (const svc of s.services) {
    const np = svc.nodePorts.length > 0 ? ` nodePorts ${svc.nodePorts.join(',')}` : '';
    if (svc.hint === 'ShortLived') {
      const n =
        svc.conntrackEntries === undefined || svc.conntrackEntries === null
          ? 'conntrack entries: unknown'
          : `conntrack entries now: ${svc.conntrackEntries}`;
      lines.push(
        `  ${svc.service}  ${svc.addresses.join(',')}  ${svc.ports.join(',')}${np}  ShortLived: conntrack timeout ${svc.timeoutSeconds ?? '?'}s  ${n}`,
      );
      continue;
    }
    const off =
      svc.offloadedNow === undefined || svc.offloadedNow === null
        ? 'offloaded: unknown'
        : `offloaded now: ${svc.offloadedNow}`;
    lines.push(
      `  ${svc.service}  ${svc.addresses.join(',')}  ${svc.ports.join(',')}${np}  after ${svc.threshold} packets  ${off}`,
    );
    for (const reason of ['ipvs', 'local-address'] as const) {
      const ports = (svc.notOffloaded ?? []).filter((b) => b.reason === reason);
      if (ports.length > 0)
        lines.push(`    not offloaded: ${ports.map(bypassText).join(', ')}: ${reason}: ${BYPASS_DETAIL[reason]}`);
    }
  }
  if (s.invalid.length > 0) {
    lines.push(`not programmed (${s.invalid.length}):`);
    for (const i of s.invalid) lines.push(`  ${i.service}  ${i.code}: ${i.reason}`);
  }
  return `${lines.join('\n')}\n`;
}
