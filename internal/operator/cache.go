package operator

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/controller/agentrun"
)

// CacheOptions are the manager cache settings the controllers rely on: only the config
// snapshots the operator makes are cached, not every ControllerRevision in the cluster, and
// only the Secrets labelled for API keys, not every Secret; those only in secretNamespaces when
// it names any (Options.SecretNamespaces).
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
		},
		// Nothing reads managedFields, so the cache does not keep them: less memory per run.
		DefaultTransform: cache.TransformStripManagedFields(),
	}
}
