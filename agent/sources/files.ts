/**
 * Hinted Services from a directory of manifests: the embedded default, no cluster needed.
 *
 * `*.yaml`, `*.yml` and `*.json` files, multi-document, re-read when the directory changes
 * (watched, and polled as a fallback; ConfigMap volumes swap a `..data` symlink, so dotfiles
 * are skipped). No webhook stands in front of these files, so each Service goes through the
 * same api/ defaulting and validation the webhook runs. A rejected document is logged once
 * with its reason and is not programmed; the rest still are.
 */
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import type { Logger } from 'pino';
import { admit } from '../../api/index.ts';
import { FlowhintError, errorMessage, type ErrorCode } from '../../lib/errors.ts';
import { watchDirs, type DirWatch } from '../../lib/dir-watch.ts';
import { objectKey, type Source, type SourceEvent, type SourceSink } from './source.ts';

export interface Rejection {
  readonly file: string;
  readonly document: number;
  readonly key: string | undefined;
  /** A stable code: api/ validation's, or FH_MANIFEST_* for what is not a readable Service. */
  readonly code: ErrorCode;
  readonly reason: string;
}

export interface DirectoryRead {
  /** namespace/name -> the defaulted, validated Service. */
  readonly services: Map<string, unknown>;
  readonly rejected: Rejection[];
  /** Documents that are not core/v1 Services (ignored). */
  readonly ignored: number;
}

const MANIFEST = /\.(ya?ml|json)$/i;

function isService(doc: unknown): boolean {
  const d = doc as { apiVersion?: unknown; kind?: unknown } | null;
  return typeof d === 'object' && d !== null && d.apiVersion === 'v1' && d.kind === 'Service';
}

/** Parse one file's text into accepted Services and rejections (pure). */
export function parseManifests(
  file: string,
  text: string,
): { services: Array<[string, unknown]>; rejected: Rejection[]; ignored: number } {
  const services: Array<[string, unknown]> = [];
  const rejected: Rejection[] = [];
  let ignored = 0;
  let docs: unknown[];
  try {
    docs = loadAll(text);
  } catch (err) {
    return {
      services,
      rejected: [
        {
          file,
          document: 0,
          key: undefined,
          code: 'FH_MANIFEST_UNPARSABLE',
          reason: `not valid YAML/JSON: ${errorMessage(err).split('\n')[0]}`,
        },
      ],
      ignored,
    };
  }
  // `kind: List` (as `kubectl get -o yaml` writes) contributes its items.
  const flat = docs.flatMap((d) => {
    const list = d as { kind?: unknown; items?: unknown } | null;
    return list && list.kind === 'List' && Array.isArray(list.items) ? (list.items as unknown[]) : [d];
  });
  flat.forEach((doc, i) => {
    if (doc === null || doc === undefined) return;
    if (!isService(doc)) {
      ignored += 1;
      return;
    }
    const key = objectKey(doc);
    if (!key) {
      rejected.push({ file, document: i, key, code: 'FH_MANIFEST_UNNAMED', reason: 'metadata.name is required' });
      return;
    }
    const admitted = admit(doc);
    if (!admitted.ok) {
      rejected.push({ file, document: i, key, code: admitted.code, reason: admitted.reason });
      return;
    }
    services.push([key, admitted.object]);
  });
  return { services, rejected, ignored };
}

export async function readServicesDir(dir: string): Promise<DirectoryRead> {
  const names = (await readdir(dir)).filter((n) => !n.startsWith('.') && MANIFEST.test(n)).sort();
  const services = new Map<string, unknown>();
  const rejected: Rejection[] = [];
  let ignored = 0;
  for (const name of names) {
    const file = join(dir, name);
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      // Removed between readdir and read, or a directory named *.yaml.
      rejected.push({ file, document: 0, key: undefined, code: 'FH_MANIFEST_UNREADABLE', reason: errorMessage(err) });
      continue;
    }
    const r = parseManifests(file, text);
    for (const [key, obj] of r.services) {
      if (services.has(key))
        rejected.push({
          file,
          document: -1,
          key,
          code: 'FH_MANIFEST_DUPLICATE',
          reason: `duplicate Service ${key}: an earlier file defines it; this one is ignored`,
        });
      else services.set(key, obj);
    }
    rejected.push(...r.rejected);
    ignored += r.ignored;
  }
  return { services, rejected, ignored };
}

export interface FileSourceOptions {
  dir: string;
  logger: Logger;
  pollMs?: number;
}

export class FileSource implements Source {
  readonly name = 'files';
  private readonly o: FileSourceOptions;
  private current = new Map<string, string>();
  private reported = new Set<string>();
  private refusedKeys = new Set<string>();
  private watcher: DirWatch | undefined;
  private chain: Promise<void> = Promise.resolve();
  private sink: SourceSink | undefined;

  constructor(o: FileSourceOptions) {
    this.o = o;
  }

  async start(sink: SourceSink): Promise<void> {
    this.sink = sink;
    // An unreadable directory at start-up is a failed start, not an empty set of Services.
    const first = await readServicesDir(this.o.dir).catch((err: unknown) => {
      throw new FlowhintError(
        'FH_SERVICES_DIR_UNREADABLE',
        `cannot read --services-dir ${this.o.dir}: ${errorMessage(err)}`,
      );
    });
    this.report(first);
    sink.synced();
    this.watcher = watchDirs([this.o.dir], () => void this.rescan(), {
      pollMs: this.o.pollMs ?? 2_000,
      logger: this.o.logger,
      what: 'services-dir',
    });
  }

  async stop(): Promise<void> {
    this.watcher?.stop();
    await this.chain;
  }

  /** Re-read the directory and report what changed. Serialised. */
  rescan(): Promise<void> {
    this.chain = this.chain.then(() => this.rescanOnce());
    return this.chain;
  }

  private async rescanOnce(): Promise<void> {
    let read: DirectoryRead;
    try {
      read = await readServicesDir(this.o.dir);
    } catch (err) {
      // Keep what is programmed: an unreadable directory is not an empty one.
      this.o.logger.error(
        { dir: this.o.dir, err: errorMessage(err) },
        'cannot read services-dir; keeping the current Services',
      );
      return;
    }
    this.report(read);
  }

  /** What changed since the last read: rejections logged once, events, then refusals. */
  private report(read: DirectoryRead): void {
    // Rejections that name no refused Service are logged here; the sink hears (and logs) the others.
    const handedOver = (r: Rejection) =>
      r.key !== undefined && !read.services.has(r.key) && this.sink?.refused !== undefined;
    const nowReported = new Set<string>();
    for (const r of read.rejected) {
      const id = `${r.file}#${r.document}:${r.reason}`;
      nowReported.add(id);
      if (this.reported.has(id) || handedOver(r)) continue;
      this.o.logger.warn(
        { file: r.file, document: r.document, service: r.key, code: r.code, reason: r.reason },
        'manifest rejected; not programmed',
      );
    }
    this.reported = nowReported;
    const events: SourceEvent[] = [];
    const next = new Map<string, string>();
    for (const [key, obj] of read.services) {
      const text = JSON.stringify(obj);
      next.set(key, text);
      if (this.current.get(key) !== text) events.push({ type: 'upsert', key, object: obj });
    }
    for (const key of this.current.keys()) if (!next.has(key)) events.push({ type: 'delete', key });
    this.current = next;
    if (events.length > 0) this.sink?.events(events);
    // Refusals after the events: a Service that was programmed and is now refused is first
    // deleted (which forgets any refusal), then refused, and so stays listed as refused.
    const refusedNow = new Set<string>();
    for (const r of read.rejected) {
      if (r.key === undefined || read.services.has(r.key)) continue;
      refusedNow.add(r.key);
      this.sink?.refused?.(r.key, { code: r.code, reason: r.reason, where: `${r.file}#${r.document}` });
    }
    for (const key of this.refusedKeys) if (!refusedNow.has(key)) this.sink?.refused?.(key, undefined);
    this.refusedKeys = refusedNow;
  }
}
