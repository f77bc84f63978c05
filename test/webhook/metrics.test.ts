/** The webhook's metric labels stay bounded whatever the sender writes. */
import t from 'tap';
import { operationLabel } from '../../webhook/metrics.ts';

t.test('operationLabel: the four operations, else other or unknown', async (t) => {
  t.same(['CREATE', 'UPDATE', 'DELETE', 'CONNECT'].map(operationLabel), ['CREATE', 'UPDATE', 'DELETE', 'CONNECT']);
  t.equal(operationLabel(''), 'unknown');
  t.equal(operationLabel('create'), 'other', 'case matters, as in the API');
  t.equal(operationLabel('x'.repeat(1000)), 'other');
});
