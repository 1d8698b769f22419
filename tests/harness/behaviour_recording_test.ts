import { deepStrictEqual, strictEqual } from "node:assert/strict";
import {
  auditFlags,
  DIGEST_DIR_VARIABLE,
  metricsRecorder,
  recordRegistryRequests,
} from "./behaviour_recording.ts";

/** Runs fn with the recording variable set to a fresh folder (or unset), restoring it after. */
async function withDir(on: boolean, fn: (dir: string) => Promise<void>): Promise<void> {
  const before = Deno.env.get(DIGEST_DIR_VARIABLE);
  const dir = await Deno.makeTempDir();
  const target = `${dir}/rec`;
  if (on) Deno.env.set(DIGEST_DIR_VARIABLE, target);
  else Deno.env.delete(DIGEST_DIR_VARIABLE);
  try {
    await fn(target);
  } finally {
    if (before === undefined) Deno.env.delete(DIGEST_DIR_VARIABLE);
    else Deno.env.set(DIGEST_DIR_VARIABLE, before);
    await Deno.remove(dir, { recursive: true });
  }
}

async function names(dir: string): Promise<string[]> {
  const out: string[] = [];
  try {
    for await (const e of Deno.readDir(dir)) out.push(e.name);
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  return out.sort();
}

Deno.test("behaviour recording: off by default, no flags, no files, no scrape", async () => {
  await withDir(false, async (dir) => {
    deepStrictEqual(await auditFlags(dir), []);
    let scraped = 0;
    await metricsRecorder("op", () => Promise.resolve(`${++scraped}`))();
    await recordRegistryRequests([{ method: "HEAD", path: "/v2/", status: 200 }]);
    strictEqual(scraped, 0);
    deepStrictEqual(await names(dir), []);
  });
});

Deno.test("behaviour recording: on, the audit flags point into the folder", async () => {
  await withDir(true, async (dir) => {
    const data = await Deno.makeTempDir();
    try {
      const flags = await auditFlags(data);
      const log = flags.find((f) => f.startsWith("--audit-log-path="))?.split("=")[1] ?? "";
      strictEqual(log.startsWith(`${dir}/audit-`) && log.endsWith(".jsonl"), true, log);
      const policy = flags.find((f) => f.startsWith("--audit-policy-file="))?.split("=")[1] ?? "";
      strictEqual(JSON.parse(await Deno.readTextFile(policy)).kind, "Policy");
      strictEqual(flags.includes("--audit-log-format=json"), true);
    } finally {
      await Deno.remove(data, { recursive: true });
    }
  });
});

Deno.test("behaviour recording: one scrape per process, a failing one skipped without throwing", async () => {
  await withDir(true, async (dir) => {
    let scraped = 0;
    const record = metricsRecorder(
      "op",
      () => Promise.resolve(`# TYPE up gauge\nup ${++scraped}\n`),
    );
    await record();
    await record(); // stop() after killOperator already scraped
    strictEqual(scraped, 1);
    await metricsRecorder("gone", () => Promise.reject(new Error("connection refused")))();
    const files = await names(dir);
    strictEqual(files.length, 1);
    strictEqual(await Deno.readTextFile(`${dir}/${files[0]}`), "# TYPE up gauge\nup 1\n");
    await recordRegistryRequests([{
      method: "HEAD",
      path: "/v2/x/manifests/hibernate",
      status: 404,
    }]);
    const registry = (await names(dir)).filter((n) => n.startsWith("registry-"));
    strictEqual(registry.length, 1);
    deepStrictEqual(JSON.parse((await Deno.readTextFile(`${dir}/${registry[0]}`)).trim()), {
      method: "HEAD",
      path: "/v2/x/manifests/hibernate",
      status: 404,
    });
  });
});
