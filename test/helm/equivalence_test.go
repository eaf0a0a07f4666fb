package helm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	apiresource "k8s.io/apimachinery/pkg/api/resource"

	"github.com/baton-dev/baton/internal/a2aserver"
	"github.com/baton-dev/baton/internal/operator"
)

// managerDefaults are the flags the chart states with the manager's own defaults, so that
// values.yaml is the one place to change them; config/default leaves them out, which behaves
// the same. Taken from the manager where it exports them, so that a changed default shows here.
var managerDefaults = map[string]string{
	"--max-concurrent-reconciles": "8", // main.go's flag default
	"--max-steps-in-flight":       strconv.Itoa(operator.DefaultMaxStepsInFlight),
	"--status-batch-period":       operator.DefaultStatusBatchPeriod.String(),
	"--replay-max-read-bytes":     apiresource.NewQuantity(operator.DefaultReplayMaxReadBytes, apiresource.BinarySI).String(),
	"--max-replays-in-flight":     strconv.Itoa(operator.DefaultMaxReplaysInFlight),
	"--max-replays-per-namespace": strconv.Itoa(operator.DefaultMaxReplaysPerNamespace),
	"--a2a-stream-lifetime":       a2aserver.DefaultStreamLifetime.String(),
	"--a2a-token-audience":        a2aserver.DefaultTokenAudience,
	"--zap-log-level":             "info", // controller-runtime's zap logger outside development mode
}

// The chart's copies of files under config/ (hack/chart-sync.sh makes them) are byte-identical.
func TestChartFilesAreCopiesOfConfig(t *testing.T) {
	bases, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(bases) == 0 {
		t.Fatalf("no CRDs under config/crd/bases: %v", err)
	}
	copies, _ := filepath.Glob(filepath.Join(chart, "crds", "*"))
	if len(copies) != len(bases) {
		t.Errorf("charts/baton/crds has %d files, config/crd/bases %d: run hack/chart-sync.sh", len(copies), len(bases))
	}
	pairs := [][2]string{
		{filepath.Join("config", "rbac", "role.yaml"), filepath.Join("files", "manager-role.yaml")},
		{filepath.Join("config", "rbac", "webhook_role.yaml"), filepath.Join("files", "webhook-role.yaml")},
		{filepath.Join("config", "webhook", "manifests.yaml"), filepath.Join("files", "webhook-manifests.yaml")},
		{filepath.Join("config", "prometheus", "rules.yaml"), filepath.Join("files", "rules.yaml")},
	}
	for _, b := range bases {
		pairs = append(pairs, [2]string{filepath.Join("config", "crd", "bases", filepath.Base(b)), filepath.Join("crds", filepath.Base(b))})
	}
	for _, p := range pairs {
		t.Run(p[0], func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join(root, p[0]))
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(chart, p[1]))
			if err != nil {
				t.Fatalf("%v: run hack/chart-sync.sh", err)
			}
			if !bytes.Equal(want, got) {
				t.Errorf("charts/baton/%s differs from %s: run hack/chart-sync.sh", p[1], p[0])
			}
		})
	}
}

// With its defaults the chart renders every object config/default renders but the Namespace,
// with the same content. What differs on purpose is made equal first, each with its reason
// (normalize); whatever else differs is reported field by field.
func TestChartRendersWhatConfigDefaultRenders(t *testing.T) {
	rendered, err := run(t, nil, nil, "kubectl", "kustomize", filepath.Join(root, "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	config := parse(t, rendered)
	delete(config, "Namespace/"+namespace) // Helm installs into the release namespace.
	helm := mustTemplate(t, "", "--include-crds")

	var missing, extra []string
	for k := range config {
		if _, ok := helm[k]; !ok {
			missing = append(missing, k)
		}
	}
	for k := range helm {
		if _, ok := config[k]; !ok {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing)+len(extra) > 0 {
		t.Errorf("objects config/default renders that the chart does not: %v; objects only the chart renders: %v", missing, extra)
	}

	keys := make([]string, 0, len(config))
	for k := range config {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		want, got := config[k], helm[k]
		if got == nil {
			continue
		}
		t.Run(k, func(t *testing.T) {
			normalize(t, config, want, got)
			var diffs []string
			for _, field := range fields(want, got) {
				if field == "metadata" {
					diffs = append(diffs, metadataDifferences(want, got)...)
					continue
				}
				diffs = append(diffs, differences(field, want[field], got[field])...)
			}
			for _, d := range diffs {
				t.Errorf("%s: %s", k, d)
			}
		})
	}
}

// normalize makes equal, in the chart's object or config's, what differs on purpose.
func normalize(t *testing.T, config objects, want, got map[string]any) {
	switch str(want, "kind") {
	case "Deployment":
		wantContainers, _ := get(want, "spec", "template", "spec", "containers").([]any)
		for i, c := range get(got, "spec", "template", "spec", "containers").([]any) {
			c := c.(map[string]any)
			w, _ := get(wantContainers, i).(map[string]any)
			// config/default's image is a placeholder that make deploy IMG=... replaces; the
			// chart's comes from image.repository, image.tag and image.pullPolicy.
			c["image"] = w["image"]
			delete(c, "imagePullPolicy")
			c["args"] = withoutManagerDefaults(t, w["args"], c["args"])
		}
	case "RoleBinding", "ClusterRoleBinding":
		// A subject naming a ServiceAccount that config/default does not render cannot be what
		// it means; the chart binds the one it renders, which config/default's pods run as.
		subjects, _ := want["subjects"].([]any)
		for i, s := range subjects {
			if str(s, "kind") != "ServiceAccount" || config["ServiceAccount/"+str(s, "name")] != nil && str(s, "namespace") == namespace {
				continue
			}
			sa := str(config["Deployment/baton-controller-manager"], "spec", "template", "spec", "serviceAccountName")
			t.Logf("config/default binds ServiceAccount %s/%s, which it does not render; its Deployments run as %s/%s, "+
				"which the chart binds (config/rbac/service_account.yaml needs namespace: system for kustomize to rename the subject)",
				str(s, "namespace"), str(s, "name"), namespace, sa)
			subjects[i] = map[string]any{"kind": "ServiceAccount", "name": sa, "namespace": namespace}
		}
	}
}

// withoutManagerDefaults drops from the chart's args those config/default lacks that state a
// manager default (managerDefaults); any other extra arg stays, to be reported.
func withoutManagerDefaults(t *testing.T, want, got any) any {
	have := map[string]bool{}
	wantArgs, _ := want.([]any)
	for _, a := range wantArgs {
		have[a.(string)] = true
	}
	gotArgs, _ := got.([]any)
	var out []any
	for _, a := range gotArgs {
		flag, value, _ := strings.Cut(a.(string), "=")
		if !have[a.(string)] && sameSetting(managerDefaults[flag], value) {
			t.Logf("the chart states the manager's default %s (config/default leaves it out)", a)
			continue
		}
		out = append(out, a)
	}
	return out
}

// sameSetting says whether a flag's default and a value the chart gives it are the same
// setting: equal, or the same duration written two ways (1h and 1h0m0s).
func sameSetting(dflt, value string) bool {
	if dflt == "" || value == "" {
		return false
	}
	d, errD := time.ParseDuration(dflt)
	v, errV := time.ParseDuration(value)
	return dflt == value || errD == nil && errV == nil && d == v
}

// fields are the top-level fields of both objects.
func fields(a, b map[string]any) []string {
	var out []string
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// metadataDifferences: the name and namespace are equal, and config's labels and annotations
// are the chart's too; the chart adds Helm's standard labels. managed-by says who applies the
// objects, kustomize or Helm, so it cannot be the same.
func metadataDifferences(want, got map[string]any) []string {
	var diffs []string
	for _, f := range []string{"name", "namespace"} {
		diffs = append(diffs, differences("metadata."+f, get(want, "metadata", f), get(got, "metadata", f))...)
	}
	for _, f := range []string{"labels", "annotations"} {
		w, _ := get(want, "metadata", f).(map[string]any)
		for k, v := range w {
			if f == "labels" && k == "app.kubernetes.io/managed-by" {
				continue
			}
			diffs = append(diffs, differences("metadata."+f+"["+k+"]", v, get(got, "metadata", f, k))...)
		}
	}
	return diffs
}

// differences lists each field where got differs from want, with both values. List elements
// with a name are shown by name.
func differences(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			break
		}
		var out []string
		for _, k := range fields(w, g) {
			out = append(out, differences(path+"."+k, w[k], g[k])...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			break
		}
		var out []string
		for i := range w {
			at := fmt.Sprintf("%s[%d]", path, i)
			if name := str(w[i], "name"); name != "" && name == str(g[i], "name") {
				at = fmt.Sprintf("%s[%s]", path, name)
			}
			out = append(out, differences(at, w[i], g[i])...)
		}
		return out
	}
	if reflect.DeepEqual(want, got) {
		return nil
	}
	return []string{fmt.Sprintf("%s: config/default has %s, the chart %s", path, show(want), show(got))}
}

func show(v any) string {
	if v == nil {
		return "nothing"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// The chart refuses values that would install something that cannot work or leaks a password.
func TestChartRefusesUnsafeValues(t *testing.T) {
	postgres := func(dsn string) string {
		return "transcript:\n  store: postgres\n  postgres:\n    dsn: " + strconv.Quote(dsn) + "\n    passwordSecret: {name: pg}\n"
	}
	for _, c := range []struct{ name, values, message string }{
		{"two controller replicas on SQLite", "controller: {replicas: 2}",
			"controller.replicas is 2, but transcript.store sqlite keeps the transcript in one SQLite file that only one controller replica may open"},
		{"a PostgreSQL URL with a password", postgres("postgres://baton:hunter2@db:5432/baton"),
			"transcript.postgres.dsn has a password in it"},
		{"a PostgreSQL key=value DSN with a password", postgres("host=db user=baton password=hunter2 dbname=baton"),
			"transcript.postgres.dsn has a password in it"},
		{"PostgreSQL without the password's Secret", "transcript: {store: postgres, postgres: {dsn: 'postgres://baton@db/baton'}}",
			"set transcript.postgres.passwordSecret.name"},
		{"an unknown transcript store", "transcript: {store: mysql}", "transcript.store must be sqlite or postgres"},
		{"an unknown certificate source", "webhook: {certificate: {source: vault}}", "webhook.certificate.source must be cert-manager or self-signed"},
		{"two addresses in one egress item", "egress: {allow: ['10.0.0.0/8,192.168.0.0/16']}",
			`egress.allow: "10.0.0.0/8,192.168.0.0/16" is not one address`},
		{"a space in an egress item", "egress: {deny: ['10.0.0.0/8 10.96.0.0/12']}", "egress.deny: \"10.0.0.0/8 10.96.0.0/12\" is not one address"},
		{"a namespace name that is not one", "secretNamespaces: [Team_A]", `secretNamespaces: "Team_A" is not a namespace name`},
		{"the client CA from a Secret and a ConfigMap", "webhook: {clientCA: {secretName: a, configMapName: b}}", "set secretName or configMapName, not both"},
		{"a NetworkPolicy with no port for the API server", "networkPolicy: {enabled: true, apiServer: {ports: []}}", "networkPolicy.apiServer.ports is empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := template(t, c.values)
			if err == nil {
				t.Fatalf("the chart renders:\n%s", out)
			}
			if !strings.Contains(err.Error(), c.message) {
				t.Errorf("the error does not say %q:\n%v", c.message, err)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error shows the password:\n%v", err)
			}
		})
	}
	// What the chart accepts has no password to show in args.
	for _, v := range variants {
		for k, obj := range mustTemplate(t, v.values) {
			if str(obj, "kind") != "Deployment" {
				continue
			}
			checkNoPassword(t, v.name+", "+k, args(container(t, objects{k: obj}, str(obj, "metadata", "name"))))
		}
	}
}

// checkNoPassword checks that no arg of a container holds a password in a URL or names one.
func checkNoPassword(t *testing.T, where string, argv []string) {
	t.Helper()
	for _, a := range argv {
		if _, value, ok := strings.Cut(a, "="); ok {
			if u, err := url.Parse(value); err == nil && u.User != nil {
				if _, set := u.User.Password(); set {
					t.Errorf("%s: an arg has a password: %s", where, a)
				}
			}
		}
		if strings.Contains(strings.ToLower(a), "password") {
			t.Errorf("%s: an arg mentions a password: %s", where, a)
		}
	}
}
