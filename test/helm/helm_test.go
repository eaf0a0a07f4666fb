// Package helm checks the Helm chart charts/baton: that it lints clean with its default values
// and the variants people will use, that with the defaults it renders what
// `kubectl kustomize config/default` renders (the same objects, names, rules, webhook, pods and
// Services), that its values do what they say, and that a real API server accepts every object
// it renders (a server-side dry run, with cert-manager's and the Prometheus Operator's CRDs
// installed) and grants the operator what they say once installed. It also checks that every
// flag the chart passes is one the manager has, and that docs/operations.md lists every value.
package helm

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

var (
	root  = filepath.Join("..", "..")
	chart = filepath.Join(root, "charts", "baton")
)

// The release config/default corresponds to: its namePrefix is baton-, its namespace
// baton-system.
const (
	release   = "baton"
	namespace = "baton-system"
)

// variant is a set of values the chart supports, with what it must render because of them.
type variant struct {
	name   string
	values string
	check  func(t *testing.T, objs objects)
}

var variants = []variant{
	{name: "the default values", check: func(t *testing.T, objs objects) {
		checkDefaults(t, objs)
		checkWebhookIdentity(t, objs)
	}},
	{name: "a self-signed webhook certificate", values: `
webhook:
  certificate:
    source: self-signed
`, check: checkSelfSigned},
	{name: "PostgreSQL with two controller replicas", values: `
controller:
  replicas: 2
transcript:
  store: postgres
  postgres:
    dsn: postgres://baton@postgres.baton-system.svc:5432/baton?sslmode=verify-full
    passwordSecret:
      name: baton-postgres
      key: pg-password
`, check: checkPostgres},
	{name: "the ServiceMonitor and the PrometheusRule", values: `
metrics:
  serviceMonitor:
    enabled: true
    labels:
      release: prometheus
  prometheusRule:
    enabled: true
`, check: checkMonitoring},
	{name: "traces to an OTLP collector, with their content", values: `
traces:
  otlpEndpoint: http://otel-collector.observability.svc:4318
  protocol: http/protobuf
  content: true
`, check: checkTraces},
	{name: "scheduling constraints, pull secrets, pod metadata and extra flags", values: `
imagePullSecrets: [{name: regcred}]
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: dedicated, operator: Equal, value: baton, effect: NoSchedule}]
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector: {matchLabels: {app.kubernetes.io/name: baton}}
podAnnotations: {example.com/team: agents}
podLabels: {example.com/tier: platform}
logLevel: debug
controller:
  extraArgs: [--enable-http2]
webhook:
  extraArgs: [--webhook-port=9443]
transcript:
  sqlite:
    size: 20Gi
    storageClass: fast-ssd
`, check: checkScheduling},
	{name: "teams served as A2A agents at an address and for an audience of their own, with shorter streams", values: `
a2a:
  url: https://baton.example.com
  tokenAudience: baton.example.com
  streamLifetime: 20m
`, check: checkA2A},
	{name: "Secrets read in two namespaces only", values: `
secretNamespaces: [team-a, team-b]
`, check: checkSecretNamespaces("team-a", "team-b")},
	{name: "Secrets read in the release namespace and one other", values: `
secretNamespaces: [team-a, baton-system]
`, check: checkSecretNamespaces("team-a", "baton-system")},
	{name: "an egress policy with allowed and denied addresses", values: `
egress:
  allow: [10.96.12.7/32, ollama.models.svc.cluster.local, "*.models.example.com"]
  deny: [10.244.0.0/16, 10.96.0.0/12]
`, check: checkEgressFlags},
	{name: "the webhook's client CA from a Secret", values: `
webhook:
  clientCA:
    secretName: apiserver-client-ca
`, check: checkClientCA("secret", "apiserver-client-ca", "ca.crt")},
	{name: "the webhook's client CA from a ConfigMap", values: `
webhook:
  clientCA:
    configMapName: kube-root-ca
    key: bundle.pem
`, check: checkClientCA("configMap", "kube-root-ca", "bundle.pem")},
	{name: "the NetworkPolicy with its defaults", values: `
networkPolicy:
  enabled: true
`, check: checkNetworkPolicyDefaults},
	{name: "the NetworkPolicy with the API server's address, peers and more egress", values: networkPolicyValues,
		check: checkNetworkPolicyPeers},
}

// helmBin is the helm binary: make test-helm builds it once (hack/tool.sh helm).
func helmBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("HELM")
	if bin == "" {
		t.Fatal("HELM is not set: run make test-helm, which builds helm (hack/tool.sh helm)")
	}
	return bin
}

// run runs a command and returns its stdout; stderr comes back in the error.
func run(t *testing.T, env []string, stdin io.Reader, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), errors.New(strings.Join([]string{name, strings.Join(args, " "), err.Error(), stderr.String()}, ": "))
	}
	return stdout.String(), nil
}

// valuesFile writes a variant's values where helm can read them (-f), since a DSN's "?" and "="
// would not survive --set. Not in t.TempDir(): helm splits -f at commas, which test names have.
func valuesFile(t *testing.T, values string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "baton-helm-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	path := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(path, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// template renders the chart as release baton in baton-system, with the given values.
func template(t *testing.T, values string, flags ...string) (string, error) {
	t.Helper()
	args := append([]string{"template", release, chart, "--namespace", namespace, "-f", valuesFile(t, values)}, flags...)
	return run(t, nil, nil, helmBin(t), args...)
}

func mustTemplate(t *testing.T, values string, flags ...string) objects {
	t.Helper()
	out, err := template(t, values, flags...)
	if err != nil {
		t.Fatal(err)
	}
	return parse(t, out)
}

// objects are rendered objects by "Kind/name", or "Kind/namespace/name" for those outside the
// release namespace (the Roles secretNamespaces makes, one per namespace with one name).
type objects map[string]map[string]any

func key(obj map[string]any) string {
	if ns := str(obj, "metadata", "namespace"); ns != "" && ns != namespace {
		return str(obj, "kind") + "/" + ns + "/" + str(obj, "metadata", "name")
	}
	return str(obj, "kind") + "/" + str(obj, "metadata", "name")
}

// namespaced is the key of an object of kind named name in namespace ns.
func namespaced(kind, ns, name string) string {
	return key(map[string]any{"kind": kind, "metadata": map[string]any{"name": name, "namespace": ns}})
}

// parse reads multi-document YAML, as helm and kustomize write it.
func parse(t *testing.T, data string) objects {
	t.Helper()
	objs := objects{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		if obj == nil {
			continue
		}
		if _, dup := objs[key(obj)]; dup {
			t.Fatalf("%s is rendered twice", key(obj))
		}
		objs[key(obj)] = obj
	}
}

// get follows a path of map keys, and of list indexes given as ints.
func get(v any, path ...any) any {
	for _, p := range path {
		switch p := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[p]
		case int:
			l, _ := v.([]any)
			if p >= len(l) {
				return nil
			}
			v = l[p]
		}
	}
	return v
}

func str(v any, path ...any) string {
	s, _ := get(v, path...).(string)
	return s
}

// container is the manager container of a Deployment.
func container(t *testing.T, objs objects, deployment string) map[string]any {
	t.Helper()
	d, ok := objs["Deployment/"+deployment]
	if !ok {
		t.Fatalf("no Deployment %s", deployment)
	}
	for _, c := range get(d, "spec", "template", "spec", "containers").([]any) {
		if str(c, "name") == "manager" {
			return c.(map[string]any)
		}
	}
	t.Fatalf("Deployment %s has no manager container", deployment)
	return nil
}

func args(c map[string]any) []string {
	var out []string
	for _, a := range get(c, "args").([]any) {
		out = append(out, a.(string))
	}
	return out
}

func TestChartLintsCleanly(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			out, err := run(t, nil, nil, helmBin(t), "lint", "--strict", chart, "--namespace", namespace, "-f", valuesFile(t, v.values))
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") || !strings.Contains(out, "0 chart(s) failed") {
				t.Errorf("helm lint:\n%s", out)
			}
		})
	}
}

func TestVariantsRenderWhatTheirValuesSay(t *testing.T) {
	for _, v := range variants {
		if v.check == nil {
			continue
		}
		t.Run(v.name, func(t *testing.T) { v.check(t, mustTemplate(t, v.values)) })
	}
}

// Every value says what it does: a comment right above each key that holds a value, or above a
// key it is part of (resources' requests and limits are one value).
func TestEveryValueIsCommented(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	keyLine := regexp.MustCompile(`^(\s*)[A-Za-z][\w.-]*:(.*)$`)
	type open struct {
		indent    int
		commented bool
	}
	var stack []open
	lines := strings.Split(string(raw), "\n")
	for i, line := range lines {
		m := keyLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		indent := len(m[1])
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		commented := i > 0 && strings.HasPrefix(lines[i-1], m[1]+"#")
		inside := len(stack) > 0 && stack[len(stack)-1].commented
		if leaf := strings.TrimSpace(m[2]) != ""; leaf && !commented && !inside {
			t.Errorf("values.yaml:%d: %q has no comment right above it", i+1, strings.TrimSpace(line))
		}
		stack = append(stack, open{indent, commented || inside})
	}
}

func checkSelfSigned(t *testing.T, objs objects) {
	secret, ok := objs["Secret/webhook-server-cert"]
	if !ok {
		t.Fatal("no Secret webhook-server-cert")
	}
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if _, err := base64.StdEncoding.DecodeString(str(secret, "data", k)); err != nil || str(secret, "data", k) == "" {
			t.Errorf("Secret webhook-server-cert: data[%s] is not base64 PEM: %v", k, err)
		}
	}
	config := objs["MutatingWebhookConfiguration/baton-mutating-webhook-configuration"]
	if got := str(config, "webhooks", 0, "clientConfig", "caBundle"); got != str(secret, "data", "ca.crt") {
		t.Errorf("the webhook's caBundle is not the Secret's ca.crt")
	}
	if a := get(config, "metadata", "annotations", "cert-manager.io/inject-ca-from"); a != nil {
		t.Errorf("the webhook configuration still asks cert-manager for its CA: %v", a)
	}
	for _, k := range []string{"Certificate/baton-serving-cert", "Issuer/baton-selfsigned-issuer"} {
		if _, ok := objs[k]; ok {
			t.Errorf("%s is rendered without cert-manager", k)
		}
	}
}

func checkPostgres(t *testing.T, objs objects) {
	d := objs["Deployment/baton-controller-manager"]
	if r := get(d, "spec", "replicas"); r != float64(2) {
		t.Errorf("replicas: %v, want 2", r)
	}
	if s := str(d, "spec", "strategy", "type"); s != "RollingUpdate" {
		t.Errorf("strategy: %s, want RollingUpdate", s)
	}
	c := container(t, objs, "baton-controller-manager")
	want := "--transcript-store=postgres://baton@postgres.baton-system.svc:5432/baton?sslmode=verify-full"
	found := false
	for _, a := range args(c) {
		found = found || a == want
		if strings.Contains(strings.ToLower(a), "password") {
			t.Errorf("an arg mentions a password: %s", a)
		}
	}
	if !found {
		t.Errorf("args %q lack %s", args(c), want)
	}
	var pg any
	for _, e := range get(c, "env").([]any) {
		if str(e, "name") == "PGPASSWORD" {
			pg = e
		}
	}
	if ref := get(pg, "valueFrom", "secretKeyRef"); str(ref, "name") != "baton-postgres" || str(ref, "key") != "pg-password" || get(pg, "value") != nil {
		t.Errorf("PGPASSWORD is not from the Secret baton-postgres, key pg-password: %v", pg)
	}
	if _, ok := objs["PersistentVolumeClaim/baton-controller-data"]; ok {
		t.Error("a PersistentVolumeClaim is rendered for PostgreSQL")
	}
	for _, m := range get(c, "volumeMounts").([]any) {
		if str(m, "name") == "data" {
			t.Errorf("the data volume is mounted for PostgreSQL: %v", m)
		}
	}
}

// checkMonitoring compares the ServiceMonitor and the PrometheusRule with config/prometheus's,
// which has no name prefix, and the rules with rules.yaml, the file promtool tests.
func checkMonitoring(t *testing.T, objs objects) {
	rendered, err := run(t, nil, nil, "kubectl", "kustomize", filepath.Join(root, "config", "prometheus"))
	if err != nil {
		t.Fatal(err)
	}
	config := parse(t, rendered)
	for configName, chartName := range map[string]string{
		"ServiceMonitor/system/controller-manager-metrics-monitor": "ServiceMonitor/baton-controller-manager-metrics-monitor",
		"PrometheusRule/rules": "PrometheusRule/baton-rules",
	} {
		want, got := config[configName], objs[chartName]
		if want == nil || got == nil {
			t.Errorf("config/prometheus renders %s: %t; the chart renders %s: %t", configName, want != nil, chartName, got != nil)
			continue
		}
		for _, d := range differences("spec", want["spec"], got["spec"]) {
			t.Errorf("%s: %s", chartName, d)
		}
		for k, v := range get(want, "metadata", "labels").(map[string]any) {
			if got := get(got, "metadata", "labels", k); got != v {
				t.Errorf("%s: label %s is %v, config/prometheus has %v", chartName, k, got, v)
			}
		}
	}
	if l := str(objs["ServiceMonitor/baton-controller-manager-metrics-monitor"], "metadata", "labels", "release"); l != "prometheus" {
		t.Errorf("the ServiceMonitor lacks metrics.serviceMonitor.labels: release=%q", l)
	}
	raw, err := os.ReadFile(filepath.Join(root, "config", "prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules map[string]any
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatal(err)
	}
	for _, d := range differences("spec.groups", rules["groups"], get(objs["PrometheusRule/baton-rules"], "spec", "groups")) {
		t.Errorf("PrometheusRule/baton-rules against rules.yaml: %s", d)
	}
}

func checkTraces(t *testing.T, objs objects) {
	c := container(t, objs, "baton-controller-manager")
	env := map[string]string{}
	for _, e := range get(c, "env").([]any) {
		env[str(e, "name")] = str(e, "value")
	}
	if env["OTEL_EXPORTER_OTLP_ENDPOINT"] != "http://otel-collector.observability.svc:4318" || env["OTEL_EXPORTER_OTLP_PROTOCOL"] != "http/protobuf" {
		t.Errorf("env: %v", env)
	}
	if a := args(c); !strings.Contains(strings.Join(a, " "), "--trace-content") {
		t.Errorf("args %q lack --trace-content", a)
	}
}

func checkScheduling(t *testing.T, objs objects) {
	for _, name := range []string{"baton-controller-manager", "baton-webhook"} {
		pod := get(objs["Deployment/"+name], "spec", "template")
		for _, p := range [][]any{
			{"spec", "imagePullSecrets", 0, "name"},
			{"spec", "nodeSelector", "kubernetes.io/os"},
			{"spec", "tolerations", 0, "key"},
			{"spec", "affinity", "podAntiAffinity"},
			{"metadata", "annotations", "example.com/team"},
			{"metadata", "annotations", "kubectl.kubernetes.io/default-container"},
			{"metadata", "labels", "example.com/tier"},
		} {
			if get(pod, p...) == nil {
				t.Errorf("Deployment %s: the pod lacks %v", name, p)
			}
		}
		if a := strings.Join(args(container(t, objs, name)), " "); !strings.Contains(a, "--zap-log-level=debug") {
			t.Errorf("Deployment %s: args %s lack --zap-log-level=debug", name, a)
		}
	}
	if a := args(container(t, objs, "baton-controller-manager")); a[len(a)-1] != "--enable-http2" {
		t.Errorf("controller args %q do not end with the extra arg", a)
	}
	pvc := objs["PersistentVolumeClaim/baton-controller-data"]
	if str(pvc, "spec", "storageClassName") != "fast-ssd" || str(pvc, "spec", "resources", "requests", "storage") != "20Gi" {
		t.Errorf("PersistentVolumeClaim: %v", pvc["spec"])
	}
}

// Every value values.yaml documents (a "# --" comment above it) is in docs/operations.md's
// table of values. A row names values in backquotes; after `a.b.c`, `.d` is `a.b.d` and `.x.d`
// is `a.x.d`.
func TestEveryValueIsInTheOperationsGuide(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	keyLine := regexp.MustCompile(`^(\s*)([A-Za-z][\w.-]*):`)
	var path []string // the keys open at each depth of two spaces
	var documented []string
	lines := strings.Split(string(raw), "\n")
	for i, line := range lines {
		m := keyLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		depth := len(m[1]) / 2
		path = append(path[:min(depth, len(path))], m[2])
		if i > 0 && strings.HasPrefix(strings.TrimSpace(lines[i-1]), "#") {
			// The comment above may run over several lines: find its first.
			j := i - 1
			for j > 0 && strings.HasPrefix(strings.TrimSpace(lines[j-1]), "#") {
				j--
			}
			if strings.HasPrefix(strings.TrimSpace(lines[j]), "# --") {
				documented = append(documented, strings.Join(path, "."))
			}
		}
	}

	guide, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(guide), "| value | default | what it does |")
	table, _, _ = strings.Cut(table, "\n\n")
	listed := map[string]bool{}
	for _, row := range strings.Split(table, "\n") {
		first, _, _ := strings.Cut(strings.TrimPrefix(row, "|"), "|")
		last := ""
		for _, name := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(first, -1) {
			full := name[1]
			if strings.HasPrefix(full, ".") && last != "" {
				prev := strings.Split(last, ".")
				full = strings.Join(prev[:max(len(prev)-strings.Count(full, "."), 0)], ".") + full
			}
			listed[full] = true
			last = full
		}
	}
	if len(listed) == 0 {
		t.Fatal("docs/operations.md has no table of values")
	}
	for _, v := range documented {
		if !listed[v] {
			t.Errorf("values.yaml documents %s, and docs/operations.md's table of values does not list it", v)
		}
	}
}

// checkA2A: the A2A values are the controllers' flags; the webhook replicas serve no A2A.
func checkA2A(t *testing.T, objs objects) {
	a := args(container(t, objs, "baton-controller-manager"))
	for _, want := range []string{"--a2a-url=https://baton.example.com", "--a2a-token-audience=baton.example.com", "--a2a-stream-lifetime=20m"} {
		if !slices.Contains(a, want) {
			t.Errorf("controller args %q lack %s", a, want)
		}
	}
	if a := strings.Join(args(container(t, objs, "baton-webhook")), " "); strings.Contains(a, "--a2a-") {
		t.Errorf("webhook args %s have A2A flags", a)
	}
}
