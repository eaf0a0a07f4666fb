package operator

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/controller/agentrun"
	"github.com/baton-dev/baton/internal/kueue"
)

// CacheOptions are the manager cache settings the controllers rely on: only the config
// snapshots the operator makes are cached, not every ControllerRevision in the cluster, and
// only the Secrets labelled for API keys, not every Secret; those only in secretNamespaces when
// it names any (Options.SecretNamespaces); and only the Kueue Workloads Baton made for runs, not
// those of every batch job. The manager's scheme must hold Kueue's types (AddToScheme).
func CacheOptions(secretNamespaces []string) cache.Options {
	secrets := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{v1alpha1.LabelAPIKey: "true"})}
	if len(secretNamespaces) > 0 {
		secrets.Namespaces = make(map[string]cache.Config, len(secretNamespaces))
		for _, ns := range secretNamespaces {
			secrets.Namespaces[ns] = cache.Config{}
		}
	}
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.ControllerRevision{}: {Label: labels.SelectorFromSet(labels.Set{agentrun.LabelManagedBy: agentrun.ManagedBy})},
			&corev1.Secret{}:             secrets,
			&kueuev1beta2.Workload{}:     {Label: labels.SelectorFromSet(labels.Set{kueue.LabelManagedBy: kueue.ManagedBy})},
		},
		// Nothing reads managedFields, so the cache does not keep them: less memory per run.
		DefaultTransform: cache.TransformStripManagedFields(),
	}
}

// AddToScheme adds the types the operator reads and writes to a manager's scheme: Kubernetes'
// own, Baton's, and Kueue's, whose Workloads it makes for runs when the cluster serves them.
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, kueuev1beta2.AddToScheme} {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}
