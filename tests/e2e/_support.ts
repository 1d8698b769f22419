/**
 * The end-to-end suites' test wrapper: one stack per file, the health check every suite ends
 * with, log files named on failure. The object helpers live in tests/harness/stack_objects.ts
 * (shared with the fault suites). Private to tests/e2e/.
 *
 * @module
 */
import { type Stack, type StackOptions, stackTest } from "../harness/stack.ts";

/** Runs one named step; a failed step stops the suite (later steps build on it). */
export type Step = (name: string, fn: () => Promise<void>) => Promise<void>;

/**
 * Declares an end-to-end suite: starts one stack for all its steps, ends with every operator
 * alive and never answered 403, names the process logs when something fails, and stops the
 * stack in any case. Skipped (saying why) when the registry binary is missing.
 */
export function e2eSuite(
  name: string,
  opts: StackOptions,
  body: (stack: Stack, step: Step) => Promise<void>,
): void {
  stackTest(`e2e: ${name}`, opts, async (stack, t) => {
    const step: Step = async (stepName, fn) => {
      if (!(await t.step(stepName, fn))) throw new Error(`step failed: ${stepName}`);
    };
    await body(stack, step);
    await stack.assertOperatorsHealthy();
  });
}
