/**
 * A rendered Pod spec, translated to an OCI runtime config (`config.json`) as the kubelet
 * and containerd's CRI plugin would, field by field, so the tests can run our containers
 * with a real OCI runtime (runc) under the manifests' own security context and limits.
 * Test code: a model of what a node does, not a Kubernetes implementation.
 *
 * What each field becomes (containerd 1.6's CRI plugin, `pkg/cri/opts/spec*.go`, and the
 * kubelet's `kuberuntime`, as their code reads; facts copied, not code):
 * - user: `runAsUser`/`runAsGroup` (container over Pod), else the image's `User`;
 *   `runAsNonRoot` refuses uid 0 as the kubelet does.
 * - capabilities: containerd's default set, minus `drop` (`ALL`: all), plus `add`; a non-root
 *   process keeps them only in its bounding set (no ambient capabilities).
 * - `allowPrivilegeEscalation: false`: `noNewPrivileges`; `readOnlyRootFilesystem`: a
 *   read-only root; `privileged: true` is refused (no manifest of ours asks for it).
 * - `seccompProfile: RuntimeDefault`: the default profile the runtime ships. containerd's is
 *   built in; the closest file here is containers-common's `/usr/share/containers/seccomp.json`
 *   (the default of CRI-O and Podman, the same allow-list design), translated for amd64 and
 *   the container's capabilities by `seccompFor`.
 * - containerd's default mounts (`/proc`, `/dev`, `/dev/pts`, `/dev/shm`, `/dev/mqueue`, `/sys`
 *   read-only, the cgroup file system read-only) and its masked and read-only `/proc` and
 *   `/sys` paths.
 * - `hostNetwork`: the node's network namespace (a scratch netns stands for it, and its UTS
 *   name is the node's); otherwise the Pod sandbox's (one the test made, as CNI would).
 * - volumes: `hostPath` (created for `DirectoryOrCreate`), `emptyDir`, `secret` (files the
 *   test wrote), each a bind mount; `readOnly` mounts read-only.
 * - `resources.limits.memory`: the memory cgroup's limit; `requests.cpu`: CPU shares
 *   (the kubelet's milli-CPU to shares); `requests.memory` has no runtime effect.
 * - env: `value`, and `valueFrom.fieldRef` from the Pod's fields; `$(VAR)` in args expanded
 *   from the container's env as the kubelet does; `KUBERNETES_SERVICE_HOST`/`PORT` and the
 *   ServiceAccount files under /var/run/secrets/kubernetes.io/serviceaccount unless
 *   `automountServiceAccountToken: false`.
 * - scheduling and kubelet-only fields (nodeSelector, tolerations, affinity, probes, ports,
 *   terminationGracePeriodSeconds, ...) have no runtime config: they are returned for the
 *   test to act on or listed as known.
 *
 * Any other field throws, by name: a new manifest field cannot slip past the test.
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';

type Obj = Record<string, unknown>;
export interface Probe {
  path: string;
  port: number;
  scheme: 'HTTP' | 'HTTPS';
}

export interface ImageConfig {
  Entrypoint: string[];
  Cmd?: string[] | null;
  Env?: string[] | null;
  User?: string | null;
  WorkingDir?: string | null;
}

export interface PodContext {
  /** The container's root file system (the image, mounted). */
  rootfs: string;
  image: ImageConfig;
  /** The network namespace: the node's for hostNetwork Pods, else the sandbox's. */
  netnsPath: string;
  /** Values of the fieldRef paths the Pod uses (`spec.nodeName`, `status.hostIP`, ...). */
  fields: Record<string, string>;
  /** Where each hostPath lives on the test's host (node path -> directory); /proc and /sys are the host's. */
  hostPaths: Record<string, string>;
  /** Directory holding each Secret's files, by Secret name. */
  secrets: Record<string, string>;
  /** A directory for emptyDir volumes. */
  scratch: string;
  /** The ServiceAccount files' directory and the API server's address, for in-cluster config. */
  serviceAccount?: { dir: string; host: string; port: number };
  /** cgroup path for the container. */
  cgroupsPath: string;
  /** The runtime's default seccomp profile file (containers-common's format). */
  seccompProfile?: string;
}

export interface Translated {
  spec: Obj;
  probes: { readiness?: Probe; liveness?: Probe };
  graceSeconds: number;
  memoryLimitBytes: number | undefined;
}

/** Fields with no runtime config (scheduling, kubelet-only); translated fields are handled below. */
const POD_FIELDS = new Set([
  'serviceAccountName',
  'automountServiceAccountToken',
  'hostNetwork',
  'dnsPolicy',
  'priorityClassName',
  'nodeSelector',
  'tolerations',
  'affinity',
  'terminationGracePeriodSeconds',
  'securityContext',
  'containers',
  'volumes',
]);
const CONTAINER_FIELDS = new Set([
  'name',
  'image',
  'command',
  'args',
  'env',
  'ports',
  'readinessProbe',
  'livenessProbe',
  'resources',
  'securityContext',
  'volumeMounts',
]);
const POD_SECURITY = new Set(['runAsNonRoot', 'runAsUser', 'runAsGroup', 'seccompProfile']);
const CONTAINER_SECURITY = new Set([
  'runAsUser',
  'runAsGroup',
  'runAsNonRoot',
  'privileged',
  'allowPrivilegeEscalation',
  'readOnlyRootFilesystem',
  'seccompProfile',
  'capabilities',
]);

/** containerd's default capabilities for a container (pkg/cri/opts, `DefaultCapabilities`). */
export const DEFAULT_CAPS = [
  'CAP_CHOWN',
  'CAP_DAC_OVERRIDE',
  'CAP_FSETID',
  'CAP_FOWNER',
  'CAP_MKNOD',
  'CAP_NET_RAW',
  'CAP_SETGID',
  'CAP_SETUID',
  'CAP_SETFCAP',
  'CAP_SETPCAP',
  'CAP_NET_BIND_SERVICE',
  'CAP_SYS_CHROOT',
  'CAP_KILL',
  'CAP_AUDIT_WRITE',
];
/** containerd's default masked and read-only paths. */
export const MASKED_PATHS = [
  '/proc/acpi',
  '/proc/asound',
  '/proc/kcore',
  '/proc/keys',
  '/proc/latency_stats',
  '/proc/timer_list',
  '/proc/timer_stats',
  '/proc/sched_debug',
  '/proc/scsi',
  '/sys/firmware',
  '/sys/devices/virtual/powercap',
];
export const READONLY_PATHS = ['/proc/bus', '/proc/fs', '/proc/irq', '/proc/sys', '/proc/sysrq-trigger'];

/** A scalar field as text (anything else as JSON, so a wrong shape shows in the error). */
const str = (x: unknown): string => (typeof x === 'string' || typeof x === 'number' ? String(x) : JSON.stringify(x));

function known(o: unknown, allowed: Set<string>, where: string): Obj {
  const obj = (o ?? {}) as Obj;
  for (const k of Object.keys(obj)) if (!allowed.has(k)) throw new Error(`untranslated field: ${where}.${k}`);
  return obj;
}

/** A Kubernetes quantity in bytes (`384Mi`, `1Gi`, `500M`, `1024`). */
export function bytes(q: string): number {
  const m = /^(\d+)(Ki|Mi|Gi|K|M|G)?$/.exec(q);
  if (!m) throw new Error(`untranslated quantity: ${q}`);
  const unit = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, K: 1e3, M: 1e6, G: 1e9 }[m[2] ?? ''] ?? 1;
  return Number(m[1]) * unit;
}

/** The kubelet's CPU request to shares: milli-CPU * 1024 / 1000, at least 2. */
export function cpuShares(q: string): number {
  const m = /^(\d+)(m)?$/.exec(q);
  if (!m) throw new Error(`untranslated quantity: ${q}`);
  const milli = m[2] ? Number(m[1]) : Number(m[1]) * 1000;
  return Math.max(2, Math.floor((milli * 1024) / 1000));
}

/** `$(VAR)` expanded from env, as the kubelet expands command and args ($$ escapes). */
export function expand(s: string, env: Record<string, string>): string {
  return s.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (all, name?: string) =>
    all === '$$' ? '$' : name !== undefined && name in env ? env[name]! : all,
  );
}

/** The runtime's default seccomp profile, translated to OCI for amd64 and these capabilities. */
export function seccompFor(file: string, caps: readonly string[]): Obj {
  const p = JSON.parse(readFileSync(file, 'utf8')) as {
    defaultAction: string;
    defaultErrnoRet?: number;
    archMap: Array<{ architecture: string; subArchitectures: string[] }>;
    syscalls: Array<{
      names: string[];
      action: string;
      args?: unknown[] | null;
      errnoRet?: number;
      includes?: { caps?: string[]; arches?: string[] };
      excludes?: { caps?: string[]; arches?: string[] };
    }>;
  };
  const arch = p.archMap.find((a) => a.architecture === 'SCMP_ARCH_X86_64')!;
  const has = (c: string) => caps.includes(c);
  const applies = (s: (typeof p.syscalls)[number]) =>
    (s.includes?.arches ?? ['amd64']).includes('amd64') &&
    (s.includes?.caps ?? []).every(has) &&
    !(s.excludes?.arches ?? []).includes('amd64') &&
    !(s.excludes?.caps ?? []).some(has);
  return {
    defaultAction: p.defaultAction,
    ...(p.defaultErrnoRet !== undefined ? { defaultErrnoRet: p.defaultErrnoRet } : {}),
    architectures: [arch.architecture, ...arch.subArchitectures],
    syscalls: p.syscalls.filter(applies).map((s) => ({
      names: s.names,
      action: s.action,
      ...(s.args?.length ? { args: s.args } : {}),
      ...(s.errnoRet !== undefined ? { errnoRet: s.errnoRet } : {}),
    })),
  };
}

function probe(p: unknown, ports: Map<string, number>, where: string): Probe | undefined {
  if (!p) return undefined;
  const o = known(p, new Set(['httpGet', 'periodSeconds', 'initialDelaySeconds', 'failureThreshold']), where);
  const g = known(o.httpGet, new Set(['path', 'port', 'scheme']), `${where}.httpGet`);
  const port = typeof g.port === 'number' ? g.port : ports.get(String(g.port));
  if (port === undefined) throw new Error(`${where}: no port ${String(g.port)}`);
  return { path: String(g.path), port, scheme: g.scheme === 'HTTPS' ? 'HTTPS' : 'HTTP' };
}

/** The OCI config for one container of a Pod spec (`spec.template.spec`). */
export function translatePod(pod: Obj, containerName: string, ctx: PodContext): Translated {
  known(pod, POD_FIELDS, 'spec');
  const podSec = known(pod.securityContext, POD_SECURITY, 'spec.securityContext');
  const containers = pod.containers as Obj[];
  const i = containers.findIndex((c) => c.name === containerName);
  if (i < 0) throw new Error(`no container ${containerName}`);
  const where = `spec.containers[${i}]`;
  const c = known(containers[i], CONTAINER_FIELDS, where);
  const sec = known(c.securityContext, CONTAINER_SECURITY, `${where}.securityContext`);
  if (sec.privileged === true) throw new Error(`${where}.securityContext.privileged: not modelled`);

  // User.
  const [imgUser, imgGroup] = (ctx.image.User || '0').split(':');
  const uid = Number(sec.runAsUser ?? podSec.runAsUser ?? imgUser);
  const gid = Number(sec.runAsGroup ?? podSec.runAsGroup ?? imgGroup ?? 0);
  if (!Number.isInteger(uid)) throw new Error(`user ${String(imgUser)}: only numeric users are modelled`);
  if ((sec.runAsNonRoot ?? podSec.runAsNonRoot) === true && uid === 0)
    throw new Error('runAsNonRoot: the container would run as root (the kubelet refuses to start it)');

  // Capabilities.
  const capsSpec = known(sec.capabilities, new Set(['add', 'drop']), `${where}.securityContext.capabilities`);
  const drop = ((capsSpec.drop as string[] | undefined) ?? []).map((x) => `CAP_${x}`);
  const add = ((capsSpec.add as string[] | undefined) ?? []).map((x) => `CAP_${x}`);
  const caps = [...DEFAULT_CAPS.filter((x) => !drop.includes('CAP_ALL') && !drop.includes(x)), ...add];
  const capSet = uid === 0 ? caps : [];
  const capabilities = { bounding: caps, effective: capSet, permitted: capSet };

  // Env: the image's, then the container's (fieldRef from the Pod's fields), then the kubelet's.
  const env: Record<string, string> = {};
  for (const e of ctx.image.Env ?? []) env[e.slice(0, e.indexOf('='))] = e.slice(e.indexOf('=') + 1);
  const automount = pod.automountServiceAccountToken !== false;
  if (automount && ctx.serviceAccount) {
    env.KUBERNETES_SERVICE_HOST = ctx.serviceAccount.host;
    env.KUBERNETES_SERVICE_PORT = String(ctx.serviceAccount.port);
  }
  for (const [n, e] of ((c.env as Obj[] | undefined) ?? []).entries()) {
    const v = known(e, new Set(['name', 'value', 'valueFrom']), `${where}.env[${n}]`);
    if (v.valueFrom) {
      const from = known(v.valueFrom, new Set(['fieldRef']), `${where}.env[${n}].valueFrom`);
      const path = String(
        known(from.fieldRef, new Set(['fieldPath']), `${where}.env[${n}].valueFrom.fieldRef`).fieldPath,
      );
      if (!(path in ctx.fields)) throw new Error(`untranslated fieldRef: ${path}`);
      env[String(v.name)] = ctx.fields[path]!;
    } else env[String(v.name)] = expand(str(v.value ?? ''), env);
  }
  const args = [
    ...((c.command as string[] | undefined) ?? ctx.image.Entrypoint),
    ...((c.args as string[] | undefined) ?? (c.command ? [] : (ctx.image.Cmd ?? []))),
  ].map((a) => expand(a, env));

  // Mounts: containerd's defaults, then the volumes.
  const mounts: Obj[] = [
    { destination: '/proc', type: 'proc', source: 'proc', options: ['nosuid', 'noexec', 'nodev'] },
    {
      destination: '/dev',
      type: 'tmpfs',
      source: 'tmpfs',
      options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'],
    },
    {
      destination: '/dev/pts',
      type: 'devpts',
      source: 'devpts',
      options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620', 'gid=5'],
    },
    {
      destination: '/dev/shm',
      type: 'tmpfs',
      source: 'shm',
      options: ['nosuid', 'noexec', 'nodev', 'mode=1777', 'size=65536k'],
    },
    { destination: '/dev/mqueue', type: 'mqueue', source: 'mqueue', options: ['nosuid', 'noexec', 'nodev'] },
    { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', 'ro'] },
    {
      destination: '/sys/fs/cgroup',
      type: 'cgroup',
      source: 'cgroup',
      options: ['nosuid', 'noexec', 'nodev', 'relatime', 'ro'],
    },
  ];
  const volumes = new Map<string, { source: string; readOnly: boolean }>();
  for (const [n, vol] of ((pod.volumes as Obj[] | undefined) ?? []).entries()) {
    const v = known(vol, new Set(['name', 'hostPath', 'emptyDir', 'secret']), `spec.volumes[${n}]`);
    if (v.hostPath) {
      const h = known(v.hostPath, new Set(['path', 'type']), `spec.volumes[${n}].hostPath`);
      // The node's kernel interfaces (/proc, /sys) are the node's own; other paths need a stand-in.
      const source =
        ctx.hostPaths[String(h.path)] ?? (/^\/(proc|sys)\//.test(String(h.path)) ? String(h.path) : undefined);
      if (!source) throw new Error(`no stand-in for hostPath ${String(h.path)}`);
      if (h.type === 'DirectoryOrCreate') mkdirSync(source, { recursive: true });
      else if (h.type !== undefined && h.type !== 'Directory')
        throw new Error(`untranslated hostPath type ${str(h.type)}`);
      if (!existsSync(source))
        throw new Error(`hostPath ${String(h.path)} does not exist (the kubelet would not start it)`);
      volumes.set(String(v.name), { source, readOnly: false });
    } else if (v.emptyDir) {
      known(v.emptyDir, new Set([]), `spec.volumes[${n}].emptyDir`);
      const source = `${ctx.scratch}/${String(v.name)}`;
      mkdirSync(source, { recursive: true, mode: 0o777 });
      volumes.set(String(v.name), { source, readOnly: false });
    } else if (v.secret) {
      const s = known(v.secret, new Set(['secretName']), `spec.volumes[${n}].secret`);
      const source = ctx.secrets[String(s.secretName)];
      if (!source) throw new Error(`no Secret ${String(s.secretName)}`);
      // The kubelet projects Secrets read-only whatever the mount says.
      volumes.set(String(v.name), { source, readOnly: true });
    } else throw new Error(`untranslated volume source: spec.volumes[${n}]`);
  }
  for (const [n, vm] of ((c.volumeMounts as Obj[] | undefined) ?? []).entries()) {
    const m = known(vm, new Set(['name', 'mountPath', 'readOnly']), `${where}.volumeMounts[${n}]`);
    const v = volumes.get(String(m.name));
    if (!v) throw new Error(`${where}.volumeMounts[${n}]: no volume ${String(m.name)}`);
    const ro = v.readOnly || m.readOnly === true;
    mounts.push({
      destination: m.mountPath,
      type: 'bind',
      source: v.source,
      options: ['rbind', 'rprivate', ro ? 'ro' : 'rw'],
    });
  }
  if (automount && ctx.serviceAccount)
    mounts.push({
      destination: '/var/run/secrets/kubernetes.io/serviceaccount',
      type: 'bind',
      source: ctx.serviceAccount.dir,
      options: ['rbind', 'rprivate', 'ro'],
    });

  // Resources.
  const res = known(c.resources, new Set(['requests', 'limits']), `${where}.resources`);
  const limits = known(res.limits, new Set(['memory', 'cpu']), `${where}.resources.limits`);
  const requests = known(res.requests, new Set(['memory', 'cpu']), `${where}.resources.requests`);
  const memoryLimitBytes = limits.memory ? bytes(str(limits.memory)) : undefined;
  const resources: Obj = {
    ...(memoryLimitBytes ? { memory: { limit: memoryLimitBytes, swap: memoryLimitBytes } } : {}),
    ...(requests.cpu ? { cpu: { shares: cpuShares(str(requests.cpu)) } } : {}),
  };
  if (limits.cpu) throw new Error(`${where}.resources.limits.cpu: not modelled`);

  // Seccomp.
  const profile = (sec.seccompProfile ?? podSec.seccompProfile) as Obj | undefined;
  let seccomp: Obj | undefined;
  if (profile) {
    if (profile.type !== 'RuntimeDefault') throw new Error(`untranslated seccompProfile ${String(profile.type)}`);
    if (!ctx.seccompProfile) throw new Error('seccompProfile RuntimeDefault: no default profile given');
    seccomp = seccompFor(ctx.seccompProfile, caps);
  }

  // Ports and probes: kubelet-side.
  const ports = new Map<string, number>();
  for (const [n, p] of ((c.ports as Obj[] | undefined) ?? []).entries()) {
    const o = known(p, new Set(['name', 'containerPort', 'hostPort', 'protocol']), `${where}.ports[${n}]`);
    if (o.name) ports.set(str(o.name), Number(o.containerPort));
  }
  const readiness = probe(c.readinessProbe, ports, `${where}.readinessProbe`);
  const liveness = probe(c.livenessProbe, ports, `${where}.livenessProbe`);

  const hostNetwork = pod.hostNetwork === true;
  const spec: Obj = {
    ociVersion: '1.0.2',
    process: {
      terminal: false,
      user: { uid, gid },
      args,
      env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
      cwd: ctx.image.WorkingDir || '/',
      capabilities,
      noNewPrivileges: sec.allowPrivilegeEscalation === false,
    },
    root: { path: ctx.rootfs, readonly: sec.readOnlyRootFilesystem === true },
    hostname: hostNetwork ? (ctx.fields['spec.nodeName'] ?? 'node') : (ctx.fields['metadata.name'] ?? 'pod'),
    mounts,
    linux: {
      namespaces: [
        { type: 'pid' },
        { type: 'ipc' },
        { type: 'uts' },
        { type: 'mount' },
        { type: 'network', path: ctx.netnsPath },
      ],
      cgroupsPath: ctx.cgroupsPath,
      resources,
      maskedPaths: MASKED_PATHS,
      readonlyPaths: READONLY_PATHS,
      ...(seccomp ? { seccomp } : {}),
    },
  };
  return {
    spec,
    probes: { ...(readiness ? { readiness } : {}), ...(liveness ? { liveness } : {}) },
    graceSeconds: Number(pod.terminationGracePeriodSeconds ?? 30),
    memoryLimitBytes,
  };
}
