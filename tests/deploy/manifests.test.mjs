// Offline validation of deploy/ (no cluster, no Prometheus, no Grafana here): the Kubernetes
// manifests against the Kubernetes OpenAPI schemas (kubernetes-models' validate()), the timing
// rules between them, and that the Prometheus config, the Grafana dashboard and the systemd
// unit name only things llmserve has (metric names read from src/server/metrics.cc).
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import YAML from "yaml";
import { Deployment } from "kubernetes-models/apps/v1";
import { Service, ConfigMap } from "kubernetes-models/v1";
import { HorizontalPodAutoscaler } from "kubernetes-models/autoscaling/v2";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";

const DEPLOY = process.env.DEPLOY_DIR;
const SRC = path.join(DEPLOY, "..", "src", "server", "metrics.cc");
const read = (p) => fs.readFileSync(path.join(DEPLOY, p), "utf8");

const KINDS = {
  "apps/v1/Deployment": Deployment,
  "v1/Service": Service,
  "v1/ConfigMap": ConfigMap,
  "autoscaling/v2/HorizontalPodAutoscaler": HorizontalPodAutoscaler,
  "policy/v1/PodDisruptionBudget": PodDisruptionBudget,
};

function yamlDocs(file) {
  const docs = YAML.parseAllDocuments(read(file));
  for (const d of docs) assert.deepEqual(d.errors, [], `${file}: ${d.errors}`);
  return docs.map((d) => d.toJS()).filter((d) => d !== null);
}

/// Every metric name llmserve exports (vllm:* and llmserve:*), from metrics.cc.
function exportedMetrics() {
  const src = fs.readFileSync(SRC, "utf8");
  return new Set([...src.matchAll(/"((?:vllm|llmserve):[a-z0-9_]+)/g)].map((m) => m[1]));
}

function flag(args, name) {
  const a = args.find((x) => x.startsWith(`--${name}=`));
  return a === undefined ? undefined : a.slice(name.length + 3);
}

test("Kubernetes manifests validate against the Kubernetes schemas", () => {
  for (const file of ["k8s/llmserve.yaml", "k8s/prometheus-adapter-rules.yaml"]) {
    const docs = yamlDocs(file);
    assert.ok(docs.length > 0, file);
    for (const doc of docs) {
      const Model = KINDS[`${doc.apiVersion}/${doc.kind}`];
      assert.ok(Model, `${file}: no schema known for ${doc.apiVersion} ${doc.kind}`);
      assert.doesNotThrow(() => new Model(doc).validate(), `${file}: ${doc.kind} ${doc.metadata?.name}`);
    }
  }
  // The validator does catch mistakes (so that passing means something).
  const bad = yamlDocs("k8s/llmserve.yaml").find((d) => d.kind === "Deployment");
  bad.spec.template.spec.containers[0].ports[0].containerPort = "8000";
  assert.throws(() => new Deployment(bad).validate());
});

test("Deployment: probes on /health, drain timing consistent, Service and HPA match", () => {
  const docs = yamlDocs("k8s/llmserve.yaml");
  const dep = docs.find((d) => d.kind === "Deployment");
  const pod = dep.spec.template.spec;
  const c = pod.containers[0];
  assert.equal(c.args[0], "serve");
  for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"])
    assert.equal(c[probe].httpGet.path, "/health", probe);
  const shutdown = Number(flag(c.args, "shutdown-timeout"));
  assert.ok(shutdown > 0);
  const preStop = Number(c.lifecycle.preStop.exec.command.at(-1));
  // serve exits by itself 15 s after --shutdown-timeout (src/cli/serve.cc).
  assert.ok(pod.terminationGracePeriodSeconds >= preStop + shutdown + 15,
            `grace ${pod.terminationGracePeriodSeconds} < ${preStop} + ${shutdown} + 15`);
  // A draining pod (/health 503) must not be restarted by its liveness probe.
  const live = c.livenessProbe;
  assert.ok(live.periodSeconds * live.failureThreshold > shutdown);
  assert.equal(c.ports[0].containerPort, Number(flag(c.args, "port")));
  assert.ok(flag(c.args, "replica-id"));
  // --threads matches the whole CPUs it is given.
  assert.equal(String(c.resources.limits.cpu), flag(c.args, "threads"));

  const labels = dep.spec.template.metadata.labels;
  for (const svc of docs.filter((d) => d.kind === "Service"))
    for (const [k, v] of Object.entries(svc.spec.selector)) assert.equal(labels[k], v, svc.metadata.name);
  const hpa = docs.find((d) => d.kind === "HorizontalPodAutoscaler");
  assert.equal(hpa.spec.scaleTargetRef.name, dep.metadata.name);
  const metricName = hpa.spec.metrics[0].pods.metric.name;
  assert.equal(metricName, "vllm_num_requests_waiting");
  assert.ok(exportedMetrics().has("vllm:num_requests_waiting"));
  // The adapter rule produces that name.
  const cm = yamlDocs("k8s/prometheus-adapter-rules.yaml")[0];
  const rule = YAML.parse(cm.data["config.yaml"]).rules[0];
  assert.ok(rule.seriesQuery.startsWith("vllm:num_requests_waiting"));
  assert.equal("vllm:num_requests_waiting".replace(new RegExp(rule.name.matches), rule.name.as.replace("${1}", "$1")),
               metricName);
});

test("Prometheus scrape config: every job scrapes /metrics", () => {
  const prom = YAML.parse(read("prometheus/prometheus.yml"));
  assert.ok(prom.scrape_configs.length >= 1);
  for (const job of prom.scrape_configs) {
    assert.ok(job.job_name);
    assert.equal(job.metrics_path, "/metrics");
    assert.ok(job.static_configs || job.kubernetes_sd_configs, job.job_name);
  }
});

test("Grafana dashboard queries only metrics llmserve exports", () => {
  const dash = JSON.parse(read("grafana/llmserve.json"));
  const exported = exportedMetrics();
  assert.ok(exported.has("llmserve:replica_info"));
  const ids = new Set();
  let queries = 0;
  for (const p of dash.panels) {
    assert.ok(!ids.has(p.id), `duplicate panel id ${p.id}`);
    ids.add(p.id);
    assert.ok(p.title && p.gridPos && p.targets.length > 0, p.title);
    for (const t of p.targets) {
      queries += 1;
      const names = [...t.expr.matchAll(/((?:vllm|llmserve):[a-z0-9_]+?)(?:_bucket)?(?=[{\[ )])/g)].map((m) => m[1]);
      assert.ok(names.length > 0, t.expr);
      for (const n of names) assert.ok(exported.has(n), `${p.title}: ${n} is not exported`);
    }
  }
  assert.ok(queries >= 12);
});

test("systemd unit: restart on failure, SIGTERM drain fits in TimeoutStopSec", () => {
  const unit = read("systemd/llmserve@.service");
  const get = (k) => unit.match(new RegExp(`^${k}=(.*)$`, "m"))?.[1];
  assert.equal(get("Restart"), "on-failure");
  assert.equal(get("KillSignal"), "SIGTERM");
  assert.ok(get("LimitNOFILE"));
  assert.ok(get("MemoryMax") && get("CPUQuota"));
  const shutdown = Number(unit.match(/--shutdown-timeout (\d+)/)[1]);
  const stop = Number(get("TimeoutStopSec"));
  assert.ok(stop > shutdown + 15, `TimeoutStopSec ${stop} <= ${shutdown} + 15`);
  assert.match(unit, /--replica-id %H:%i/);
});
