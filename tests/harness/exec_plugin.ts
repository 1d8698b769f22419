/**
 * An exec credential plugin for tests: a small shell script that hands out the token of an
 * existing token kubeconfig (the operator's ServiceAccount identity) as an ExecCredential with a
 * short expiry, and counts its runs in a file; plus the kubeconfig whose user runs it by bare
 * name (so the launcher resolves it through PATH, as for gke-gcloud-auth-plugin).
 *
 * @module
 */
import type { ControlPlane } from "./control_plane.ts";

/** The name the kubeconfig runs; its folder goes first on the operator's PATH. */
export const TOKEN_PLUGIN_NAME = "cocoon-test-token-plugin";

/** A written plugin and its kubeconfig. */
export interface TokenPlugin {
  /** The kubeconfig whose user runs the plugin. */
  readonly kubeconfig: string;
  /** The folder holding the plugin, to put first on PATH. */
  readonly binDir: string;
  /** The plugin's absolute path (what the launcher must grant). */
  readonly path: string;
  /** How many times it ran so far. */
  runs(): Promise<number>;
}

function base64(text: string): string {
  return btoa(String.fromCharCode(...new TextEncoder().encode(text)));
}

/**
 * Writes the plugin and its kubeconfig into `dir`. Each run returns `identity`'s token with an
 * expirationTimestamp `ttlSeconds` from the run.
 */
export async function writeTokenPlugin(
  cp: ControlPlane,
  identity: string,
  dir: string,
  ttlSeconds: number,
): Promise<TokenPlugin> {
  const config = JSON.parse(await Deno.readTextFile(identity));
  const token = config?.users?.[0]?.user?.token;
  if (typeof token !== "string") throw new Error(`${identity} holds no token`);
  await Deno.writeTextFile(`${dir}/token`, token, { mode: 0o600 });
  const binDir = `${dir}/bin`;
  await Deno.mkdir(binDir, { recursive: true });
  const path = `${binDir}/${TOKEN_PLUGIN_NAME}`;
  // The plugin sees only what the operator passes: PATH (date, cat), PLUGIN_DIR from the
  // kubeconfig's env, KUBERNETES_EXEC_INFO.
  await Deno.writeTextFile(
    path,
    `#!/bin/sh
set -e
echo run >> "$PLUGIN_DIR/runs"
exp=$(date -u -d "+${ttlSeconds} seconds" +%Y-%m-%dT%H:%M:%SZ)
printf '{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1beta1","status":{"token":"%s","expirationTimestamp":"%s"}}\\n' "$(cat "$PLUGIN_DIR/token")" "$exp"
`,
    { mode: 0o755 },
  );
  const kubeconfig = `${dir}/exec.kubeconfig`;
  await Deno.writeTextFile(
    kubeconfig,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{
        name: "envtest",
        cluster: { server: cp.server, "certificate-authority-data": base64(cp.caCertPem) },
      }],
      users: [{
        name: "exec-user",
        user: {
          exec: {
            command: TOKEN_PLUGIN_NAME,
            apiVersion: "client.authentication.k8s.io/v1beta1",
            env: [{ name: "PLUGIN_DIR", value: dir }],
          },
        },
      }],
      contexts: [{ name: "envtest", context: { cluster: "envtest", user: "exec-user" } }],
      "current-context": "envtest",
    }),
    { mode: 0o600 },
  );
  return {
    kubeconfig,
    binDir,
    path,
    async runs() {
      try {
        return (await Deno.readTextFile(`${dir}/runs`)).split("\n").filter(Boolean).length;
      } catch {
        return 0;
      }
    },
  };
}
