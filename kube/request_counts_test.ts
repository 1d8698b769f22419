import assert from "node:assert/strict";
import { countRequest } from "./request_counts.ts";

Deno.test("requests counted before the metrics library loads are served, and later ones add up", async () => {
  // The connect's requests, made while operator.ts (and the metrics library) still loads.
  countRequest("200", "GET", "10.96.0.1:443");
  countRequest("200", "GET", "10.96.0.1:443");
  const { registry } = await import("./metrics.ts");
  const served = async () =>
    (await registry.getSingleMetricAsString("rest_client_requests_total")).split("\n").slice(2);
  assert.deepEqual(await served(), [
    'rest_client_requests_total{code="200",method="GET",host="10.96.0.1:443"} 2',
  ]);
  countRequest("200", "GET", "10.96.0.1:443");
  countRequest("<error>", "PATCH", "10.96.0.1:443");
  assert.deepEqual(await served(), [
    'rest_client_requests_total{code="200",method="GET",host="10.96.0.1:443"} 3',
    'rest_client_requests_total{code="<error>",method="PATCH",host="10.96.0.1:443"} 1',
  ]);
  assert.deepEqual(await served(), [
    'rest_client_requests_total{code="200",method="GET",host="10.96.0.1:443"} 3',
    'rest_client_requests_total{code="<error>",method="PATCH",host="10.96.0.1:443"} 1',
  ], "a scrape changes nothing");
});
