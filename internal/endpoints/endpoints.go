// Package endpoints resolves the model endpoint an agent names (model.endpointRef) into what a
// step needs of it: the provider, URL and API key to call, the limits every step on it shares,
// and the prices its calls cost. A ModelEndpoint serves the agents of its own namespace; a
// ClusterModelEndpoint serves the namespaces its namespaceSelector selects, with its API key
// in a Secret in the operator's namespace, which those namespaces cannot read.
//
// Resolution reads the manager's cache; a resolved endpoint is kept until its object changes
// (its resource version), so a step's resolution parses no prices and copies no object.
package endpoints

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/cost"
	"github.com/baton-dev/baton/internal/pacing"
)

// +kubebuilder:rbac:groups=agents.baton.dev,resources=modelendpoints;clustermodelendpoints,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Endpoint is a model endpoint as a step uses it.
type Endpoint struct {
	// Key names the endpoint for the pacer.
	Key pacing.Key
	// Provider, URL and the API key's Secret are what the step's provider calls.
	Provider v1alpha1.ModelProvider
	URL      string
	// SecretNamespace is where the key's Secret is: the endpoint's namespace, or the
	// operator's for a ClusterModelEndpoint. Secret is nil when the endpoint has no key.
	SecretNamespace string
	Secret          *v1alpha1.SecretKeyRef
	// Limits are the configured shared limits.
	Limits pacing.Limits
	// Prices are the endpoint's prices and currency.
	Prices cost.Table
}

// NotFound is an endpoint that does not exist, or that the run's namespace may not use: the
// run waits for it rather than fail.
type NotFound struct{ Message string }

func (e *NotFound) Error() string { return e.Message }

// IsNotFound reports whether err says the endpoint cannot be had (yet).
func IsNotFound(err error) bool {
	var nf *NotFound
	return errors.As(err, &nf)
}

// Resolver resolves endpoint references from the manager's cache.
type Resolver struct {
	// Reader reads ModelEndpoints, ClusterModelEndpoints and Namespaces, from the cache.
	Reader client.Reader
	// OperatorNamespace holds the Secrets of ClusterModelEndpoints.
	OperatorNamespace string

	mu   sync.Mutex
	memo map[pacing.Key]memo
}

// memo is an endpoint resolved from one version of its object.
type memo struct {
	version  string
	endpoint *Endpoint
}

// Resolve is the endpoint ref names for an agent of a run in namespace. A missing endpoint, or
// a ClusterModelEndpoint that does not select the namespace, is a *NotFound; an endpoint whose
// prices cannot be read is another error, naming the field.
func (r *Resolver) Resolve(ctx context.Context, namespace string, ref *v1alpha1.EndpointReference) (*Endpoint, error) {
	if ref.Kind == v1alpha1.KindClusterModelEndpoint {
		return r.cluster(ctx, namespace, ref.Name)
	}
	obj := &v1alpha1.ModelEndpoint{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &NotFound{Message: fmt.Sprintf("ModelEndpoint %s does not exist in namespace %s", ref.Name, namespace)}
		}
		return nil, fmt.Errorf("reading ModelEndpoint %s/%s: %w", namespace, ref.Name, err)
	}
	key := pacing.Key{Kind: string(v1alpha1.KindModelEndpoint), Namespace: namespace, Name: ref.Name}
	return r.resolved(key, obj.ResourceVersion, &obj.Spec, namespace)
}

// cluster resolves a ClusterModelEndpoint for a run in namespace, if its selector allows it.
func (r *Resolver) cluster(ctx context.Context, namespace, name string) (*Endpoint, error) {
	obj := &v1alpha1.ClusterModelEndpoint{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &NotFound{Message: fmt.Sprintf("ClusterModelEndpoint %s does not exist", name)}
		}
		return nil, fmt.Errorf("reading ClusterModelEndpoint %s: %w", name, err)
	}
	if err := r.selects(ctx, obj, namespace); err != nil {
		return nil, err
	}
	key := pacing.Key{Kind: string(v1alpha1.KindClusterModelEndpoint), Name: name}
	return r.resolved(key, obj.ResourceVersion, &obj.Spec, r.OperatorNamespace)
}

// selects says why a ClusterModelEndpoint may not serve namespace, if it may not.
func (r *Resolver) selects(ctx context.Context, obj *v1alpha1.ClusterModelEndpoint, namespace string) error {
	refused := &NotFound{Message: fmt.Sprintf("ClusterModelEndpoint %s does not serve namespace %s: its namespaceSelector does not select it", obj.Name, namespace)}
	if obj.Spec.NamespaceSelector == nil {
		return refused
	}
	selector, err := metav1.LabelSelectorAsSelector(obj.Spec.NamespaceSelector)
	if err != nil {
		return fmt.Errorf("ClusterModelEndpoint %s: spec.namespaceSelector: %w", obj.Name, err)
	}
	if selector.Empty() {
		return nil
	}
	ns := &corev1.Namespace{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return fmt.Errorf("reading namespace %s: %w", namespace, err)
	}
	if !selector.Matches(labels.Set(ns.Labels)) {
		return refused
	}
	return nil
}

// resolved is the endpoint of a spec, kept while the object's version stays the same.
func (r *Resolver) resolved(key pacing.Key, version string, spec *v1alpha1.ModelEndpointSpec, secretNamespace string) (*Endpoint, error) {
	r.mu.Lock()
	m, ok := r.memo[key]
	r.mu.Unlock()
	if ok && m.version == version {
		return m.endpoint, nil
	}
	e, err := newEndpoint(key, spec, secretNamespace)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if r.memo == nil {
		r.memo = map[pacing.Key]memo{}
	}
	r.memo[key] = memo{version: version, endpoint: e}
	r.mu.Unlock()
	return e, nil
}

// Forget drops what is kept of an endpoint that was deleted.
func (r *Resolver) Forget(key pacing.Key) {
	r.mu.Lock()
	delete(r.memo, key)
	r.mu.Unlock()
}

// Check says why steps on an endpoint with this spec would fail, if they would: its prices.
func Check(key pacing.Key, spec *v1alpha1.ModelEndpointSpec) error {
	_, err := newEndpoint(key, spec, "")
	return err
}

// newEndpoint reads an endpoint's spec.
func newEndpoint(key pacing.Key, spec *v1alpha1.ModelEndpointSpec, secretNamespace string) (*Endpoint, error) {
	prices := make([]cost.ModelPrice, len(spec.Prices))
	for i, p := range spec.Prices {
		prices[i] = cost.ModelPrice{Model: p.Model, Input: p.Input, CachedInput: p.CachedInput, Output: p.Output}
	}
	currency := spec.Currency
	if currency == "" {
		currency = "USD"
	}
	table, err := cost.NewTable(currency, prices)
	if err != nil {
		return nil, fmt.Errorf("%s %s: spec.%w", key.Kind, key.Name, err)
	}
	e := &Endpoint{Key: key, Provider: spec.Provider, URL: spec.URL, Prices: table, Limits: Limits(spec.Limits)}
	if spec.APIKeySecretRef != nil {
		ref := *spec.APIKeySecretRef
		e.Secret, e.SecretNamespace = &ref, secretNamespace
	}
	return e, nil
}

// Limits are an endpoint's configured limits, as the pacer takes them.
func Limits(l *v1alpha1.EndpointLimits) pacing.Limits {
	var out pacing.Limits
	if l == nil {
		return out
	}
	if l.RequestsPerMinute != nil {
		out.RequestsPerMinute = *l.RequestsPerMinute
	}
	if l.TokensPerMinute != nil {
		out.TokensPerMinute = *l.TokensPerMinute
	}
	if l.MaxConcurrent != nil {
		out.MaxConcurrent = int64(*l.MaxConcurrent)
	}
	return out
}
