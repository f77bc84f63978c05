/**
 * Every error code flowhint reports, in one catalogue (after fastify's lib/errors.js): the
 * code is for machines, metrics and docs; `help` says what it means and what to do; `exit`
 * is the CLI's exit status when a command stops on it. docs/operations.md's "Error codes" table is this
 * catalogue (test/lib/errors.test.ts keeps them the same), and TypeScript refuses a code
 * that is not here.
 */

interface ErrorInfo {
  readonly help: string;
  /** Exit status of `flowhint <command>` when it stops on this error. */
  readonly exit: number;
}

export const ERRORS = {
  // A Service's hint (api/): the webhook's refusals, and why an agent does not program a Service.
  FH_SERVICE_UNREADABLE: {
    exit: 1,
    help: 'The object is not a Service flowhint can read (the message names the field); fix the manifest.',
  },
  FH_HINT_UNSUPPORTED: {
    exit: 1,
    help: 'The traffic-hint value is not one flowhint knows; use one of the values the message lists.',
  },
  FH_THRESHOLD_INVALID: {
    exit: 1,
    help: 'offload-after-packets is not a whole number in range; set it as the message says.',
  },
  FH_THRESHOLD_WITHOUT_HINT: {
    exit: 1,
    help: 'offload-after-packets without a LongLived hint; add the hint or remove the parameter.',
  },
  FH_TIMEOUT_INVALID: { exit: 1, help: 'conntrack-timeout is not a duration in range; set it as the message says.' },
  FH_TIMEOUT_WITHOUT_SHORTLIVED: {
    exit: 1,
    help: 'conntrack-timeout without a ShortLived hint; add the hint or remove the parameter.',
  },
  FH_NO_VIRTUAL_IP: {
    exit: 1,
    help: 'A headless or ExternalName Service has no virtual IP to accelerate; remove the hint.',
  },
  FH_LABEL_WITHOUT_HINT: {
    exit: 1,
    help: 'The mirror label is set without the annotation; remove the label (the webhook manages it).',
  },
  FH_LABEL_MISMATCH: {
    exit: 1,
    help: 'The mirror label differs from the annotation; remove the label (the webhook sets it).',
  },
  FH_NOT_HINTED: { exit: 1, help: 'The Service has no traffic-hint annotation; nothing to do.' },
  FH_NOT_ADMITTED: {
    exit: 1,
    help: 'The annotation is there but not the mirror label: the webhook never admitted it; run `flowhint backfill` or update the Service.',
  },
  // Manifests read by the agent's file source (--services-dir).
  FH_MANIFEST_UNREADABLE: { exit: 1, help: 'A manifest file could not be read; check its permissions.' },
  FH_MANIFEST_UNPARSABLE: { exit: 1, help: 'A manifest file is not valid YAML or JSON; fix it.' },
  FH_MANIFEST_UNNAMED: { exit: 1, help: 'A Service in a manifest has no metadata.name; name it.' },
  FH_MANIFEST_DUPLICATE: {
    exit: 1,
    help: 'Two manifests define the same namespace/name; the later file is ignored; remove one.',
  },
  // The webhook's HTTP answers to malformed requests.
  FH_BAD_REVIEW: {
    exit: 1,
    help: 'The body is not a v1 AdmissionReview with request.uid; set admissionReviewVersions: [v1].',
  },
  FH_MALFORMED_JSON: { exit: 1, help: 'The request body is not valid JSON.' },
  FH_NOT_JSON: { exit: 1, help: 'The content type is not application/json.' },
  FH_BODY_TOO_LARGE: { exit: 1, help: 'The request body exceeds 4 MiB.' },
  FH_BAD_REQUEST: { exit: 1, help: 'The request was refused by the HTTP layer (the message says why).' },
  FH_NOT_FOUND: { exit: 1, help: 'No such route; the webhook serves POST /mutate and POST /validate.' },
  FH_INTERNAL: { exit: 1, help: 'An unexpected error; the webhook log has the details.' },
  FH_TLS_UNREADABLE: {
    exit: 1,
    help: 'The TLS certificate or key cannot be read; mount the serving Secret or run `flowhint certs`.',
  },
  FH_TLS_INVALID: { exit: 1, help: 'The TLS certificate and key do not form a usable pair; reissue them.' },
  // The node agent and its tools.
  FH_NFT_MISSING: {
    exit: 1,
    help: 'The nft binary is not installed; install nftables (Debian: apt-get install nftables).',
  },
  FH_NFT_FAILED: {
    exit: 1,
    help: "nft refused a transaction or a listing; the message has nft's own words. The previous ruleset is kept and the agent retries.",
  },
  FH_IP_FAILED: { exit: 1, help: '`ip -j` failed; install iproute2.' },
  FH_AGENT_RUNNING: { exit: 1, help: "Another agent holds this node's lock (same --netns); stop it first." },
  FH_LISTEN_FAILED: {
    exit: 1,
    help: 'A port cannot be listened on (in use, or not allowed); pass a free one (--metrics-port, --port) or stop what holds it.',
  },
  FH_NO_KUBECONFIG: {
    exit: 1,
    help: 'No kubeconfig: not in a cluster and KUBECONFIG is unset; pass --kubeconfig, or --services-dir for the agent.',
  },
  FH_KUBECONFIG_INVALID: {
    exit: 1,
    help: 'The kubeconfig cannot be read or parsed; the message names the file and why.',
  },
  FH_API_UNREACHABLE: {
    exit: 1,
    help: 'The first list of Services from the API server failed (agent --once); check the kubeconfig and the server.',
  },
  FH_API_FAILED: {
    exit: 1,
    help: '`flowhint explain` could not read the Service from the API server (the message names the server and the cause); check the kubeconfig, the server, and that you may get Services in that namespace.',
  },
  FH_SERVICE_NOT_FOUND: {
    exit: 1,
    help: '`flowhint explain`: no such Service; check NAMESPACE/NAME (or --namespace).',
  },
  FH_SERVICES_DIR_UNREADABLE: {
    exit: 1,
    help: 'The --services-dir directory cannot be read; check the path and its permissions.',
  },
  FH_NETNS_MISSING: {
    exit: 1,
    help: 'The --netns network namespace does not exist (ip netns list); create it or fix the name.',
  },
  FH_ONCE_TIMEOUT: {
    exit: 1,
    help: 'agent --once did not finish its sync within --once-timeout; the log says what it was waiting for.',
  },
  FH_CERTS_EXIST: {
    exit: 1,
    help: '--out already holds a CA; pass --reuse-ca to keep it (the caBundle stays) or --force to replace it.',
  },
  FH_CERTS_IO: {
    exit: 1,
    help: 'The certificate files cannot be read or written; the message names the path and why.',
  },
  FH_NO_STATUS: { exit: 1, help: 'No agent status file; is the agent running with this --state-dir?' },
  // Command lines.
  FH_USAGE: { exit: 2, help: 'A flag or argument is wrong; the message names it and prints the usage.' },
  FH_HELP: { exit: 0, help: 'Usage was printed for --help.' },
} as const satisfies Record<string, ErrorInfo>;

export type ErrorCode = keyof typeof ERRORS;

export class FlowhintError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = 'FlowhintError';
  }

  /** The exit status of a command that stops on this error. */
  get exitCode(): number {
    return ERRORS[this.code].exit;
  }
}

export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}

/** The HTTP status of a failed API server call (client-node's ApiException has `code`), if any. */
export function httpStatus(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}
