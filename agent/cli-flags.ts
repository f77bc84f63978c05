/**
 * `flowhint agent`'s flags, declared once: the synopsis, each flag with what it does and its
 * default (for `--help`), and the zod schema that checks their values.
 */
import { z } from 'zod';
import { intFlag, netnsName, portFlag, type Flags } from '../lib/cli.ts';
import {
  DEFAULT_THRESHOLD,
  DEFAULT_TIMEOUT_SECONDS,
  THRESHOLD_MAX,
  TIMEOUT_MAX_SECONDS,
  TIMEOUT_MIN_SECONDS,
  canonicalTimeout,
  timeoutSeconds,
} from '../api/index.ts';
import { parseAddress, type Address } from './state/address.ts';
import { DEFAULT_CT_MARK, DEFAULT_SHORT_MARK, isMarkBit } from './nft/names.ts';
import { DEFAULT_STATE_DIR } from './report/status.ts';

export const AGENT_USAGE = `usage: flowhint agent [--services-dir DIR | --kubeconfig FILE] [--once] [--offload-after-packets ${DEFAULT_THRESHOLD}] [--short-lived-timeout ${DEFAULT_TIMEOUT_SECONDS}s]
    [--devices RE] [--exclude-devices RE] [--node-address IP…] [--metrics-port 9471] [--metrics-host 0.0.0.0]
    [--state-dir ${DEFAULT_STATE_DIR}] [--no-flowtable-counter] [--ct-mark-bit 0x${DEFAULT_CT_MARK.toString(16)}] [--short-lived-mark-bit 0x${DEFAULT_SHORT_MARK.toString(16)}] [--resync-seconds 3600] [--cleanup-on-exit] [--netns NAME]
    [--once-timeout 300] [--node-name NAME]
  Without --services-dir, Services come from the API server (in-cluster config, or KUBECONFIG),
  and the agent reports this node in its FlowhintNode (kubectl get flowhintnodes).
  --once syncs once and exits: 0 if the sync succeeded, 1 if it failed or did not finish within --once-timeout seconds.`;

function regex(name: string) {
  return z
    .string()
    .optional()
    .transform((s, ctx) => {
      if (s === undefined) return undefined;
      try {
        return new RegExp(s);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: `${name}: not a regular expression: ${(err as Error).message}` });
        return z.NEVER;
      }
    });
}

/** A conntrack mark bit flag: one of bits 0 to 30, in hex or decimal. */
function markBitFlag(flag: string, fallback: number) {
  return z
    .string()
    .default(`0x${fallback.toString(16)}`)
    .transform((v, ctx) => {
      const n = /^(0x[0-9a-f]{1,8}|[0-9]{1,10})$/i.test(v) ? Number(v) : NaN;
      if (!isMarkBit(n)) {
        ctx.addIssue({
          code: 'custom',
          message: `${flag}: ${JSON.stringify(v)} is not one of bits 0 to 30 of the conntrack mark (a power of two from 0x1 to 0x40000000), e.g. 0x${fallback.toString(16)}`,
        });
        return z.NEVER;
      }
      return n;
    });
}

export const AgentFlags = z
  .object({
    'services-dir': z.string().min(1).optional(),
    kubeconfig: z.string().min(1).optional(),
    once: z.boolean().default(false),
    'offload-after-packets': intFlag(0, THRESHOLD_MAX, DEFAULT_THRESHOLD),
    'short-lived-timeout': z
      .string()
      .default(`${DEFAULT_TIMEOUT_SECONDS}s`)
      .transform((v, ctx) => {
        const seconds = timeoutSeconds(canonicalTimeout(v));
        if (seconds === undefined) {
          ctx.addIssue({
            code: 'custom',
            message: `--short-lived-timeout: ${JSON.stringify(v)} is not a duration from ${TIMEOUT_MIN_SECONDS}s to ${TIMEOUT_MAX_SECONDS / 60}m, e.g. "5s"`,
          });
          return z.NEVER;
        }
        return seconds;
      }),
    devices: regex('--devices'),
    'exclude-devices': regex('--exclude-devices'),
    'node-address': z
      .array(z.string())
      .optional()
      .transform((xs, ctx) => {
        if (!xs) return undefined;
        const out: Address[] = [];
        for (const x of xs) {
          const a = parseAddress(x);
          if (!a) ctx.addIssue({ code: 'custom', message: `not an IP address: ${x}` });
          else out.push(a);
        }
        return out;
      }),
    'metrics-port': portFlag(9471),
    'metrics-host': z.string().default('0.0.0.0'),
    'state-dir': z.string().default(DEFAULT_STATE_DIR),
    'no-flowtable-counter': z.boolean().default(false),
    'ct-mark-bit': markBitFlag('--ct-mark-bit', DEFAULT_CT_MARK),
    'short-lived-mark-bit': markBitFlag('--short-lived-mark-bit', DEFAULT_SHORT_MARK),
    'resync-seconds': intFlag(1, 86_400, 3600),
    'cleanup-on-exit': z.boolean().default(false),
    'once-timeout': intFlag(1, 3600, 300),
    netns: netnsName,
    'node-name': z.string().min(1).optional(),
  })
  .refine((f) => f['ct-mark-bit'] !== f['short-lived-mark-bit'], {
    error: '--ct-mark-bit and --short-lived-mark-bit must be different bits',
  });

export const AGENT_FLAGS: Flags = {
  'services-dir': {
    type: 'string',
    value: 'DIR',
    help: 'read Services from YAML/JSON manifests in DIR instead of the API server',
  },
  kubeconfig: {
    type: 'string',
    value: 'FILE',
    help: 'the API server to watch (default: in-cluster, else KUBECONFIG or ~/.kube/config)',
  },
  once: { type: 'boolean', help: 'sync once and exit: 0 if the sync succeeded, 1 if not' },
  'offload-after-packets': {
    type: 'string',
    value: 'N',
    help: 'packets a LongLived connection carries before it is offloaded, unless its Service sets its own',
    default: String(DEFAULT_THRESHOLD),
  },
  'short-lived-timeout': {
    type: 'string',
    value: 'DURATION',
    help: 'conntrack timeout of ShortLived Services that set none',
    default: `${DEFAULT_TIMEOUT_SECONDS}s`,
  },
  devices: {
    type: 'string',
    value: 'RE',
    help: 'flowtable devices: interfaces whose names match (default: every oper-up, non-loopback interface)',
  },
  'exclude-devices': { type: 'string', value: 'RE', help: 'leave interfaces whose names match out of the flowtable' },
  'node-address': {
    type: 'string',
    multiple: true,
    value: 'IP',
    help: "this node's addresses for NodePorts (default: its global addresses)",
  },
  'metrics-port': {
    type: 'string',
    value: 'PORT',
    help: 'port of /metrics, /healthz and /readyz (0: any free port)',
    default: '9471',
  },
  'metrics-host': { type: 'string', value: 'ADDR', help: 'address the metrics port listens on', default: '0.0.0.0' },
  'state-dir': {
    type: 'string',
    value: 'DIR',
    help: 'where status.json is written for `flowhint status`',
    default: DEFAULT_STATE_DIR,
  },
  'no-flowtable-counter': {
    type: 'boolean',
    help: "create the flowtable without `counter` (offloaded flows' byte counts stop)",
  },
  'ct-mark-bit': {
    type: 'string',
    value: 'BIT',
    help: "the conntrack mark bit every hinted connection gets, the one the agent's conntrack dump filters on (one of bits 0 to 30)",
    default: `0x${DEFAULT_CT_MARK.toString(16)}`,
  },
  'short-lived-mark-bit': {
    type: 'string',
    value: 'BIT',
    help: 'the conntrack mark bit ShortLived connections get besides, which keeps them out of the forward test (one of bits 0 to 30)',
    default: `0x${DEFAULT_SHORT_MARK.toString(16)}`,
  },
  'resync-seconds': {
    type: 'string',
    value: 'SECONDS',
    help: 'interval of full resyncs, which repair drift',
    default: '3600',
  },
  'cleanup-on-exit': {
    type: 'boolean',
    help: 'delete the table when the agent stops (default: keep it, so offloaded connections continue)',
  },
  'once-timeout': {
    type: 'string',
    value: 'SECONDS',
    help: 'with --once: give up (exit 1) if the sync has not finished by then',
    default: '300',
  },
  netns: { type: 'string', value: 'NAME', help: 'program the named network namespace (ip netns) instead of the host' },
  'node-name': {
    type: 'string',
    value: 'NAME',
    help: "this node's name: its FlowhintNode's name and owner (default: $NODE_NAME, else the hostname)",
  },
};
