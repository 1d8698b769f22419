/**
 * cocoon-operator entry point: parses flags and environment, checks the sandbox and the cluster
 * (preflight.ts), then hands over to operator.ts, which builds the manager and registers the
 * reconcilers (the Go operator's main.go). Only what the checks need is imported statically.
 */
// First, for its side effect: the crypto library initialises beside module loading, off the
// main thread (kube/crypto_warmup.ts).
import "./kube/crypto_warmup.ts";
import { type Config, parseConfig, usage } from "./config.ts";
import { setupLogging } from "./common/log.ts";
import { errorMessage } from "./kube/errors.ts";
import type { Transport } from "./kube/transport.ts";
import { removeNetGuard } from "./kube/net_guard.ts";
import { connect, missingEnvGrants, PreflightError } from "./preflight.ts";
import { describeMissing } from "./permissions.ts";
import { LOCAL_ONLY_ENV, OPERATOR_ENV } from "./operator_env.ts";
import { permittedEnvRecord } from "./common/env.ts";
import { newOciRegistry } from "./snapshot/oci.ts";
import type { Registry } from "./snapshot/registry.ts";
import { BUILT_AT, REVISION, VERSION } from "./version.ts";

/** Runs the operator; returns the process exit code. */
export async function main(
  args: string[],
  env: Record<string, string | undefined>,
): Promise<number> {
  let config: Config;
  let registry: Registry;
  // A variable the sandbox withholds would read as unset and be misreported as missing.
  const envNotGranted = missingEnvGrants();
  try {
    config = parseConfig(args, env);
    if (config.help) {
      console.log(usage());
      return 0;
    }
    if (config.version) {
      console.log(`cocoon-operator ${VERSION} (rev=${REVISION}, built ${BUILT_AT})`);
      return 0;
    }
    if (envNotGranted.length > 0) throw new Error(describeMissing(envNotGranted));
    registry = newOciRegistry(config.ociRegistry, { plainHttpHosts: config.plainHttpHosts });
  } catch (err) {
    // Bad input fails before anything connects, with one line and exit code 2.
    const message = envNotGranted.length > 0 ? describeMissing(envNotGranted) : errorMessage(err);
    console.error(`cocoon-operator: ${message}`);
    return 2;
  }
  // The rest of the module graph loads while this one connects (operator.ts). Awaited on every
  // path, so a failed start-up does not exit with the loading still under way.
  const operator = import("./operator.ts");
  await setupLogging({
    level: config.logLevel,
    format: env.OPERATOR_LOG_FORMAT === "text" ? "text" : "json",
  });
  let transport: Transport;
  try {
    transport = await connect(config, (name) => env[name], {
      userAgent: `cocoon-operator/${VERSION}`,
      guardNet: true,
    });
  } catch (err) {
    removeNetGuard();
    // No cluster, or none that answers: one line, nothing else on the terminal.
    await operator.catch(() => {});
    if (!(err instanceof PreflightError)) throw err;
    console.error(`cocoon-operator: ${err.message}`);
    return 2;
  }
  const { runOperator } = await operator;
  return runOperator(config, registry, transport);
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args, permittedEnvRecord([...OPERATOR_ENV, ...LOCAL_ONLY_ENV])));
}
