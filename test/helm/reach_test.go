package helm

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// What the operator may reach and who may reach it: the egress policy's flags, the Secrets it
// may read, the webhook's clients and the NetworkPolicy.

// The flags the chart renders only when a value asks for them.
var reachFlags = []string{"--egress-allow", "--egress-deny", "--secret-namespaces", "--webhook-client-ca-name"}

const networkPolicyValues = `
networkPolicy:
  enabled: true
  apiServer:
    cidrs: [172.18.0.2/32]
  dns:
    to:
    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: kube-system}}
      podSelector: {matchLabels: {k8s-app: kube-dns}}
  egress:
  - to: [{ipBlock: {cidr: 0.0.0.0/0, except: [10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16]}}]
    ports: [{port: 443, protocol: TCP}]
  - to: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: tools}}}]
    ports: [{port: 8080, protocol: TCP}]
  ingress:
    webhook:
      from: [{ipBlock: {cidr: 172.18.0.0/24}}]
    metrics:
      from: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]
`

// With the defaults the operator lists Secrets cluster-wide, as config/default grants, and the
// chart renders no NetworkPolicy and none of the flags that narrow what the operator reaches.
func checkDefaults(t *testing.T, objs objects) {
	role := objs["ClusterRole/baton-manager-role"]
	for _, verb := range []string{"list", "watch"} {
		if !grants(role["rules"], "", "secrets", verb) {
			t.Errorf("the manager's ClusterRole does not grant %s on Secrets", verb)
		}
	}
	for k, obj := range objs {
		if str(obj, "kind") == "Role" && grants(obj["rules"], "", "secrets", "list") {
			t.Errorf("%s grants Secrets, and secretNamespaces is empty", k)
		}
		if str(obj, "kind") == "NetworkPolicy" {
			t.Errorf("%s is rendered, and networkPolicy.enabled is false", k)
		}
	}
	for _, d := range []string{"baton-controller-manager", "baton-webhook"} {
		for _, a := range args(container(t, objs, d)) {
			flag, _, _ := strings.Cut(a, "=")
			if slices.Contains(reachFlags, flag) {
				t.Errorf("Deployment %s has %s, which no value asked for", d, a)
			}
		}
	}
}

// With secretNamespaces the ClusterRole grants nothing on Secrets, and a Role in each listed
// namespace, and in the release namespace, where ClusterModelEndpoints' keys are, grants what
// controller-gen's rule for Secrets does, bound to the manager.
func checkSecretNamespaces(listed ...string) func(t *testing.T, objs objects) {
	return func(t *testing.T, objs objects) {
		checkSecretRoles(t, objs, append(slices.Clone(listed), namespace))
		if a := args(container(t, objs, "baton-controller-manager")); !slices.Contains(a, "--secret-namespaces="+strings.Join(listed, ",")) {
			t.Errorf("controller args %q lack --secret-namespaces=%s", a, strings.Join(listed, ","))
		}
		// The webhook replicas read no Secrets.
		if a := strings.Join(args(container(t, objs, "baton-webhook")), " "); strings.Contains(a, "--secret-namespaces") {
			t.Errorf("webhook args %s have --secret-namespaces", a)
		}
	}
}

// checkSecretRoles: the ClusterRole grants nothing on Secrets, and a Role in each of
// namespaces, and nowhere else, grants what controller-gen's rule for Secrets does.
func checkSecretRoles(t *testing.T, objs objects, namespaces []string) {
	raw, err := os.ReadFile(filepath.Join(chart, "files", "manager-role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var generated map[string]any
	if err := yaml.Unmarshal(raw, &generated); err != nil {
		t.Fatal(err)
	}
	var clusterRules, secretRules []any
	for _, r := range generated["rules"].([]any) {
		if grants([]any{r}, "", "secrets", "list") {
			secretRules = append(secretRules, r)
		} else {
			clusterRules = append(clusterRules, r)
		}
	}
	if len(secretRules) == 0 {
		t.Fatal("files/manager-role.yaml has no rule for Secrets")
	}

	role := objs["ClusterRole/baton-manager-role"]
	for _, verb := range []string{"get", "list", "watch"} {
		if grants(role["rules"], "", "secrets", verb) {
			t.Errorf("the manager's ClusterRole still grants %s on Secrets", verb)
		}
	}
	for _, d := range differences("rules", clusterRules, role["rules"]) {
		t.Errorf("ClusterRole/baton-manager-role against files/manager-role.yaml without Secrets: %s", d)
	}

	for _, ns := range namespaces {
		r, ok := objs[namespaced("Role", ns, "baton-manager-secrets")]
		if !ok {
			t.Errorf("no Role baton-manager-secrets in %s", ns)
			continue
		}
		for _, d := range differences("rules", secretRules, r["rules"]) {
			t.Errorf("Role %s/baton-manager-secrets against files/manager-role.yaml's rule for Secrets: %s", ns, d)
		}
		b := objs[namespaced("RoleBinding", ns, "baton-manager-secrets")]
		if str(b, "roleRef", "kind") != "Role" || str(b, "roleRef", "name") != "baton-manager-secrets" {
			t.Errorf("RoleBinding %s/baton-manager-secrets refers to %v", ns, get(b, "roleRef"))
		}
		if s := get(b, "subjects", 0); str(s, "kind") != "ServiceAccount" || str(s, "name") != "baton-controller-manager" || str(s, "namespace") != namespace {
			t.Errorf("RoleBinding %s/baton-manager-secrets binds %v, not the manager's ServiceAccount", ns, get(b, "subjects"))
		}
	}
	for k, obj := range objs {
		if ns := str(obj, "metadata", "namespace"); str(obj, "kind") == "Role" && grants(obj["rules"], "", "secrets", "list") && !slices.Contains(namespaces, ns) {
			t.Errorf("%s grants Secrets in a namespace secretNamespaces does not list", k)
		}
	}
}

func checkEgressFlags(t *testing.T, objs objects) {
	a := args(container(t, objs, "baton-controller-manager"))
	for _, want := range []string{
		"--egress-allow=10.96.12.7/32,ollama.models.svc.cluster.local,*.models.example.com",
		"--egress-deny=10.244.0.0/16,10.96.0.0/12",
	} {
		if !slices.Contains(a, want) {
			t.Errorf("controller args %q lack %s", a, want)
		}
	}
	// The webhook replicas make no calls for configs.
	if a := strings.Join(args(container(t, objs, "baton-webhook")), " "); strings.Contains(a, "--egress-") {
		t.Errorf("webhook args %s have egress flags", a)
	}
}

// checkClientCA: both Deployments serve the webhook, so both mount the CA bundle beside the
// serving certificate, under the name --webhook-client-ca-name gives.
func checkClientCA(kind, name, key string) func(t *testing.T, objs objects) {
	return func(t *testing.T, objs objects) {
		for _, d := range []string{"baton-controller-manager", "baton-webhook"} {
			checkClientCAOf(t, objs, d, kind, name, key)
		}
	}
}

// checkClientCAOf checks that Deployment d mounts, where --webhook-cert-dir says, the serving
// certificate's Secret whole and key of the CA's kind/name at the file --webhook-client-ca-name
// names.
func checkClientCAOf(t *testing.T, objs objects, d, kind, name, key string) {
	t.Helper()
	c := container(t, objs, d)
	flags := flagValues(c)
	file := flags["--webhook-client-ca-name"]
	if file == "" || strings.Contains(file, "/") || slices.Contains([]string{"tls.crt", "tls.key", "ca.crt"}, file) {
		t.Errorf("Deployment %s: --webhook-client-ca-name is %q, not a file name of its own in the certificate directory", d, file)
	}
	mountPath := str(named(get(c, "volumeMounts"), "cert"), "mountPath")
	if mountPath == "" || mountPath != flags["--webhook-cert-dir"] {
		t.Errorf("Deployment %s: the cert volume is mounted at %q, --webhook-cert-dir is %q", d, mountPath, flags["--webhook-cert-dir"])
	}
	volume := named(get(objs["Deployment/"+d], "spec", "template", "spec", "volumes"), "cert")
	sources, _ := get(volume, "projected", "sources").([]any)
	if len(sources) != 2 {
		t.Fatalf("Deployment %s: the cert volume is not the serving certificate and the CA projected together: %v", d, volume)
	}
	if str(sources[0], "secret", "name") != "webhook-server-cert" || get(sources[0], "secret", "items") != nil {
		t.Errorf("Deployment %s: the serving certificate's Secret is not projected whole: %v", d, sources[0])
	}
	if str(sources[1], kind, "name") != name || str(sources[1], kind, "items", 0, "key") != key || str(sources[1], kind, "items", 0, "path") != file {
		t.Errorf("Deployment %s: want %s %s's key %s at %s, got %v", d, kind, name, key, file, sources[1])
	}
}

// flagValues are a container's args as flag and value (--flag=value).
func flagValues(c map[string]any) map[string]string {
	flags := map[string]string{}
	for _, a := range args(c) {
		k, v, _ := strings.Cut(a, "=")
		flags[k] = v
	}
	return flags
}

// named is the item called name of a list of named objects (a pod's volumes, a container's
// mounts), the last if several are, or nil.
func named(list any, name string) any {
	var found any
	l, _ := list.([]any)
	for _, item := range l {
		if str(item, "name") == name {
			found = item
		}
	}
	return found
}

// checkNetworkPolicyDefaults: the policy covers both Deployments' pods, lets in the ports they
// serve (webhook, metrics, transcript) and no other, and lets out the API server and DNS only.
func checkNetworkPolicyDefaults(t *testing.T, objs objects) {
	np := networkPolicy(t, objs)
	if types := get(np, "spec", "policyTypes"); !slices.Equal(strs(types), []string{"Ingress", "Egress"}) {
		t.Errorf("policyTypes: %v", types)
	}
	served := map[int]bool{}
	for _, d := range []string{"baton-controller-manager", "baton-webhook"} {
		labels, _ := get(objs["Deployment/"+d], "spec", "template", "metadata", "labels").(map[string]any)
		for k, v := range get(np, "spec", "podSelector", "matchLabels").(map[string]any) {
			if labels[k] != v {
				t.Errorf("the NetworkPolicy selects %s=%v, which Deployment %s's pods lack", k, v, d)
			}
		}
		// The probes' port is not among them: the kubelet probes from the pod's node, which a
		// NetworkPolicy always lets through.
		for _, p := range get(container(t, objs, d), "ports").([]any) {
			served[int(get(p, "containerPort").(float64))] = true
		}
	}
	allowed := map[int]bool{}
	for i, rule := range get(np, "spec", "ingress").([]any) {
		if from := get(rule, "from"); from != nil {
			t.Errorf("ingress[%d] is only from %v, and no value asked for that", i, from)
		}
		for _, p := range ports(rule) {
			allowed[p.port] = true
		}
	}
	for p := range served {
		if !allowed[p] {
			t.Errorf("the pods serve port %d, which the NetworkPolicy lets nobody reach", p)
		}
	}
	for p := range allowed {
		if !served[p] {
			t.Errorf("the NetworkPolicy lets in port %d, which no pod serves", p)
		}
	}
	egress, _ := get(np, "spec", "egress").([]any)
	want := [][]portRule{
		{{443, "TCP"}, {6443, "TCP"}}, // the API server
		{{53, "UDP"}, {53, "TCP"}},    // DNS
	}
	if len(egress) != len(want) {
		t.Fatalf("egress has %d rules, want the API server's and DNS: %v", len(egress), egress)
	}
	for i, rule := range egress {
		if got := ports(rule); !slices.Equal(got, want[i]) {
			t.Errorf("egress[%d] ports: %v, want %v", i, got, want[i])
		}
		if to := get(rule, "to"); to != nil {
			t.Errorf("egress[%d] is only to %v, and no value asked for that", i, to)
		}
	}
}

// checkNetworkPolicyPeers: the values' addresses and peers land where they say, and the extra
// egress rules follow the API server's and DNS' unchanged.
func checkNetworkPolicyPeers(t *testing.T, objs objects) {
	var values map[string]any
	if err := yaml.Unmarshal([]byte(networkPolicyValues), &values); err != nil {
		t.Fatal(err)
	}
	v := values["networkPolicy"]
	np := networkPolicy(t, objs)
	egress := get(np, "spec", "egress").([]any)
	for _, d := range differences("egress[api server].to", []any{map[string]any{"ipBlock": map[string]any{"cidr": "172.18.0.2/32"}}}, get(egress, 0, "to")) {
		t.Error(d)
	}
	for _, d := range differences("egress[dns].to", get(v, "dns", "to"), get(egress, 1, "to")) {
		t.Error(d)
	}
	for _, d := range differences("egress[2:]", get(v, "egress"), egress[2:]) {
		t.Error(d)
	}
	from := map[int]any{}
	for _, rule := range get(np, "spec", "ingress").([]any) {
		for _, p := range ports(rule) {
			from[p.port] = get(rule, "from")
		}
	}
	for _, d := range differences("ingress[9443].from", get(v, "ingress", "webhook", "from"), from[9443]) {
		t.Error(d)
	}
	for _, d := range differences("ingress[8443].from", get(v, "ingress", "metrics", "from"), from[8443]) {
		t.Error(d)
	}
	if from[8444] != nil {
		t.Errorf("ingress to the transcript API is only from %v, and no value asked for that", from[8444])
	}
}

func networkPolicy(t *testing.T, objs objects) map[string]any {
	t.Helper()
	np, ok := objs["NetworkPolicy/baton-controller-manager"]
	if !ok {
		t.Fatal("no NetworkPolicy baton-controller-manager")
	}
	return np
}

type portRule struct {
	port     int
	protocol string
}

func ports(rule any) []portRule {
	var out []portRule
	for _, p := range get(rule, "ports").([]any) {
		n, _ := get(p, "port").(float64)
		out = append(out, portRule{int(n), str(p, "protocol")})
	}
	return out
}

// grants says whether RBAC rules grant verb on resource in group, counting wildcards.
func grants(rules any, group, resource, verb string) bool {
	rs, _ := rules.([]any)
	for _, r := range rs {
		groups, resources, verbs := strs(get(r, "apiGroups")), strs(get(r, "resources")), strs(get(r, "verbs"))
		if (slices.Contains(groups, group) || slices.Contains(groups, "*")) &&
			(slices.Contains(resources, resource) || slices.Contains(resources, "*")) &&
			(slices.Contains(verbs, verb) || slices.Contains(verbs, "*")) {
			return true
		}
	}
	return false
}

func strs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, s := range l {
		s, _ := s.(string)
		out = append(out, s)
	}
	return out
}
