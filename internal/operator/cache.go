package operator

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/controllers/agentrun"
	batonkueue "github.com/baton-dev/baton/internal/kueue"
)

// CacheOptions are the manager cache settings the controllers rely on: only the config
// snapshots the operator makes are cached, not every ControllerRevision in the cluster, and
// only the Secrets labelled for API keys, not every Secret; those only in secretNamespaces when
// it names any (Options.SecretNamespaces); and, where Kueue is served (KueueServed), only the
// Workloads Baton made for runs, not those of every batch job.
func CacheOptions(secretNamespaces []string, kueue bool) cache.Options {
	secrets := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{v1alpha1.LabelAPIKey: "true"})}
	if len(secretNamespaces) > 0 {
		secrets.Namespaces = make(map[string]cache.Config, len(secretNamespaces))
		for _, ns := range secretNamespaces {
			secrets.Namespaces[ns] = cache.Config{}
		}
	}
	opts := cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.ControllerRevision{}: {Label: labels.SelectorFromSet(labels.Set{agentrun.LabelManagedBy: agentrun.ManagedBy})},
			&corev1.Secret{}:             secrets,
		},
		// Nothing reads managedFields, so the cache does not keep them: less memory per run.
		DefaultTransform: cache.TransformStripManagedFields(),
	}
	if kueue {
		// Only where they are served: the cache maps every kind it is told of at its start.
		opts.ByObject[&kueuev1beta2.Workload{}] = cache.ByObject{Label: labels.SelectorFromSet(labels.Set{batonkueue.LabelManagedBy: batonkueue.ManagedBy})}
	}
	return opts
}

// KueueServed reports whether the cluster at cfg serves Kueue's Workloads
// (kueue.x-k8s.io/v1beta2): then runs labelled with a LocalQueue wait for Kueue's admission
// (Options.Kueue), and the manager's cache is made with CacheOptions(..., true). It is asked
// once, before the manager is made.
func KueueServed(cfg *rest.Config) (bool, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return false, err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return false, err
	}
	gk := schema.GroupKind{Group: kueuev1beta2.GroupVersion.Group, Kind: "Workload"}
	_, err = mapper.RESTMapping(gk, kueuev1beta2.GroupVersion.Version)
	switch {
	case err == nil:
		return true, nil
	case meta.IsNoMatchError(err):
		return false, nil
	}
	return false, fmt.Errorf("looking for Kueue's Workloads: %w", err)
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
