/**
 * Where hinted Services come from. A source reports objects by `namespace/name`; the agent
 * re-checks every one with the api/ reader before programming it.
 */
import { serviceKey } from '../../api/index.ts';

export type SourceEvent =
  | { readonly type: 'upsert'; readonly key: string; readonly object: unknown }
  | { readonly type: 'delete'; readonly key: string };

export interface SourceSink {
  /** Changes, in order. A source may batch them. */
  events(events: readonly SourceEvent[]): void;
  /** The source has delivered its complete initial state (first list, or first directory read). */
  synced(): void;
  /** The source cannot deliver its initial state (and was asked to fail fast): start-up fails. */
  failed?(err: Error): void;
  /**
   * A Service the source itself refused (the file source validates, having no webhook in
   * front of it); `undefined` code clears an earlier refusal for that key.
   */
  refused?(key: string, refusal: { code: string; reason: string; where?: string } | undefined): void;
}

export interface Source {
  readonly name: string;
  start(sink: SourceSink): Promise<void>;
  stop(): Promise<void>;
}

/** api/'s `namespace/name` of a named object; undefined when it has no name. */
export function objectKey(o: unknown): string | undefined {
  const meta = (o as { metadata?: { namespace?: unknown; name?: unknown } } | null)?.metadata;
  if (typeof meta?.name !== 'string' || meta.name.length === 0) return undefined;
  return serviceKey({ namespace: typeof meta.namespace === 'string' ? meta.namespace : null, name: meta.name });
}
