// Latency at a fixed request rate (constant-arrival-rate): k6 starts RATE requests a second whatever the
// latency, so a slow peer shows as latency, not as fewer requests. The run counts only when no iteration
// was dropped (the thresholds fail otherwise) and k6 itself stayed under 80 % of a core (the runner checks).
import http from 'k6/http';

export const options = {
  discardResponseBodies: true,
  summaryTrendStats: ['avg', 'med', 'p(90)', 'p(99)', 'p(99.9)', 'max'],
  scenarios: {
    fixed: {
      executor: 'constant-arrival-rate',
      rate: Number(__ENV.RATE),
      timeUnit: '1s',
      duration: __ENV.DURATION,
      preAllocatedVUs: Number(__ENV.VUS),
      maxVUs: Number(__ENV.VUS),
    },
  },
  thresholds: {
    dropped_iterations: ['count==0'],
    http_req_failed: ['rate==0'],
    checks: ['rate==1'],
  },
};

import { check } from 'k6';

export default function () {
  const r = http.get(__ENV.URL);
  check(r, { 'status 200': (res) => res.status === 200 });
}
