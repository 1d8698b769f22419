import assert from "node:assert/strict";
import {
  compileArgs,
  DENORT_UNAVAILABLE_EXIT,
  graphProblem,
  importMap,
  isDenortDownloadFailure,
  versionModule,
} from "./compile.ts";
import { inClusterPermissionSet, permissionFlags } from "../permissions.ts";

const repoRoot = new URL("../", import.meta.url).pathname;

Deno.test("compile args: the in-cluster flags, stamped version through the import map", () => {
  const args = compileArgs({
    stamp: { version: "v1", revision: "abc", builtAt: "2026-01-01T00:00:00Z" },
    registryHosts: ["*.pkg.dev", "registry.example.com"],
    output: "/out/cocoon-operator",
    buildDir: "/out/build",
  }, "/out/build/import_map.json");
  assert.deepEqual(args, [
    "compile",
    "--no-code-cache",
    "--import-map=/out/build/import_map.json",
    ...permissionFlags(inClusterPermissionSet(["*.pkg.dev", "registry.example.com"])),
    "--output=/out/cocoon-operator",
    `${repoRoot}main.ts`,
  ]);
  assert.ok(args.includes(
    "--allow-net=kubernetes.default.svc:443,*.pkg.dev:443,registry.example.com:443," +
      "169.254.169.254:80,oauth2.googleapis.com:443,0.0.0.0:8080,0.0.0.0:8081",
  ));
  for (const a of args) assert.doesNotMatch(a, /^(-A|--allow-all|--allow-(write|run|ffi|sys))/);
});

Deno.test("compile: version module and import map", () => {
  assert.equal(
    versionModule({ version: "v1", revision: "abc", builtAt: "t" }).split("\n").slice(1).join("\n"),
    'export const VERSION = "v1";\nexport const REVISION = "abc";\nexport const BUILT_AT = "t";\n',
  );
  const map = importMap({ "js-yaml": "npm:js-yaml@5.5.0" }, "/b/version.ts");
  assert.deepEqual(map.imports, {
    "js-yaml": "npm:js-yaml@5.5.0",
    "js-yaml/": "npm:/js-yaml@5.5.0/",
    [`file://${repoRoot}version.ts`]: "file:///b/version.ts",
  });
  const stamped = "/b/version.ts";
  assert.equal(
    graphProblem({ modules: [{ specifier: "file:///b/version.ts" }] }, stamped),
    undefined,
  );
  assert.match(graphProblem({ modules: [] }, stamped)!, /lacks the stamped/);
  assert.match(
    graphProblem(
      { modules: [{ specifier: "file:///b/version.ts" }, { specifier: "jsr:@std/x" }] },
      stamped,
    )!,
    /remote modules: jsr:@std\/x/,
  );
});

Deno.test("compile: the denort download failure is recognised", () => {
  const stderr =
    "\x1b[0m\x1b[32mDownload\x1b[0m https://dl.deno.land/release/v2.9.6/denort-x86_64-unknown-linux-gnu.zip\n" +
    "error: Writing deno compile executable to temporary file 'x'\n\nCaused by:\n" +
    "    0: Setting up base binary.\n    1: error sending request for url (https://dl.deno.land/" +
    "release/v2.9.6/denort-x86_64-unknown-linux-gnu.zip): client error (Connect): dns error";
  assert.ok(isDenortDownloadFailure(stderr));
  assert.ok(!isDenortDownloadFailure("error: TS2304 [ERROR]: Cannot find name 'x'"));
});

Deno.test({
  name: "deno task compile: checks pass, flags printed, then a clear denort message or a binary",
  sanitizeResources: false,
  async fn() {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["task", "--quiet", "compile", "--output", `${repoRoot}dist/test/cocoon-operator`],
      cwd: repoRoot,
      env: { VERSION: "9.8.7-test", REVISION: "feedface", BUILT_AT: "2026-01-02T03:04:05Z" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stdout = new TextDecoder().decode(out.stdout);
    const stderr = new TextDecoder().decode(out.stderr);
    const plan = JSON.parse(stdout.trim().split("\n").pop()!);
    assert.deepEqual(plan.stamp, {
      version: "9.8.7-test",
      revision: "feedface",
      builtAt: "2026-01-02T03:04:05Z",
    });
    assert.ok(plan.command.includes(permissionFlags(inClusterPermissionSet())[0]));
    const binary = `${repoRoot}dist/test/cocoon-operator`;
    if (out.code === DENORT_UNAVAILABLE_EXIT) {
      assert.match(stderr, /\[compile\] type check\n/);
      assert.match(stderr, /\[compile\] module graph\n/);
      assert.match(stderr, /could not download its runtime \(denort\).*DENORT_BIN/);
      assert.doesNotMatch(stderr, /Stack backtrace|Caused by/);
    } else {
      // Where denort is available the binary exists and reports the stamp.
      assert.equal(out.code, 0, stderr);
      const v = await new Deno.Command(binary, { args: ["--version"] }).output();
      assert.equal(
        new TextDecoder().decode(v.stdout).trim(),
        "cocoon-operator 9.8.7-test (rev=feedface, built 2026-01-02T03:04:05Z)",
      );
    }
    // The stamped module is what --version prints, through the same import map.
    const viaMap = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        `--import-map=${repoRoot}dist/build/import_map.json`,
        `${repoRoot}main.ts`,
        "--version",
      ],
      stdout: "piped",
    }).output();
    assert.equal(
      new TextDecoder().decode(viaMap.stdout).trim(),
      "cocoon-operator 9.8.7-test (rev=feedface, built 2026-01-02T03:04:05Z)",
    );
  },
});

Deno.test("Dockerfile: builds with the pinned Deno through deno task compile onto distroless", async () => {
  const dockerfile = await Deno.readTextFile(`${repoRoot}Dockerfile`);
  const ciDeno = /^DENO_VERSION=(\S+)$/m.exec(await Deno.readTextFile(`${repoRoot}.ci/run`))?.[1];
  assert.match(dockerfile, new RegExp(`^ARG DENO_VERSION=${ciDeno?.replaceAll(".", "\\.")}$`, "m"));
  assert.match(
    dockerfile,
    /^FROM denoland\/deno:\$\{DENO_VERSION\}@\$\{DENO_IMAGE_DIGEST\} AS build$/m,
  );
  assert.match(dockerfile, /deno task compile$/m);
  assert.match(dockerfile, /^ARG REGISTRY_HOSTS=\*\.pkg\.dev:443$/m);
  // The final stage: distroless cc (glibc + CA certificates), non-root, the binary as entrypoint.
  const final = dockerfile.slice(dockerfile.lastIndexOf("\nFROM "));
  assert.match(final, /^\nFROM gcr\.io\/distroless\/cc-debian12:nonroot@\$\{BASE_IMAGE_DIGEST\}$/m);
  assert.match(
    final,
    /^COPY --from=build \/src\/dist\/cocoon-operator \/usr\/bin\/cocoon-operator$/m,
  );
  assert.match(final, /^USER 65532:65532$/m);
  assert.match(final, /^ENTRYPOINT \["\/usr\/bin\/cocoon-operator"\]$/m);
  assert.doesNotMatch(final, /^RUN /m);
});

Deno.test("Dockerfile: every base image is pinned by digest, never by tag alone", async () => {
  const dockerfile = await Deno.readTextFile(`${repoRoot}Dockerfile`);
  const froms = [...dockerfile.matchAll(/^FROM (\S+)/gm)].map((m) => m[1]);
  assert.equal(froms.length, 2);
  for (const from of froms) {
    assert.match(from, /@(sha256:[0-9a-f]{64}|\$\{[A-Z_]+_DIGEST\})$/, from);
  }
  // Every digest argument has a real default: a plain `docker build` is pinned too.
  const digestArgs = [...dockerfile.matchAll(/^ARG ([A-Z_]+_DIGEST)(?:=(\S*))?$/gm)];
  assert.deepEqual(digestArgs.map((m) => m[1]).sort(), ["BASE_IMAGE_DIGEST", "DENO_IMAGE_DIGEST"]);
  for (const [, name, value] of digestArgs) {
    assert.match(value ?? "", /^sha256:[0-9a-f]{64}$/, name);
  }
});

Deno.test("compile: a proxy host is granted only when asked for, with a port", () => {
  const plan = {
    stamp: { version: "v", revision: "r", builtAt: "b" },
    registryHosts: ["registry.example.com"],
    proxyHosts: ["proxy.corp:3128"],
    output: "/tmp/x",
    buildDir: "/tmp/b",
  };
  const net = compileArgs(plan, "/m.json").find((a) => a.startsWith("--allow-net="))!;
  assert.ok(net.includes(",registry.example.com:443,"), net);
  assert.ok(net.includes(",proxy.corp:3128,"), net);
  const none = compileArgs({ ...plan, proxyHosts: [] }, "/m.json")
    .find((a) => a.startsWith("--allow-net="))!;
  assert.ok(!none.includes("proxy.corp"), none);
});
