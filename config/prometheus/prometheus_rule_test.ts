/**
 * The PrometheusRule in this folder, checked by Prometheus's own tool: `promtool check rules`
 * validates it, and `promtool test rules` evaluates every alert against input series whose
 * names and label sets are read from the real collectors' /metrics exposition (so a renamed
 * family or label breaks the test, not the alert in production). Each alert has a case where it
 * fires and a case where it must stay silent; every runbook_url names an existing section of
 * docs/observability.md.
 *
 * promtool comes from Debian's `prometheus` package (.ci/run installs it). Outside CI a machine
 * without it skips these tests with the reason in the test name; with CI set they fail instead.
 */
import assert from "node:assert/strict";
import { load as loadYaml } from "js-yaml";
import {
  leaderElectionMasterStatus,
  reconcileErrors,
  reconcileTotal,
  registry,
} from "../../kube/metrics.ts";
import {
  hibernatePhaseDurationSeconds,
  rbacFeatureEnabled,
  register,
  slotReleaseWakeUnschedulableTotal,
  subAgentDeadLetterTotal,
  wakePhaseDurationSeconds,
} from "../../metrics/metrics.ts";

const here = new URL("./", import.meta.url).pathname;
const repoRoot = new URL("../../", import.meta.url).pathname;
const LEASE_NAME = "cocoon-operator.cocoonset.cocoonstack.io";

function promtoolPath(): string | undefined {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    try {
      if (Deno.statSync(`${dir}/promtool`).isFile) return `${dir}/promtool`;
    } catch {
      // Not in this folder.
    }
  }
  return undefined;
}

const promtool = promtoolPath();
const inCi = Boolean(Deno.env.get("CI"));
const skipReason = promtool || inCi
  ? ""
  : " (skipped: promtool not installed; apt-get install prometheus)";

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

async function ruleGroups(): Promise<{ name: string; rules: Rule[] }[]> {
  const doc = loadYaml(await Deno.readTextFile(`${here}prometheus_rule.yaml`)) as {
    spec?: { groups?: { name: string; rules: Rule[] }[] };
  };
  const groups = doc.spec?.groups;
  assert.ok(groups && groups.length > 0, "prometheus_rule.yaml has no spec.groups");
  return groups;
}

async function run(args: string[]): Promise<{ code: number; output: string }> {
  if (!promtool) throw new Error("promtool is not installed (apt-get install prometheus)");
  const out = await new Deno.Command(promtool, { args, stdout: "piped", stderr: "piped" })
    .output();
  const dec = new TextDecoder();
  return { code: out.code, output: dec.decode(out.stdout) + dec.decode(out.stderr) };
}

/** Writes the rule groups as a plain rules file; returns its path. */
async function rulesFile(dir: string): Promise<string> {
  const path = `${dir}/rules.json`;
  await Deno.writeTextFile(path, JSON.stringify({ groups: await ruleGroups() }, null, 2));
  return path;
}

/**
 * The series selector /metrics exports for `name` with these label values, plus the target
 * labels a scrape adds. Throws when the collectors export no such series.
 */
function exported(text: string, name: string, labels: Record<string, string>): string {
  const line = text.split("\n").find((l) =>
    l.startsWith(`${name}{`) &&
    Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`))
  );
  if (!line) throw new Error(`/metrics exports no ${name} with ${JSON.stringify(labels)}`);
  const selector = line.slice(0, line.lastIndexOf("}"));
  return `${selector},job="cocoon-operator-metrics",instance="cocoon-operator-7d9f:8080"}`;
}

/** Exercises the real collectors and returns their exposition text. */
async function exposition(): Promise<string> {
  register();
  subAgentDeadLetterTotal.inc({ namespace: "team-a", cocoonset: "agents" });
  subAgentDeadLetterTotal.inc({ namespace: "team-b", cocoonset: "calm" });
  slotReleaseWakeUnschedulableTotal.inc({ namespace: "team-a", cocoonset: "agents" });
  slotReleaseWakeUnschedulableTotal.inc({ namespace: "team-b", cocoonset: "calm" });
  for (const h of [hibernatePhaseDurationSeconds, wakePhaseDurationSeconds]) {
    h.observe({ result: "timeout" }, 600);
    h.observe({ result: "ok" }, 20);
  }
  for (const controller of ["cocoonset", "cocoonhibernation", "demo"]) {
    reconcileErrors.inc({ controller });
    reconcileTotal.inc({ controller, result: "error" });
    reconcileTotal.inc({ controller, result: "success" });
  }
  leaderElectionMasterStatus.set({ name: LEASE_NAME }, 1);
  rbacFeatureEnabled.set({ feature: "node-checks" }, 0);
  rbacFeatureEnabled.set({ feature: "metrics-authn" }, 1);
  return await registry.metrics();
}

const repeat = (pattern: string, times: number) => Array(times).fill(pattern).join(" ");
const SEVERITY = { severity: "warning" };

/** promtool unit tests: for each alert a firing case and a silent one. */
function unitTests(m: string): unknown[] {
  const deadA = exported(m, "cocoon_operator_subagent_dead_letter_total", {
    namespace: "team-a",
    cocoonset: "agents",
  });
  const deadB = exported(m, "cocoon_operator_subagent_dead_letter_total", {
    namespace: "team-b",
    cocoonset: "calm",
  });
  const unschedA = exported(m, "cocoon_operator_slot_release_wake_unschedulable_total", {
    namespace: "team-a",
    cocoonset: "agents",
  });
  const unschedB = exported(m, "cocoon_operator_slot_release_wake_unschedulable_total", {
    namespace: "team-b",
    cocoonset: "calm",
  });
  const phase = (family: string, result: string) =>
    exported(m, `cocoon_operator_${family}_phase_duration_seconds_count`, { result });
  const errors = (controller: string) =>
    exported(m, "controller_runtime_reconcile_errors_total", { controller });
  const total = (controller: string, result: string) =>
    exported(m, "controller_runtime_reconcile_total", { controller, result });
  const leader = (instance: string) =>
    exported(m, "leader_election_master_status", { name: LEASE_NAME })
      .replace(/instance="[^"]*"/, `instance="${instance}"`);

  const feature = (name: string, instance: string) =>
    exported(m, "cocoon_operator_rbac_feature_enabled", { feature: name })
      .replace(/instance="[^"]*"/, `instance="${instance}"`);

  const annotations = (alert: string, summary: string, description: string) => ({
    summary,
    description,
    runbook_url: `docs/observability.md#${alert.toLowerCase()}`,
  });

  return [
    {
      name: "a dead letter fires for its CocoonSet only; an old one does not",
      interval: "1m",
      input_series: [
        { series: deadA, values: "0 0 0 1 1 1 1 1 1 1" },
        { series: deadB, values: repeat("1", 40) },
      ],
      alert_rule_test: [
        { eval_time: "2m", alertname: "CocoonSubAgentDeadLettered", exp_alerts: [] },
        {
          eval_time: "6m",
          alertname: "CocoonSubAgentDeadLettered",
          exp_alerts: [{
            exp_labels: { ...SEVERITY, namespace: "team-a", cocoonset: "agents" },
            exp_annotations: annotations(
              "CocoonSubAgentDeadLettered",
              "A sub-agent of CocoonSet team-a/agents was given up on",
              "A sub-agent used every rebuild attempt and was dead-lettered in the last 30 " +
                "minutes; it will not be rebuilt again without intervention.",
            ),
          }],
        },
        { eval_time: "39m", alertname: "CocoonSubAgentDeadLettered", exp_alerts: [] },
      ],
    },
    {
      name: "wakes without capacity fire after 15 minutes of Unschedulable passes",
      interval: "1m",
      input_series: [
        { series: unschedA, values: "0+1x40" },
        { series: unschedB, values: repeat("3", 41) },
      ],
      alert_rule_test: [
        { eval_time: "10m", alertname: "CocoonWakeWithoutCapacity", exp_alerts: [] },
        {
          eval_time: "20m",
          alertname: "CocoonWakeWithoutCapacity",
          exp_alerts: [{
            exp_labels: { ...SEVERITY, namespace: "team-a", cocoonset: "agents" },
            exp_annotations: annotations(
              "CocoonWakeWithoutCapacity",
              "Released-seat wakes of team-a/agents find no capacity",
              "Wake pods of released seats have been Unschedulable for at least 15 minutes.",
            ),
          }],
        },
      ],
    },
    ...(["hibernate", "wake"] as const).map((family) => {
      const alert = family === "hibernate" ? "CocoonHibernateTimeouts" : "CocoonWakeTimeouts";
      const state = family === "hibernate" ? "Hibernating" : "Waking";
      const noun = family === "hibernate" ? "hibernations" : "wakes";
      return {
        name: `${family} timeouts fire; successful ${noun} do not`,
        interval: "1m",
        input_series: [
          { series: phase(family, "timeout"), values: "0 0 0 1 2 2 2 2 2 2" },
          { series: phase(family, "ok"), values: "0+5x9" },
        ],
        alert_rule_test: [
          { eval_time: "2m", alertname: alert, exp_alerts: [] },
          {
            eval_time: "9m",
            alertname: alert,
            exp_alerts: [{
              exp_labels: SEVERITY,
              exp_annotations: annotations(
                alert,
                `CocoonHibernations time out while ${state}`,
                `2 ${noun} ran out of time in the last hour.`,
              ),
            }],
          },
        ],
      };
    }),
    {
      name: "reconcile errors fire for the operator's controllers above 10% only",
      interval: "1m",
      input_series: [
        { series: errors("cocoonset"), values: "0+3x40" },
        { series: total("cocoonset", "error"), values: "0+3x40" },
        { series: total("cocoonset", "success"), values: "0+7x40" },
        { series: errors("cocoonhibernation"), values: "0+1x40" },
        { series: total("cocoonhibernation", "error"), values: "0+1x40" },
        { series: total("cocoonhibernation", "success"), values: "0+19x40" },
        { series: errors("demo"), values: "0+9x40" },
        { series: total("demo", "error"), values: "0+9x40" },
        { series: total("demo", "success"), values: "0+1x40" },
      ],
      alert_rule_test: [
        { eval_time: "12m", alertname: "CocoonReconcileErrors", exp_alerts: [] },
        {
          eval_time: "30m",
          alertname: "CocoonReconcileErrors",
          exp_alerts: [{
            exp_labels: { ...SEVERITY, controller: "cocoonset" },
            exp_annotations: annotations(
              "CocoonReconcileErrors",
              "The cocoonset controller fails more than 10% of its reconciles",
              "30% of cocoonset reconciles returned an error over the last 10 minutes, for " +
                "15 minutes.",
            ),
          }],
        },
      ],
    },
    {
      name: "a Lease changing hands every 10 minutes fires; a steady leader does not",
      interval: "1m",
      input_series: [
        { series: leader("a:8080"), values: repeat("1x9 0x9", 3) },
        { series: leader("b:8080"), values: repeat("0x9 1x9", 3) },
      ],
      alert_rule_test: [
        {
          eval_time: "59m",
          alertname: "CocoonLeaderChanges",
          exp_alerts: [{
            exp_labels: SEVERITY,
            exp_annotations: annotations(
              "CocoonLeaderChanges",
              "The cocoon-operator leader keeps changing",
              "The leader-election Lease changed hands 10 times (counted per replica) in the " +
                "last hour.",
            ),
          }],
        },
        { eval_time: "59m", alertname: "CocoonOperatorNoLeader", exp_alerts: [] },
      ],
    },
    {
      name: "no replica leading for 5 minutes is critical",
      interval: "1m",
      input_series: [
        { series: leader("a:8080"), values: `1 1 ${repeat("0", 10)}` },
        { series: leader("b:8080"), values: repeat("0", 12) },
      ],
      alert_rule_test: [
        { eval_time: "4m", alertname: "CocoonOperatorNoLeader", exp_alerts: [] },
        {
          eval_time: "9m",
          alertname: "CocoonOperatorNoLeader",
          exp_alerts: [{
            exp_labels: { severity: "critical" },
            exp_annotations: annotations(
              "CocoonOperatorNoLeader",
              "No cocoon-operator replica holds the leader Lease",
              "Replicas are running but none has led for 5 minutes: nothing reconciles " +
                "CocoonSets or CocoonHibernations.",
            ),
          }],
        },
        { eval_time: "9m", alertname: "CocoonLeaderChanges", exp_alerts: [] },
      ],
    },
    {
      name: "a feature off for lack of RBAC fires after 15 minutes; one granted in time does not",
      interval: "1m",
      input_series: [
        // node-checks stays off on one replica; metrics-authn is granted after 10 minutes.
        { series: feature("node-checks", "a:8080"), values: repeat("0", 30) },
        { series: feature("node-checks", "b:8080"), values: repeat("1", 30) },
        {
          series: feature("metrics-authn", "a:8080"),
          values: `${repeat("0", 10)} ${repeat("1", 20)}`,
        },
      ],
      alert_rule_test: [
        { eval_time: "10m", alertname: "CocoonOperatorFeatureOffForRBAC", exp_alerts: [] },
        {
          eval_time: "25m",
          alertname: "CocoonOperatorFeatureOffForRBAC",
          exp_alerts: [{
            exp_labels: { ...SEVERITY, feature: "node-checks" },
            exp_annotations: annotations(
              "CocoonOperatorFeatureOffForRBAC",
              "cocoon-operator runs without node-checks: its RBAC role lacks the permissions",
              "The operator's ServiceAccount has lacked the RBAC permissions of node-checks for " +
                "15 minutes; its log names the rule to add, and the feature turns on within a " +
                "minute of the grant.",
            ),
          }],
        },
      ],
    },
  ];
}

Deno.test({
  name: `prometheus rules: promtool check rules accepts the PrometheusRule${skipReason}`,
  ignore: skipReason !== "",
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "promrules-" });
    try {
      const { code, output } = await run(["check", "rules", await rulesFile(dir)]);
      assert.equal(code, 0, output);
      const alerts = (await ruleGroups()).flatMap((g) => g.rules).length;
      assert.match(output, new RegExp(`SUCCESS: ${alerts} rules found`));
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: `prometheus rules: promtool check metrics accepts the collectors' exposition${skipReason}`,
  ignore: skipReason !== "",
  async fn() {
    // The real registry (kube/metrics.ts) with every family written: what /metrics serves.
    const child = new Deno.Command(promtool!, {
      args: ["check", "metrics"],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(await exposition()));
    await writer.close();
    const out = await child.output();
    const dec = new TextDecoder();
    assert.equal(out.code, 0, dec.decode(out.stdout) + dec.decode(out.stderr));
  },
});

Deno.test({
  name: `prometheus rules: every alert fires and stays silent as intended${skipReason}`,
  ignore: skipReason !== "",
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "promrules-" });
    try {
      const tests = unitTests(await exposition());
      const file = `${dir}/tests.json`;
      await Deno.writeTextFile(
        file,
        JSON.stringify({
          rule_files: [await rulesFile(dir)],
          evaluation_interval: "1m",
          tests,
        }),
      );
      const { code, output } = await run(["test", "rules", file]);
      assert.equal(code, 0, output);
      assert.match(output, /SUCCESS/);
      // Every alert is asserted firing somewhere.
      const fired = new Set(
        (tests as { alert_rule_test: { alertname: string; exp_alerts: unknown[] }[] }[])
          .flatMap((t) => t.alert_rule_test).filter((a) => a.exp_alerts.length > 0)
          .map((a) => a.alertname),
      );
      const alerts = (await ruleGroups()).flatMap((g) => g.rules).map((r) => r.alert);
      assert.deepEqual([...fired].sort(), [...alerts].sort());
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("prometheus rules: every alert names an existing runbook section", async () => {
  const doc = await Deno.readTextFile(`${repoRoot}docs/observability.md`);
  const anchors = new Set(
    doc.split("\n").filter((l) => /^#{2,4} /.test(l)).map((l) =>
      l.replace(/^#+ /, "").trim().toLowerCase().replace(/[^a-z0-9 -]/g, "").replace(/ /g, "-")
    ),
  );
  for (const rule of (await ruleGroups()).flatMap((g) => g.rules)) {
    assert.equal(
      rule.annotations?.runbook_url,
      `docs/observability.md#${rule.alert.toLowerCase()}`,
    );
    assert.ok(anchors.has(rule.alert.toLowerCase()), `no runbook section for ${rule.alert}`);
    assert.ok(rule.labels?.severity, `${rule.alert} has no severity`);
  }
});
