package console

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// maxRuns bounds the runs a page lists.
const maxRuns = 500

// scopeCache remembers the namespaces the console looks in for a while: finding them asks the
// API server once per namespace.
type scopeCache struct {
	find func(context.Context) []string
	ttl  time.Duration
	mu   sync.Mutex
	at   time.Time
	last []string
}

func (c *scopeCache) get(ctx context.Context) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil || time.Since(c.at) > c.ttl {
		c.last, c.at = c.find(ctx), time.Now()
	}
	return c.last
}

// findScopes are the namespaces to list runs in.
func (s *Server) findScopes(ctx context.Context) []string { return s.scopesOf(ctx, "agentruns") }

// scopesOf are the namespaces to list Baton's resource in: the console's, or every namespace
// ("") when the user may list it in all of them, else the namespaces they may list it in, else
// the kubeconfig's namespace.
func (s *Server) scopesOf(ctx context.Context, resource string) []string {
	if len(s.opts.Namespaces) > 0 {
		return s.opts.Namespaces
	}
	if s.access.allowed(ctx, "", "list", resource) {
		return []string{""}
	}
	var namespaces corev1.NamespaceList
	if err := s.opts.Kube.List(ctx, &namespaces); err == nil {
		var out []string
		for _, ns := range namespaces.Items {
			if s.access.allowed(ctx, ns.Name, "list", resource) {
				out = append(out, ns.Name)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return []string{s.opts.DefaultNamespace}
}

// listRuns lists the runs in the console's namespaces, newest first, with the resource version
// the lists were read at (the oldest of them), from which a watch sees every change after. A
// namespace the user may not list is an error in errs, as the API server gave it; the others
// are still listed.
func (s *Server) listRuns(ctx context.Context, namespace string) (runs []v1alpha1.AgentRun, version string, errs []error) {
	scopes := s.scopes.get(ctx)
	if namespace != "" {
		scopes = []string{namespace}
	}
	var versions oldestVersion
	for _, ns := range scopes {
		var list v1alpha1.AgentRunList
		if err := s.opts.Kube.List(ctx, &list, client.InNamespace(ns)); err != nil {
			errs = append(errs, err)
			continue
		}
		versions.add(list.ResourceVersion)
		runs = append(runs, list.Items...)
	}
	version = versions.String()
	sort.SliceStable(runs, func(i, j int) bool {
		a, b := runs[i].CreationTimestamp, runs[j].CreationTimestamp
		if !a.Equal(&b) {
			return b.Before(&a)
		}
		return runs[i].Namespace+"/"+runs[i].Name < runs[j].Namespace+"/"+runs[j].Name
	})
	return runs, version, errs
}

// oldestVersion is the oldest of the resource versions lists were read at: where a watch of
// them all starts, seeing every change after any of them.
type oldestVersion struct {
	v   uint64
	set bool
}

// add counts a list's version. Resource versions are opaque, but the API server's are numbers;
// one that is not a number is not used.
func (o *oldestVersion) add(version string) {
	if v, err := strconv.ParseUint(version, 10, 64); err == nil && (!o.set || v < o.v) {
		o.v, o.set = v, true
	}
}

// String is the oldest version, or "" when no list had one.
func (o oldestVersion) String() string {
	if !o.set {
		return ""
	}
	return strconv.FormatUint(o.v, 10)
}

// listConfigs lists the AgentConfigs of a namespace, or of the console's namespaces.
func (s *Server) listConfigs(ctx context.Context, namespace string) ([]v1alpha1.AgentConfig, []error) {
	scopes := s.scopes.get(ctx)
	if namespace != "" {
		scopes = []string{namespace}
	}
	var out []v1alpha1.AgentConfig
	var errs []error
	for _, ns := range scopes {
		var list v1alpha1.AgentConfigList
		if err := s.opts.Kube.List(ctx, &list, client.InNamespace(ns)); err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, list.Items...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out, errs
}

// config reads a run's AgentConfig; nil when the user may not read it or it is gone.
func (s *Server) config(ctx context.Context, run *v1alpha1.AgentRun) *v1alpha1.AgentConfig {
	cfg := &v1alpha1.AgentConfig{}
	if err := s.opts.Kube.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: run.Spec.ConfigRef.Name}, cfg); err != nil {
		return nil
	}
	return cfg
}

// namespaceNames are the namespaces the runs and configs are in, for the filters.
func namespaceNames(runs []v1alpha1.AgentRun, configs []v1alpha1.AgentConfig, more ...string) []string {
	set := map[string]bool{}
	for _, r := range runs {
		set[r.Namespace] = true
	}
	for _, c := range configs {
		set[c.Namespace] = true
	}
	for _, ns := range more {
		if ns != "" {
			set[ns] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// accessCache remembers briefly what the user may do, as SelfSubjectAccessReviews answer.
type accessCache struct {
	kube client.Client
	ttl  time.Duration
	mu   sync.Mutex
	seen map[accessKey]accessAnswer
}

type accessKey struct{ namespace, verb, resource string }

// maxAccessAnswers bounds the answers an accessCache keeps.
const maxAccessAnswers = 4096

type accessAnswer struct {
	allowed bool
	at      time.Time
}

func newAccessCache(kube client.Client, ttl time.Duration) *accessCache {
	return &accessCache{kube: kube, ttl: ttl, seen: map[accessKey]accessAnswer{}}
}

// allowed asks the API server whether the user may do verb on Baton's resource in namespace
// ("" is every namespace). An error reads as not allowed.
func (a *accessCache) allowed(ctx context.Context, namespace, verb, resource string) bool {
	key := accessKey{namespace, verb, resource}
	a.mu.Lock()
	if ans, ok := a.seen[key]; ok && time.Since(ans.at) < a.ttl {
		a.mu.Unlock()
		return ans.allowed
	}
	a.mu.Unlock()
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: verb, Group: v1alpha1.GroupVersion.Group, Resource: resource,
		},
	}}
	if err := a.kube.Create(ctx, review); err != nil {
		return false
	}
	a.mu.Lock()
	if len(a.seen) >= maxAccessAnswers {
		// Namespaces come from URLs too: the cache stays bounded whatever is asked.
		clear(a.seen)
	}
	a.seen[key] = accessAnswer{allowed: review.Status.Allowed, at: time.Now()}
	a.mu.Unlock()
	return review.Status.Allowed
}

// apiMessage is an error as the API server said it.
func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" {
		return status.Status().Message
	}
	return err.Error()
}
