import assert from "node:assert/strict";
import { type Config, ConfigError, DEFAULTS, parseConfig, parseGoBool, usage } from "./config.ts";
import { DEFAULT_SET_LIMITS } from "./cocoonset/validate.ts";

const BASE = { OCI_REGISTRY: "example.com/proj/repo" };

function parse(args: string[], env: Record<string, string | undefined> = {}): Config {
  return parseConfig(args, { ...BASE, ...env });
}

function rejects(args: string[], env: Record<string, string | undefined>, re: RegExp): void {
  assert.throws(() => parseConfig(args, env), (err: unknown) => {
    assert.ok(err instanceof ConfigError, `want ConfigError, got ${err}`);
    assert.match(err.message, re);
    assert.ok(!err.message.includes("\n"), `one line: ${JSON.stringify(err.message)}`);
    return true;
  });
}

Deno.test("defaults match the Go operator", () => {
  assert.deepEqual(parse([]), {
    metricsBindAddress: ":8080",
    healthProbeBindAddress: ":8081",
    leaderElect: true,
    leaderElectionNamespace: undefined,
    kubeconfig: undefined,
    cocoonSetConcurrency: 4,
    hibernationConcurrency: 4,
    maxReplicasPerSet: 1000,
    maxToolboxesPerSet: 100,
    ociRegistry: "example.com/proj/repo",
    logLevel: "info",
    help: false,
    version: false,
    allowExtraPermissions: false,
    plainHttpHosts: [],
    metricsSecure: true,
    metricsCertDir: undefined,
    enableHttp2: false,
  });
});

Deno.test("--enable-http2: off by default, on by flag or ENABLE_HTTP2, the flag winning", () => {
  assert.equal(parse([]).enableHttp2, false);
  assert.equal(parse(["--enable-http2"]).enableHttp2, true);
  assert.equal(parse(["-enable-http2=true"]).enableHttp2, true);
  assert.equal(parse([], { ENABLE_HTTP2: "true" }).enableHttp2, true);
  assert.equal(parse(["--enable-http2=false"], { ENABLE_HTTP2: "1" }).enableHttp2, false);
  rejects([], { ...BASE, ENABLE_HTTP2: "yes" }, /ENABLE_HTTP2="yes" is not a boolean/);
  rejects(["--enable-http2=on"], BASE, /invalid value "on" for --enable-http2/);
  assert.match(usage(), /--enable-http2\[=BOOL\][^\n]*\n[^\n]*HTTP\/1\.1 only/);
});

Deno.test("least-privilege settings: extra permissions, plain http hosts, metrics security", () => {
  const fromEnv = parse([], {
    OPERATOR_ALLOW_EXTRA_PERMISSIONS: "true",
    OPERATOR_ALLOW_PLAIN_HTTP: "10.0.0.5:5000, Registry.Local",
    METRICS_SECURE: "false",
    METRICS_CERT_DIR: "/certs",
  });
  assert.equal(fromEnv.allowExtraPermissions, true);
  assert.deepEqual(fromEnv.plainHttpHosts, ["10.0.0.5:5000", "registry.local"]);
  assert.equal(fromEnv.metricsSecure, false);
  assert.equal(fromEnv.metricsCertDir, "/certs");
  const flags = parse(
    ["--allow-extra-permissions=false", "--metrics-secure", "--allow-plain-http=a.example"],
    { OPERATOR_ALLOW_EXTRA_PERMISSIONS: "true", METRICS_SECURE: "false" },
  );
  assert.equal(flags.allowExtraPermissions, false);
  assert.equal(flags.metricsSecure, true);
  assert.deepEqual(flags.plainHttpHosts, ["a.example"]);
  assert.throws(() => parse(["--allow-plain-http=http://x"]), /--allow-plain-http: "http:/);
  assert.throws(() => parse([], { METRICS_SECURE: "maybe" }), /METRICS_SECURE/);
});

Deno.test("env sets defaults and flags override env", () => {
  const env = {
    METRICS_ADDR: "127.0.0.1:9000",
    PROBE_ADDR: "[::1]:9001",
    LEADER_ELECT: "false",
    COCOONSET_CONCURRENCY: "8",
    HIBERNATION_CONCURRENCY: "2",
    POD_NAMESPACE: "cocoon-system",
    OPERATOR_LOG_LEVEL: "DEBUG",
  };
  const fromEnv = parse([], env);
  assert.equal(fromEnv.metricsBindAddress, "127.0.0.1:9000");
  assert.equal(fromEnv.healthProbeBindAddress, "[::1]:9001");
  assert.equal(fromEnv.leaderElect, false);
  assert.equal(fromEnv.cocoonSetConcurrency, 8);
  assert.equal(fromEnv.hibernationConcurrency, 2);
  assert.equal(fromEnv.leaderElectionNamespace, "cocoon-system");
  assert.equal(fromEnv.logLevel, "debug");

  const fromFlags = parse([
    "--metrics-bind-address=0",
    "--health-probe-bind-address",
    ":18081",
    "--leader-elect",
    "--cocoonset-concurrency=16",
    "--hibernation-concurrency",
    "1",
    "--leader-election-namespace=other",
  ], env);
  assert.equal(fromFlags.metricsBindAddress, "0");
  assert.equal(fromFlags.healthProbeBindAddress, ":18081");
  assert.equal(fromFlags.leaderElect, true);
  assert.equal(fromFlags.cocoonSetConcurrency, 16);
  assert.equal(fromFlags.hibernationConcurrency, 1);
  assert.equal(fromFlags.leaderElectionNamespace, "other");
});

Deno.test("--leader-elect takes Go bool syntax; single-dash flags work as in Go", () => {
  assert.equal(parse(["--leader-elect=false"]).leaderElect, false);
  assert.equal(parse(["--leader-elect=true"], { LEADER_ELECT: "0" }).leaderElect, true);
  assert.equal(parse(["--leader-elect=F"]).leaderElect, false);
  assert.equal(parse(["--leader-elect=false", "--leader-elect"]).leaderElect, true, "last wins");
  assert.equal(parse(["-leader-elect=false"]).leaderElect, false);
  assert.equal(parse(["-cocoonset-concurrency=3"]).cocoonSetConcurrency, 3);
  rejects(["--leader-elect=maybe"], BASE, /invalid value "maybe" for --leader-elect/);
  // Go's bool flags never consume the next argument; a stray value is an error here.
  rejects(["--leader-elect", "false"], BASE, /Unexpected argument 'false'/);
});

Deno.test("LEADER_ELECT parses like strconv.ParseBool; garbage is an error naming it", () => {
  for (const v of ["1", "t", "T", "true", "TRUE", "True"]) {
    assert.equal(parse([], { LEADER_ELECT: v }).leaderElect, true, v);
  }
  for (const v of ["0", "f", "F", "false", "FALSE", "False"]) {
    assert.equal(parse([], { LEADER_ELECT: v }).leaderElect, false, v);
  }
  assert.equal(parse([], { LEADER_ELECT: "" }).leaderElect, true, "empty = unset");
  assert.equal(parseGoBool("yes"), undefined);
  assert.equal(parseGoBool("tRUE"), undefined);
  rejects([], { ...BASE, LEADER_ELECT: "yes" }, /^LEADER_ELECT="yes" is not a boolean/);
});

// Port of main_test.go TestEnvInt: unset falls back, a valid value wins; where Go silently
// falls back on an invalid value, this port refuses to start and names the variable.
Deno.test("concurrency from env: unset, valid, invalid (stricter than Go's envInt)", () => {
  assert.equal(parse([], { COCOONSET_CONCURRENCY: "" }).cocoonSetConcurrency, 4);
  assert.equal(parse([], { COCOONSET_CONCURRENCY: "8" }).cocoonSetConcurrency, 8);
  assert.equal(parse([], { HIBERNATION_CONCURRENCY: "+2" }).hibernationConcurrency, 2);
  rejects(
    [],
    { ...BASE, COCOONSET_CONCURRENCY: "many" },
    /^COCOONSET_CONCURRENCY="many" is not an integer$/,
  );
  rejects(
    [],
    { ...BASE, HIBERNATION_CONCURRENCY: "2.5" },
    /^HIBERNATION_CONCURRENCY="2.5" is not an integer$/,
  );
  rejects([], { ...BASE, HIBERNATION_CONCURRENCY: "0x10" }, /is not an integer/);
  rejects(
    [],
    { ...BASE, COCOONSET_CONCURRENCY: "0" },
    /^COCOONSET_CONCURRENCY="0" must be at least 1$/,
  );
  rejects([], { ...BASE, COCOONSET_CONCURRENCY: "-1" }, /is not an integer/);
  rejects(["--cocoonset-concurrency=0"], BASE, /^--cocoonset-concurrency="0" must be at least 1$/);
  rejects(
    ["--hibernation-concurrency", "x"],
    BASE,
    /^--hibernation-concurrency="x" is not an integer$/,
  );
  rejects(["--cocoonset-concurrency=99999999999999999999"], BASE, /is too large$/);
});

// Port of main_test.go TestBuildRegistry: OCI_REGISTRY is required.
Deno.test("OCI_REGISTRY is required", () => {
  assert.equal(parse([]).ociRegistry, "example.com/proj/repo");
  rejects([], {}, /^OCI_REGISTRY must be set/);
  rejects([], { OCI_REGISTRY: "" }, /^OCI_REGISTRY must be set/);
  rejects([], { OCI_REGISTRY: "  " }, /^OCI_REGISTRY must be set/);
});

Deno.test("addresses are validated before anything starts", () => {
  rejects([], { ...BASE, METRICS_ADDR: "8080" }, /^METRICS_ADDR: invalid bind address "8080"/);
  rejects(
    ["--health-probe-bind-address=:http"],
    BASE,
    /^--health-probe-bind-address: invalid bind address ":http": port/,
  );
  rejects(["--metrics-bind-address=::1:80"], BASE, /brackets/);
  // controller-runtime: an empty metrics address is the default, an empty probe address disables.
  const empty = parse(["--metrics-bind-address=", "--health-probe-bind-address="]);
  assert.equal(empty.metricsBindAddress, ":8080");
  assert.equal(empty.healthProbeBindAddress, "0");
});

Deno.test("unknown flags, bad log level and bad namespace are errors", () => {
  rejects(["--bogus"], BASE, /^Unknown option '--bogus'/);
  rejects(["--metrics-bind-address"], BASE, /argument missing/);
  rejects(["extra"], BASE, /Unexpected argument 'extra'/);
  rejects(
    [],
    { ...BASE, OPERATOR_LOG_LEVEL: "loud" },
    /^OPERATOR_LOG_LEVEL: invalid log level "loud"/,
  );
  rejects(["--leader-election-namespace=Not_Valid"], BASE, /invalid leader election namespace/);
});

Deno.test("--help and --version short-circuit validation", () => {
  const help = parseConfig(["--help"], {});
  assert.equal(help.help, true);
  assert.equal(parseConfig(["-h"], { COCOONSET_CONCURRENCY: "bad" }).help, true);
  assert.equal(parseConfig(["--version"], {}).version, true);
  rejects(["--help", "--nope"], {}, /Unknown option '--nope'/);
  const text = usage();
  for (
    const flag of [
      "--metrics-bind-address",
      "--health-probe-bind-address",
      "--leader-elect",
      "--leader-election-namespace",
      "--cocoonset-concurrency",
      "--hibernation-concurrency",
      "OCI_REGISTRY",
      "OPERATOR_LOG_LEVEL",
    ]
  ) {
    assert.ok(text.includes(flag), flag);
  }
});

// controller-runtime registers --kubeconfig on the Go binary's command line; manifests and
// scripts written for it pass that flag.
Deno.test("--kubeconfig is accepted like the Go binary's (controller-runtime's flag)", () => {
  assert.equal(parse(["--kubeconfig", "/etc/k/config"]).kubeconfig, "/etc/k/config");
  assert.equal(parse(["-kubeconfig=/etc/k/config"]).kubeconfig, "/etc/k/config");
  assert.equal(parse(["--kubeconfig="]).kubeconfig, undefined);
  assert.match(usage(), /--kubeconfig PATH/);
});

Deno.test("per-set limits: flags win over env, 0 is allowed, a non-integer is refused", () => {
  assert.deepEqual(
    { maxReplicas: DEFAULTS.maxReplicasPerSet, maxToolboxes: DEFAULTS.maxToolboxesPerSet },
    DEFAULT_SET_LIMITS,
    "the flags default to the reconciler's own limits",
  );
  assert.equal(parse([], { MAX_REPLICAS_PER_SET: "50" }).maxReplicasPerSet, 50);
  assert.equal(parse([], { MAX_TOOLBOXES_PER_SET: "0" }).maxToolboxesPerSet, 0);
  const both = parse(["--max-replicas-per-set=7", "--max-toolboxes-per-set", "3"], {
    MAX_REPLICAS_PER_SET: "50",
    MAX_TOOLBOXES_PER_SET: "9",
  });
  assert.deepEqual([both.maxReplicasPerSet, both.maxToolboxesPerSet], [7, 3]);
  rejects([], { ...BASE, MAX_REPLICAS_PER_SET: "lots" }, /^MAX_REPLICAS_PER_SET="lots" is not/);
  rejects(["--max-toolboxes-per-set=-1"], BASE, /^--max-toolboxes-per-set="-1" is not an integer/);
  assert.match(usage(), /--max-replicas-per-set N/);
});

Deno.test("--informer-stall-seconds / INFORMER_STALL_SECONDS: whole seconds, 0 allowed, absent by default", () => {
  assert.equal(parse([]).informerStallSeconds, undefined);
  assert.equal(parse([], { INFORMER_STALL_SECONDS: "120" }).informerStallSeconds, 120);
  assert.equal(
    parse(["--informer-stall-seconds=0"], { INFORMER_STALL_SECONDS: "120" }).informerStallSeconds,
    0,
  );
  rejects(
    [],
    { ...BASE, INFORMER_STALL_SECONDS: "5m" },
    /^INFORMER_STALL_SECONDS="5m" is not a whole number of seconds$/,
  );
  rejects(["--informer-stall-seconds=-1"], BASE, /^--informer-stall-seconds="-1" is not/);
});

Deno.test("--rbac-recheck-seconds / RBAC_RECHECK_SECONDS: whole seconds, 0 allowed, default 60", () => {
  assert.equal(parse([]).rbacRecheckSeconds, undefined);
  assert.equal(DEFAULTS.rbacRecheckSeconds, 60);
  assert.equal(parse([], { RBAC_RECHECK_SECONDS: "5" }).rbacRecheckSeconds, 5);
  assert.equal(
    parse(["--rbac-recheck-seconds=0"], { RBAC_RECHECK_SECONDS: "5" }).rbacRecheckSeconds,
    0,
  );
  rejects(
    [],
    { ...BASE, RBAC_RECHECK_SECONDS: "1m" },
    /^RBAC_RECHECK_SECONDS="1m" is not a whole number of seconds$/,
  );
  assert.match(usage(), /--rbac-recheck-seconds N/);
});

Deno.test("--shards / SHARDS: off by default, auto turns sharding on, the flag wins, typos refused", () => {
  assert.equal(parse([]).shards, undefined);
  assert.equal(parse([], { SHARDS: "off" }).shards, undefined);
  assert.equal(parse([], { SHARDS: "auto" }).shards, "auto");
  assert.equal(parse(["--shards=auto"]).shards, "auto");
  assert.equal(parse(["--shards", "off"], { SHARDS: "auto" }).shards, undefined);
  rejects([], { ...BASE, SHARDS: "on" }, /^SHARDS="on": want off or auto$/);
  rejects(["--shards=3"], BASE, /^--shards="3": want off or auto$/);
  assert.match(usage(), /--shards MODE/);
});
