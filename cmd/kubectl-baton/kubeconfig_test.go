package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
)

// twoClusters is a kubeconfig of two contexts, the second with a namespace of its own and a
// client certificate; DIR is where its files are.
const twoClusters = `apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev
  cluster: {server: "https://dev.example:6443", insecure-skip-tls-verify: true}
- name: prod
  cluster: {server: "https://prod.example:6443", certificate-authority: DIR/prod-ca.crt}
users:
- name: alice
  user: {token: alice-token}
- name: bob
  user: {client-certificate: DIR/bob.crt, client-key: DIR/bob.key}
contexts:
- name: dev
  context: {cluster: dev, user: alice}
- name: prod
  context: {cluster: prod, user: bob, namespace: payments}
`

// The plugin takes kubectl's flags for reaching a cluster, with kubectl's names, shorthands,
// defaults and help, and reads them as kubectl does: the same flags give the same server,
// credentials, impersonation, timeouts and namespace as cli-runtime's ConfigFlags, which
// kubectl uses.
func TestTheClusterFlagsAreKubectls(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "config")
	if err := os.WriteFile(kubeconfig, []byte(strings.ReplaceAll(twoClusters, "DIR", dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"prod-ca.crt", "bob.crt", "bob.key", "c.crt", "c.key", "ca.crt"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("PEM"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("KUBECONFIG", kubeconfig)

	theirs, ours := pflag.NewFlagSet("kubectl", pflag.ContinueOnError), pflag.NewFlagSet("baton", pflag.ContinueOnError)
	genericclioptions.NewConfigFlags(true).AddFlags(theirs)
	newKubeFlags().addFlags(ours)
	if diff := cmp.Diff(describeFlags(theirs), describeFlags(ours)); diff != "" {
		t.Errorf("the flags (-kubectl's +the plugin's):\n%s", diff)
	}

	for name, args := range map[string][]string{
		"the current context":         nil,
		"another context":             {"--context", "prod"},
		"a namespace of one's own":    {"--context", "prod", "-n", "audit"},
		"another kubeconfig":          {"--kubeconfig", kubeconfig, "--context", "prod"},
		"another cluster and user":    {"--cluster", "prod", "--user", "bob"},
		"the server and a token":      {"-s", "https://elsewhere:6443", "--token", "t0ken", "--tls-server-name", "api.internal"},
		"a client certificate":        {"--client-certificate", filepath.Join(dir, "c.crt"), "--client-key", filepath.Join(dir, "c.key"), "--certificate-authority", filepath.Join(dir, "ca.crt")},
		"impersonation":               {"--as", "carol", "--as-uid", "42", "--as-group", "ops", "--as-group", "sre", "--as-user-extra", "scopes=a", "--as-user-extra", "scopes=b", "--as-user-extra", "nokey"},
		"timeouts, proxy, no gzip":    {"--request-timeout", "5s", "--proxy-url", "http://proxy.example:3128", "--disable-compression"},
		"no check of the server":      {"--context", "prod", "--insecure-skip-tls-verify"},
		"a cache dir it does not use": {"--cache-dir", "/tmp/kube-cache"},
	} {
		t.Run(name, func(t *testing.T) {
			kubectl := genericclioptions.NewConfigFlags(true)
			theirs := pflag.NewFlagSet("kubectl", pflag.ContinueOnError)
			kubectl.AddFlags(theirs)
			baton := newKubeFlags()
			ours := pflag.NewFlagSet("baton", pflag.ContinueOnError)
			baton.addFlags(ours)
			if err := theirs.Parse(args); err != nil {
				t.Fatal(err)
			}
			if err := ours.Parse(args); err != nil {
				t.Fatal(err)
			}

			want, wantErr := kubectl.ToRESTConfig()
			got, err := baton.restConfig()
			if fmt.Sprint(err) != fmt.Sprint(wantErr) {
				t.Fatalf("error %v, kubectl's %v", err, wantErr)
			}
			if err == nil {
				if diff := cmp.Diff(reach(t, want), reach(t, got)); diff != "" {
					t.Errorf("the REST config (-kubectl's +the plugin's):\n%s", diff)
				}
			}
			wantNS, _, wantErr := kubectl.ToRawKubeConfigLoader().Namespace()
			if gotNS, err := baton.namespace(); fmt.Sprint(err) != fmt.Sprint(wantErr) || gotNS != wantNS {
				t.Errorf("namespace %q (%v), kubectl's %q (%v)", gotNS, err, wantNS, wantErr)
			}
		})
	}
}

// flagShape is what a user sees of a flag.
type flagShape struct{ Shorthand, Type, Default, Usage string }

func describeFlags(fs *pflag.FlagSet) map[string]flagShape {
	out := map[string]flagShape{}
	fs.VisitAll(func(f *pflag.Flag) {
		out[f.Name] = flagShape{Shorthand: f.Shorthand, Type: f.Value.Type(), Default: f.DefValue, Usage: f.Usage}
	})
	return out
}

// reached is what a REST config says of where and as whom requests go.
type reached struct {
	Host, Token, Username, Timeout string
	Impersonate                    rest.ImpersonationConfig
	TLS                            rest.TLSClientConfig
	DisableCompression             bool
	Proxy                          string
}

func reach(t *testing.T, c *rest.Config) reached {
	t.Helper()
	r := reached{Host: c.Host, Token: c.BearerToken, Username: c.Username, Timeout: c.Timeout.String(),
		Impersonate: c.Impersonate, TLS: c.TLSClientConfig, DisableCompression: c.DisableCompression}
	if c.Proxy != nil {
		req, _ := http.NewRequest(http.MethodGet, c.Host, nil)
		u, err := c.Proxy(req)
		if err != nil {
			t.Fatal(err)
		}
		if u != nil {
			r.Proxy = u.String()
		}
	}
	return r
}
