/**
 * Request options for @kubernetes/client-node calls: a deadline (or any abort signal) on the
 * whole request, and the content type of a server-side apply. Shared by the agent's
 * informer and FlowhintNode writer and by `flowhint explain`.
 */
import { Observable, PatchStrategy, setHeaderOptions, type ConfigurationOptions } from '@kubernetes/client-node';

/** Options that abort the request (connect, headers and body) when `signal` fires. */
export function withSignal(signal: AbortSignal): ConfigurationOptions {
  return {
    middleware: [
      {
        pre: (ctx) => {
          ctx.setSignal(signal);
          return new Observable(Promise.resolve(ctx));
        },
        post: (res) => new Observable(Promise.resolve(res)),
      },
    ],
    middlewareMergeStrategy: 'append',
  };
}

/** Options that abort the request after `ms`. */
export function deadline(ms: number): ConfigurationOptions {
  return withSignal(AbortSignal.timeout(ms));
}

/**
 * A list that asks the API server for the objects' metadata only (PartialObjectMetadataList,
 * meta.k8s.io/v1, as client-go's metadata client asks), whole objects if it cannot: for a
 * caller that reads names and labels, a Node list without each Node's status and images.
 */
export const METADATA_LIST_ACCEPT = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json';

export function metadataOnly(options: ConfigurationOptions): ConfigurationOptions {
  return setHeaderOptions('Accept', METADATA_LIST_ACCEPT, options);
}

/** A server-side apply (`application/apply-patch+yaml`), aborted when `signal` fires. */
export function applyOptions(signal: AbortSignal): ConfigurationOptions {
  return setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply, withSignal(signal));
}
