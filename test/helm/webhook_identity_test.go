package helm

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// checkWebhookIdentity: the webhook replicas run as a ServiceAccount of their own, bound to
// the webhook's ClusterRole and nothing else, and are told the controllers' user, whose
// writes alone the webhook takes as the operator's.
func checkWebhookIdentity(t *testing.T, objs objects) {
	pod := func(d string) string {
		return str(objs["Deployment/"+d], "spec", "template", "spec", "serviceAccountName")
	}
	webhook, controller := pod("baton-webhook"), pod("baton-controller-manager")
	if webhook == "" || webhook == controller || objs["ServiceAccount/"+webhook] == nil {
		t.Fatalf("the webhook replicas run as %q, the controllers as %q: want a ServiceAccount of the webhook's own", webhook, controller)
	}
	want := "--operator-user=system:serviceaccount:" + namespace + ":" + controller
	if a := args(container(t, objs, "baton-webhook")); !slices.Contains(a, want) {
		t.Errorf("webhook args %q lack %s", a, want)
	}
	var bound []string
	for k, obj := range objs {
		subjects, _ := get(obj, "subjects").([]any)
		for _, s := range subjects {
			if str(s, "kind") == "ServiceAccount" && str(s, "name") == webhook {
				bound = append(bound, k+" -> "+str(obj, "roleRef", "kind")+"/"+str(obj, "roleRef", "name"))
			}
		}
	}
	if !slices.Equal(bound, []string{"ClusterRoleBinding/baton-webhook-rolebinding -> ClusterRole/baton-webhook-role"}) {
		t.Errorf("the webhook's ServiceAccount is bound by %v, want only to baton-webhook-role", bound)
	}
	var file map[string]any
	raw, err := os.ReadFile(filepath.Join(chart, "files", "webhook-role.yaml"))
	if err == nil {
		err = yaml.Unmarshal(raw, &file)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range differences("rules", file["rules"], objs["ClusterRole/baton-webhook-role"]["rules"]) {
		t.Errorf("ClusterRole/baton-webhook-role against files/webhook-role.yaml: %s", d)
	}
}

// The webhook replicas' ClusterRole grants what the webhook's code asks for (the
// +kubebuilder:rbac markers of internal/webhook), and nothing more. The one marker left out is
// trust.go's: the controllers dry-run a run's creation to see the webhook installed, under
// their own ClusterRole; the webhook replicas create no run.
func TestTheWebhookReplicasMayDoWhatTheWebhookAsksAndNoMore(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "internal", "webhook", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in internal/webhook: %v", err)
	}
	marker := regexp.MustCompile(`(?m)^// \+kubebuilder:rbac:groups=([^,]*),resources=([^,]*),verbs=(\S+)`)
	var asked []any
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || filepath.Base(f) == "trust.go" {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range marker.FindAllStringSubmatch(string(src), -1) {
			for _, group := range strings.Split(m[1], ";") {
				for _, resource := range strings.Split(m[2], ";") {
					for _, verb := range strings.Split(m[3], ";") {
						asked = append(asked, [3]string{group, resource, verb})
					}
				}
			}
		}
	}
	if len(asked) == 0 {
		t.Fatal("internal/webhook has no +kubebuilder:rbac markers: the test reads them wrong")
	}
	var role map[string]any
	raw, err := os.ReadFile(filepath.Join(root, "config", "rbac", "webhook_role.yaml"))
	if err == nil {
		err = yaml.Unmarshal(raw, &role)
	}
	if err != nil {
		t.Fatal(err)
	}
	granted := 0
	for _, r := range role["rules"].([]any) {
		granted += len(strs(get(r, "apiGroups"))) * len(strs(get(r, "resources"))) * len(strs(get(r, "verbs")))
	}
	for _, a := range asked {
		g := a.([3]string)
		if !grants(role["rules"], g[0], g[1], g[2]) {
			t.Errorf("internal/webhook asks for %s on %s.%s, which config/rbac/webhook_role.yaml does not grant", g[2], g[1], g[0])
		}
	}
	if granted > len(asked) {
		t.Errorf("config/rbac/webhook_role.yaml grants %d (group, resource, verb), internal/webhook asks for %d: drop what it does not ask for", granted, len(asked))
	}
}
