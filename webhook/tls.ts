/**
 * Serving-certificate rotation without a restart.
 *
 * Kubernetes updates Secret volumes by writing a new timestamped directory and swapping the
 * `..data` symlink, so a watch on the file itself misses the change. We watch the directory
 * that holds the files (and the key's, if elsewhere) and also poll, then re-read both files.
 * A pair is swapped in with `server.setSecureContext` only if it is new and the key matches
 * the certificate; a half-written pair keeps the previous one and is retried on the next tick.
 */
import { X509Certificate, createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { createSecureContext } from 'node:tls';
import type { Logger } from 'pino';
import { FlowhintError, errorMessage } from '../lib/errors.ts';
import { watchDirs, type DirWatch } from '../lib/dir-watch.ts';
import type { TlsMaterial } from './app.ts';

export interface CertReloaderOptions {
  certFile: string;
  keyFile: string;
  /** Called with a verified new pair. */
  apply: (material: TlsMaterial) => void;
  onResult?: (result: 'ok' | 'error') => void;
  logger: Logger;
  pollMs?: number;
}

export async function loadTlsMaterial(certFile: string, keyFile: string): Promise<TlsMaterial> {
  let cert: Buffer;
  let key: Buffer;
  try {
    [cert, key] = await Promise.all([readFile(certFile), readFile(keyFile)]);
  } catch (err) {
    throw new FlowhintError(
      'FH_TLS_UNREADABLE',
      `cannot read TLS material (${certFile}, ${keyFile}): ${errorMessage(err)}; mount the serving Secret or run \`flowhint certs\``,
      { cause: err },
    );
  }
  try {
    createSecureContext({ cert, key });
  } catch (err) {
    throw new FlowhintError(
      'FH_TLS_INVALID',
      `TLS certificate and key do not form a usable pair: ${errorMessage(err)}`,
      { cause: err },
    );
  }
  return { cert, key };
}

/** The serving certificate's notAfter, in seconds since the epoch (the first certificate of the PEM: the leaf). */
export function certificateExpiry(cert: string | Buffer): number {
  return Date.parse(new X509Certificate(cert).validTo) / 1000;
}

function fingerprint(m: TlsMaterial): string {
  return createHash('sha256').update(m.cert).update('\0').update(m.key).digest('hex');
}

export class CertReloader {
  private readonly o: CertReloaderOptions;
  private current = '';
  private watcher: DirWatch | undefined;
  private running: Promise<void> = Promise.resolve();

  constructor(options: CertReloaderOptions) {
    this.o = options;
  }

  /** Record the pair already being served, so that the first check does not re-apply it. */
  seed(material: TlsMaterial): void {
    this.current = fingerprint(material);
  }

  start(): void {
    this.watcher = watchDirs([dirname(this.o.certFile), dirname(this.o.keyFile)], () => void this.check(), {
      pollMs: this.o.pollMs ?? 10_000,
      logger: this.o.logger,
      what: 'certificate directory',
    });
  }

  stop(): void {
    this.watcher?.stop();
  }

  /** Re-read the files; apply them if they are a new, valid pair. Serialised. */
  check(): Promise<void> {
    this.running = this.running.then(() => this.checkOnce());
    return this.running;
  }

  private async checkOnce(): Promise<void> {
    let material: TlsMaterial;
    try {
      material = await loadTlsMaterial(this.o.certFile, this.o.keyFile);
    } catch (err) {
      this.o.onResult?.('error');
      this.o.logger.warn(
        { code: (err as FlowhintError).code, err: errorMessage(err) },
        'certificate reload failed; keeping the previous certificate',
      );
      return;
    }
    const fp = fingerprint(material);
    if (fp === this.current) return;
    try {
      this.o.apply(material);
    } catch (err) {
      this.o.onResult?.('error');
      this.o.logger.warn({ err: errorMessage(err) }, 'certificate swap failed; keeping the previous certificate');
      return;
    }
    this.current = fp;
    this.o.onResult?.('ok');
    this.o.logger.info({ fingerprint: fp.slice(0, 16) }, 'serving certificate reloaded');
  }
}
