/** serviceView: only what flowhint reads, and nothing flowhint reads is lost. */
import t from 'tap';
import { serviceView } from '../../api/service-view.ts';
import { intake } from '../../agent/state/intake.ts';
import { completeService, placeholderService } from '../helpers/services.ts';

const hinted = (annotations: Record<string, string>, labels = { 'flowhint.dev/traffic-hint': 'LongLived' }) =>
  completeService({
    annotations: { 'example.com/owner': 'team-a', ...annotations },
    labels: { app: 'web', ...labels },
  });

t.test('a hinted Service as the API server sends it: only the fields flowhint reads are kept', async (t) => {
  const s = hinted({ 'flowhint.dev/traffic-hint': 'LongLived', 'flowhint.dev/offload-after-packets': '50' });
  s.metadata.annotations['kubectl.kubernetes.io/last-applied-configuration'] = JSON.stringify(s);
  s.status = { loadBalancer: { ingress: [{ ip: '192.0.2.20', ipMode: 'VIP', ports: [{ port: 80 }] }] } };
  const before = JSON.stringify(s);
  // Written out by hand from api/service.ts's schema, not from the code under test.
  t.same(serviceView(s), {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name: 'web',
      namespace: 'shop',
      uid: '5f0c6a3e-1b7e-4c55-9a53-0d7f9c1f7a10',
      resourceVersion: '12345',
      annotations: { 'flowhint.dev/traffic-hint': 'LongLived', 'flowhint.dev/offload-after-packets': '50' },
      labels: { 'flowhint.dev/traffic-hint': 'LongLived' },
    },
    spec: {
      type: 'LoadBalancer',
      clusterIP: '10.96.0.10',
      clusterIPs: ['10.96.0.10'],
      externalIPs: ['192.0.2.10'],
      ports: [{ name: 'http', protocol: 'TCP', port: 80, nodePort: 30080 }],
    },
    status: { loadBalancer: { ingress: [{ ip: '192.0.2.20' }] } },
  });
  t.equal(JSON.stringify(s), before, 'the object given is not changed');
  t.ok(JSON.stringify(serviceView(s)).length * 5 < before.length, 'the view is a fraction of the object');
});

t.test('a field that is absent stays absent (not present as undefined)', async (t) => {
  const v = serviceView({ metadata: { name: 'a' }, spec: { ports: [{ port: 80 }] } }) as Record<string, any>;
  t.same(Object.keys(v), ['metadata', 'spec']);
  t.same(Object.keys(v.metadata), ['name']);
  t.same(Object.keys(v.spec), ['ports']);
  t.same(Object.keys(v.spec.ports[0]), ['port']);
  const lb = serviceView({ status: { loadBalancer: {} } }) as Record<string, any>;
  t.same(Object.keys(lb.status.loadBalancer), []);
});

t.test('what is not an object is kept as it is', async (t) => {
  for (const v of [null, undefined, 'x', 7, [1]]) t.equal(serviceView(v), v);
  const odd = { metadata: 'x', spec: [1], status: null };
  t.same(serviceView(odd), odd);
  const oddInside = { metadata: { annotations: null, labels: 'x' }, spec: { ports: 'x' }, status: { loadBalancer: 3 } };
  t.same(serviceView(oddInside), oddInside);
  const oddItems = {
    spec: { ports: [null, 'x', { port: 80, targetPort: 1 }] },
    status: { loadBalancer: { ingress: [1] } },
  };
  t.same(serviceView(oddItems), {
    spec: { ports: [null, 'x', { port: 80 }] },
    status: { loadBalancer: { ingress: [1] } },
  });
});

// Every kind of Service the reader tells apart: the view must give the agent the same entry
// or the same refusal, word for word.
const corpus: Array<[string, unknown]> = [
  [
    'LongLived with a threshold',
    hinted({ 'flowhint.dev/traffic-hint': 'LongLived', 'flowhint.dev/offload-after-packets': '7' }),
  ],
  [
    'ShortLived with a timeout',
    hinted(
      { 'flowhint.dev/traffic-hint': 'ShortLived', 'flowhint.dev/conntrack-timeout': '30s' },
      { 'flowhint.dev/traffic-hint': 'ShortLived' },
    ),
  ],
  ['not hinted', completeService()],
  ['not admitted (no label)', hinted({ 'flowhint.dev/traffic-hint': 'LongLived' }, {} as never)],
  ['a bad threshold', hinted({ 'flowhint.dev/traffic-hint': 'LongLived', 'flowhint.dev/offload-after-packets': 'x' })],
  ['an unknown hint', hinted({ 'flowhint.dev/traffic-hint': 'Sometimes' })],
  ['the upstream placeholder Service', placeholderService()],
  ['unreadable', null],
  [
    'ports of the wrong type',
    { ...hinted({ 'flowhint.dev/traffic-hint': 'LongLived' }), spec: { ports: [{ port: '80' }] } },
  ],
  ['no spec', { ...hinted({ 'flowhint.dev/traffic-hint': 'LongLived' }), spec: null }],
  [
    'UDP, SCTP, node ports, IPv6 and an ingress hostname',
    (() => {
      const s = hinted({ 'flowhint.dev/traffic-hint': 'LongLived' });
      s.spec.clusterIPs = ['10.96.0.10', 'fd00::10'];
      s.spec.ports = [
        { name: 'dns', protocol: 'UDP', port: 53, nodePort: 30053 },
        { name: 's', protocol: 'SCTP', port: 9 },
      ];
      s.status = { loadBalancer: { ingress: [{ hostname: 'lb.example' }, { ip: '198.51.100.1' }] } };
      return s;
    })(),
  ],
];

t.test('the agent reads the same from the view as from the whole object', async (t) => {
  for (const [name, object] of corpus) {
    const whole = intake([{ type: 'upsert', key: 'k', object }], { threshold: 20, timeout: 5 });
    const view = intake([{ type: 'upsert', key: 'k', object: serviceView(object) }], { threshold: 20, timeout: 5 });
    t.same(view, whole, name);
  }
});
