/**
 * A set of metric families served together at /metrics, in registration order.
 *
 * @module
 */
import { formatFamily, PROMETHEUS_CONTENT_TYPE } from "./exposition.ts";
import type { Metric, MetricSnapshot } from "./metric.ts";

/** Holds families by name; one name, one family. */
export class Registry {
  readonly #metrics = new Map<string, Metric>();

  /** The Content-Type of {@link metrics}' text. */
  get contentType(): string {
    return PROMETHEUS_CONTENT_TYPE;
  }

  /** Adds metric; registering it again is a no-op, another family of its name an error. */
  registerMetric(metric: Metric): void {
    const existing = this.#metrics.get(metric.name);
    if (existing && existing !== metric) {
      throw new Error(`A metric with the name ${metric.name} has already been registered.`);
    }
    this.#metrics.set(metric.name, metric);
  }

  /** The family registered under name. */
  getSingleMetric(name: string): Metric | undefined {
    return this.#metrics.get(name);
  }

  /** One family's exposition text (no trailing newline). */
  async getSingleMetricAsString(name: string): Promise<string> {
    const metric = this.#metrics.get(name);
    if (!metric) throw new Error(`no metric named ${JSON.stringify(name)} is registered`);
    return formatFamily(await metric.get());
  }

  /**
   * Every family's samples. Collect callbacks all start before any is awaited, in registration
   * order, as prom-client runs them.
   */
  getMetricsAsJSON(): Promise<MetricSnapshot[]> {
    return Promise.all([...this.#metrics.values()].map((m) => m.get()));
  }

  /** The whole exposition text. */
  async metrics(): Promise<string> {
    const families = await this.getMetricsAsJSON();
    return `${families.map(formatFamily).join("\n\n")}\n`;
  }
}
