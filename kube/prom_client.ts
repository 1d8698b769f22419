/**
 * The metrics library: prom-client 15.1.3's Counter, Gauge, Histogram and Registry, each loaded
 * from its own file. The package's index also loads what the operator never uses (the
 * Pushgateway with node:http, node:https and node:zlib, cluster aggregation, the Summary's
 * tdigest, the default metrics with @opentelemetry/api), which costs start-up time and memory
 * (docs/architecture.md, "The metrics library"). The types are the package's own.
 *
 * @module
 */
import type * as prom from "prom-client";
import counter from "prom-client/lib/counter.js";
import gauge from "prom-client/lib/gauge.js";
import histogram from "prom-client/lib/histogram.js";
import registry from "prom-client/lib/registry.js";

/** A monotonically increasing family (Prometheus type `counter`). */
export const Counter = counter as typeof prom.Counter;
/** A monotonically increasing family (Prometheus type `counter`). */
export type Counter<T extends string = string> = prom.Counter<T>;
/** A family whose values go up and down (Prometheus type `gauge`). */
export const Gauge = gauge as typeof prom.Gauge;
/** A family whose values go up and down (Prometheus type `gauge`). */
export type Gauge<T extends string = string> = prom.Gauge<T>;
/** A distribution family (Prometheus type `histogram`). */
export const Histogram = histogram as typeof prom.Histogram;
/** A distribution family (Prometheus type `histogram`). */
export type Histogram<T extends string = string> = prom.Histogram<T>;
/** The families served together at one /metrics endpoint, in registration order. */
export const Registry = registry as typeof prom.Registry;
/** The families served together at one /metrics endpoint, in registration order. */
export type Registry = prom.Registry;
/** Any of the families. */
export type Metric = prom.Metric;
