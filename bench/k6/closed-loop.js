// The cross-check of wrk: the same closed loop as wrk (VUS connections, each sending its next request when
// the last one is answered) for DURATION, so that both tools' throughput and latency can be set side by
// side at one point. k6 spends far more CPU per request than wrk, so on two cores its absolute numbers are
// lower; the runner compares the peers' ratios.
import http from 'k6/http';
import { check } from 'k6';

export const options = {
  discardResponseBodies: true,
  summaryTrendStats: ['avg', 'med', 'p(90)', 'p(99)', 'p(99.9)', 'max'],
  scenarios: {
    closed: {
      executor: 'constant-vus',
      vus: Number(__ENV.VUS),
      duration: __ENV.DURATION,
    },
  },
  thresholds: {
    http_req_failed: ['rate==0'],
    checks: ['rate==1'],
  },
};

export default function () {
  const r = http.get(__ENV.URL);
  check(r, { 'status 200': (res) => res.status === 200 });
}
