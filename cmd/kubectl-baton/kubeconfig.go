package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/homedir"
)

// kubeFlags are the flags kubectl reaches a cluster with (--kubeconfig, --context, -n, --as and
// the rest), named, defaulted and explained as kubectl's own are, and read as kubectl reads
// them: client-go's loading rules (--kubeconfig, else KUBECONFIG, else ~/.kube/config) under
// what the flags override.
//
// cli-runtime's ConfigFlags would give the same flags, but its package brings kubectl's resource
// builder, and with it kustomize, whose plugin loader imports Go's plugin package: a program
// that imports it is linked as if for plugins, keeping every method of every type and exporting
// every symbol, which made the plugin 38 MB larger (docs/design/plugin-apart.md).
type kubeFlags struct {
	kubeconfig string
	// cacheDir is accepted, as kubectl accepts it; the plugin keeps no discovery cache.
	cacheDir  string
	userExtra []string
	overrides clientcmd.ConfigOverrides

	once   sync.Once
	loaded clientcmd.ClientConfig
}

func newKubeFlags() *kubeFlags {
	return &kubeFlags{cacheDir: defaultCacheDir(), overrides: clientcmd.ConfigOverrides{ClusterDefaults: clientcmd.ClusterDefaults, Timeout: "0"}}
}

// defaultCacheDir is kubectl's: KUBECACHEDIR, else ~/.kube/cache.
func defaultCacheDir() string {
	if dir := os.Getenv("KUBECACHEDIR"); dir != "" {
		return dir
	}
	return filepath.Join(homedir.HomeDir(), ".kube", "cache")
}

// addFlags adds kubectl's flags, with kubectl's words.
func (f *kubeFlags) addFlags(flags *pflag.FlagSet) {
	o := &f.overrides
	flags.StringVar(&f.kubeconfig, "kubeconfig", "", "Path to the kubeconfig file to use for CLI requests.")
	flags.StringVar(&f.cacheDir, "cache-dir", f.cacheDir, "Default cache directory")
	flags.StringVar(&o.AuthInfo.ClientCertificate, "client-certificate", "", "Path to a client certificate file for TLS")
	flags.StringVar(&o.AuthInfo.ClientKey, "client-key", "", "Path to a client key file for TLS")
	flags.StringVar(&o.AuthInfo.Token, "token", "", "Bearer token for authentication to the API server")
	flags.StringVar(&o.AuthInfo.Impersonate, "as", "", "Username to impersonate for the operation. User could be a regular user or a service account in a namespace.")
	flags.StringVar(&o.AuthInfo.ImpersonateUID, "as-uid", "", "UID to impersonate for the operation.")
	flags.StringArrayVar(&o.AuthInfo.ImpersonateGroups, "as-group", []string{}, "Group to impersonate for the operation, this flag can be repeated to specify multiple groups.")
	flags.StringArrayVar(&f.userExtra, "as-user-extra", []string{}, "User extras to impersonate for the operation, this flag can be repeated to specify multiple values for the same key.")
	flags.StringVar(&o.Context.Cluster, "cluster", "", "The name of the kubeconfig cluster to use")
	flags.StringVar(&o.Context.AuthInfo, "user", "", "The name of the kubeconfig user to use")
	flags.StringVarP(&o.Context.Namespace, "namespace", "n", "", "If present, the namespace scope for this CLI request")
	flags.StringVar(&o.CurrentContext, "context", "", "The name of the kubeconfig context to use")
	flags.StringVarP(&o.ClusterInfo.Server, "server", "s", "", "The address and port of the Kubernetes API server")
	flags.StringVar(&o.ClusterInfo.TLSServerName, "tls-server-name", "", "Server name to use for server certificate validation. If it is not provided, the hostname used to contact the server is used")
	flags.BoolVar(&o.ClusterInfo.InsecureSkipTLSVerify, "insecure-skip-tls-verify", false, "If true, the server's certificate will not be checked for validity. This will make your HTTPS connections insecure")
	flags.StringVar(&o.ClusterInfo.CertificateAuthority, "certificate-authority", "", "Path to a cert file for the certificate authority")
	flags.StringVar(&o.Timeout, "request-timeout", o.Timeout, "The length of time to wait before giving up on a single server request. Non-zero values should contain a corresponding time unit (e.g. 1s, 2m, 3h). A value of zero means don't timeout requests.")
	flags.BoolVar(&o.ClusterInfo.DisableCompression, "disable-compression", false, "If true, opt-out of response compression for all requests to the server")
	flags.StringVar(&o.ClusterInfo.ProxyURL, "proxy-url", "", "Proxy URL to use for requests to the API server")
}

// config is the kubeconfig as the flags select and override it, loaded once.
func (f *kubeFlags) config() clientcmd.ClientConfig {
	f.once.Do(func() {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.DefaultClientConfig = &clientcmd.DefaultClientConfig
		rules.ExplicitPath = f.kubeconfig
		overrides := f.overrides
		if len(f.userExtra) > 0 {
			overrides.AuthInfo.ImpersonateUserExtra = map[string][]string{}
			for _, extra := range f.userExtra {
				if key, value, ok := strings.Cut(extra, "="); ok {
					overrides.AuthInfo.ImpersonateUserExtra[key] = append(overrides.AuthInfo.ImpersonateUserExtra[key], value)
				}
			}
		}
		f.loaded = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &overrides)
	})
	return f.loaded
}

// restConfig is how to reach the API server as the user.
func (f *kubeFlags) restConfig() (*rest.Config, error) {
	return f.config().ClientConfig()
}

// namespace is the namespace -n names, else the kubeconfig context's, else default.
func (f *kubeFlags) namespace() (string, error) {
	ns, _, err := f.config().Namespace()
	return ns, err
}
