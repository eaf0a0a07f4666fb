package helm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// cluster is a real API server (envtest: kube-apiserver and etcd, no controllers) and a
// kubeconfig for kubectl and helm.
type cluster struct {
	env []string
}

func startCluster(t *testing.T) cluster {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run make test-helm, which sets it (hack/envtest-assets.sh)")
	}
	env := &envtest.Environment{}
	if _, err := env.Start(); err != nil {
		t.Fatalf("starting the API server: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the API server: %v", err)
		}
	})
	admin, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return cluster{env: []string{"KUBECONFIG=" + path}}
}

func (c cluster) kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := run(t, c.env, strings.NewReader(stdin), "kubectl", args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return out
}

func (c cluster) helm(t *testing.T, args ...string) {
	t.Helper()
	if out, err := run(t, c.env, nil, helmBin(t), args...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// canI asks the API server's authorizer whether the release namespace's ServiceAccount sa may
// do what args say (kubectl auth can-i).
func (c cluster) canI(t *testing.T, sa string, args ...string) bool {
	t.Helper()
	as := "--as=system:serviceaccount:" + namespace + ":" + sa
	out, err := run(t, c.env, nil, "kubectl", append([]string{"auth", "can-i", as}, args...)...)
	answer := strings.TrimSpace(out)
	if answer != "yes" && answer != "no" {
		t.Fatalf("kubectl auth can-i %s %s: %q, %v", as, strings.Join(args, " "), answer, err)
	}
	return answer == "yes"
}

// crdDir runs one of the hack/ scripts that print a directory of CRDs from a Go module.
func crdDir(t *testing.T, script string) string {
	t.Helper()
	out, err := run(t, nil, nil, filepath.Join(root, "hack", script))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// resource is how kubectl names an object in what it prints: kind.group/name.
func resource(obj map[string]any) string {
	kind := strings.ToLower(str(obj, "kind"))
	if group, _, ok := strings.Cut(str(obj, "apiVersion"), "/"); ok {
		kind += "." + group
	}
	return kind + "/" + str(obj, "metadata", "name")
}

func TestAPIServerAcceptsWhatTheChartRenders(t *testing.T) {
	helmBin(t)
	c := startCluster(t)
	c.prepareForChart(t)
	for _, v := range variants {
		t.Run("server-side dry run with "+v.name, func(t *testing.T) {
			c.checkDryRun(t, v.values)
		})
	}
	t.Run("the manager may list Secrets where secretNamespaces says", c.checkManagersSecrets)
	t.Run("the webhook replicas may do only what the webhook needs", c.checkWebhooksPermissions)
	t.Run("a self-signed certificate is kept across upgrades", c.checkSelfSignedKept)
}

// prepareForChart makes what the chart's objects need beforehand. The default values need
// cert-manager's Certificate and Issuer; one variant the Prometheus Operator's ServiceMonitor
// and PrometheusRule. A dry run creates nothing, so the release namespace must exist, and so
// must the namespaces variants put objects in (secretNamespaces' Roles).
func (c cluster) prepareForChart(t *testing.T) {
	t.Helper()
	c.kubectl(t, "", "apply", "--server-side", "-f", crdDir(t, "cert-manager-crds.sh"))
	prom := crdDir(t, "prometheus-operator-crds.sh")
	c.kubectl(t, "", "apply", "--server-side",
		"-f", filepath.Join(prom, "monitoring.coreos.com_servicemonitors.yaml"),
		"-f", filepath.Join(prom, "monitoring.coreos.com_prometheusrules.yaml"))
	c.kubectl(t, "", "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
	c.kubectl(t, "", "create", "namespace", namespace)
	made := map[string]bool{namespace: true}
	for _, v := range variants {
		for _, obj := range mustTemplate(t, v.values) {
			if ns := str(obj, "metadata", "namespace"); ns != "" && !made[ns] {
				c.kubectl(t, "", "create", "namespace", ns)
				made[ns] = true
			}
		}
	}
}

// checkDryRun applies what the chart renders with values as a server-side dry run, and checks
// that the API server accepted every object.
func (c cluster) checkDryRun(t *testing.T, values string) {
	out, err := template(t, values, "--include-crds")
	if err != nil {
		t.Fatal(err)
	}
	objs := parse(t, out)
	applied := c.kubectl(t, out, "apply", "--dry-run=server", "-f", "-")
	// kubectl names no namespace: the Roles secretNamespaces makes share one line.
	lines := map[string]bool{}
	reported := strings.Split(strings.TrimSpace(applied), "\n")
	for _, l := range reported {
		lines[l] = true
	}
	for _, obj := range objs {
		r := resource(obj)
		if !lines[r+" created (server dry run)"] && !lines[r+" configured (server dry run)"] {
			t.Errorf("%s is not reported created or configured (server dry run)", r)
		}
	}
	if len(reported) != len(objs) {
		t.Errorf("%d objects rendered, kubectl reports:\n%s", len(objs), applied)
	}
}

// checkManagersSecrets checks what the API server's authorizer lets the manager's
// ServiceAccount do with Secrets, as installed: everywhere by default, only in the listed
// namespaces and its own (where ClusterModelEndpoints' keys are) with secretNamespaces.
func (c cluster) checkManagersSecrets(t *testing.T) {
	c.kubectl(t, "", "create", "namespace", "team-c")
	for _, tc := range []struct {
		values string
		want   map[string]bool // by namespace; "" is every namespace at once (-A)
	}{
		{"", map[string]bool{"": true, "team-a": true, "team-c": true}},
		{"secretNamespaces: [team-a, team-b]", map[string]bool{"": false, "team-a": true, "team-b": true, "team-c": false, namespace: true}},
	} {
		c.checkManagerInstalledWith(t, tc.values, tc.want)
	}
}

// checkManagerInstalledWith installs the chart with values and checks, for each namespace in
// want ("" for every namespace at once), whether the manager may list and watch Secrets there.
func (c cluster) checkManagerInstalledWith(t *testing.T, values string, want map[string]bool) {
	t.Helper()
	c.helm(t, "install", release, chart, "--namespace", namespace, "-f", valuesFile(t, values))
	defer c.helm(t, "uninstall", release, "--namespace", namespace)
	for ns, may := range want {
		where := []string{"-n", ns}
		if ns == "" {
			where = []string{"-A"}
		}
		for _, verb := range []string{"list", "watch"} {
			if got := c.canI(t, "baton-controller-manager", append([]string{verb, "secrets"}, where...)...); got != may {
				t.Errorf("installed with %q, may the manager %s Secrets %s? %t, want %t", values, verb, strings.Join(where, " "), got, may)
			}
		}
	}
}

// checkWebhooksPermissions: the webhook replicas' ServiceAccount may ask who it is and who may
// approve, and may read and write nothing; the controllers' may (so that the refusals are the
// webhook's own).
func (c cluster) checkWebhooksPermissions(t *testing.T) {
	c.helm(t, "install", release, chart, "--namespace", namespace)
	defer c.helm(t, "uninstall", release, "--namespace", namespace)
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"create", "subjectaccessreviews.authorization.k8s.io"}, true},
		{[]string{"create", "selfsubjectreviews.authentication.k8s.io"}, true},
		{[]string{"list", "secrets", "-A"}, false},
		{[]string{"list", "secrets", "-n", namespace}, false},
		// A run created from a turn (spec.from, spec.replay) needs get on the turn's session:
		// the webhook reads the run it names to know. It reads runs; it writes none.
		{[]string{"get", "agentruns.agents.baton.dev", "-A"}, true},
		{[]string{"list", "agentruns.agents.baton.dev", "-A"}, false},
		{[]string{"create", "agentruns.agents.baton.dev", "-n", "default"}, false},
		{[]string{"patch", "agentruns.agents.baton.dev", "-n", "default"}, false},
		{[]string{"get", "agentconfigs.agents.baton.dev", "-A"}, false},
		{[]string{"create", "tokenreviews.authentication.k8s.io"}, false},
		{[]string{"get", "leases.coordination.k8s.io", "-n", namespace}, false},
	} {
		if got := c.canI(t, "baton-webhook", tc.args...); got != tc.want {
			t.Errorf("may the webhook replicas %s? %t, want %t", strings.Join(tc.args, " "), got, tc.want)
		}
	}
	for _, args := range [][]string{{"patch", "agentruns.agents.baton.dev", "-n", "default"}, {"list", "secrets", "-A"}} {
		if !c.canI(t, "baton-controller-manager", args...) {
			t.Errorf("the controllers may not %s", strings.Join(args, " "))
		}
	}
}

// checkSelfSignedKept: an upgrade renders the self-signed certificate again; it must find the
// Secret the install made and keep it, with the CA the webhook trusts.
func (c cluster) checkSelfSignedKept(t *testing.T) {
	values := valuesFile(t, "webhook: {certificate: {source: self-signed}}")
	secret := func() map[string]any {
		t.Helper()
		var s map[string]any
		if err := json.Unmarshal([]byte(c.kubectl(t, "", "get", "secret", "-n", namespace, "webhook-server-cert", "-o", "json")), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	c.helm(t, "install", release, chart, "--namespace", namespace, "-f", values)
	t.Cleanup(func() { c.helm(t, "uninstall", release, "--namespace", namespace) })
	installed := secret()
	c.helm(t, "upgrade", release, chart, "--namespace", namespace, "-f", values)
	for _, d := range differences("data", installed["data"], secret()["data"]) {
		t.Errorf("Secret/webhook-server-cert was replaced: %s", d)
	}
	var webhook map[string]any
	out := c.kubectl(t, "", "get", "mutatingwebhookconfiguration", "baton-mutating-webhook-configuration", "-o", "json")
	if err := json.Unmarshal([]byte(out), &webhook); err != nil {
		t.Fatal(err)
	}
	if str(webhook, "webhooks", 0, "clientConfig", "caBundle") != str(installed, "data", "ca.crt") {
		t.Error("after the upgrade the webhook's caBundle is not the kept CA")
	}
	// Without a Secret to find, every render makes a new CA: the lookup is what keeps it.
	fresh := mustTemplate(t, "webhook: {certificate: {source: self-signed}}")["Secret/webhook-server-cert"]
	if str(fresh, "data", "ca.crt") == str(installed, "data", "ca.crt") {
		t.Error("a render without the cluster made the installed CA again")
	}
}
