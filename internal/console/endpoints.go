package console

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// endpointView is a model endpoint as the endpoints page shows it: a ModelEndpoint of a
// namespace, or a ClusterModelEndpoint (no namespace).
type endpointView struct {
	Kind      v1alpha1.EndpointKind
	Namespace string
	Name      string
	Created   time.Time
	Spec      v1alpha1.ModelEndpointSpec
	Status    v1alpha1.ModelEndpointStatus
}

type endpointsView struct {
	page
	Endpoints []endpointView
	// Notes say which endpoints are not shown because the user may not list them, as the API
	// server said.
	Notes []string
}

// endpointsPage lists the model endpoints the runs share, with their limits and their use as
// the operator paces them: the ModelEndpoints of the namespaces the user may list them in, and
// the ClusterModelEndpoints if the user may list those. What the user may not list is a note,
// not an error: the page shows the rest.
func (s *Server) endpointsPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	v := endpointsView{page: s.page(r, "Model endpoints", "endpoints")}
	var versions oldestVersion
	for _, ns := range s.endpointScopes.get(ctx) {
		var list v1alpha1.ModelEndpointList
		if err := s.opts.Kube.List(ctx, &list, client.InNamespace(ns)); err != nil {
			v.refused(err, "ModelEndpoints "+where(ns))
			continue
		}
		versions.add(list.ResourceVersion)
		for _, e := range list.Items {
			v.Endpoints = append(v.Endpoints, endpointView{Kind: v1alpha1.KindModelEndpoint, Namespace: e.Namespace, Name: e.Name,
				Created: e.CreationTimestamp.Time, Spec: e.Spec, Status: e.Status})
		}
	}
	var cluster v1alpha1.ClusterModelEndpointList
	listed := false
	if err := s.opts.Kube.List(ctx, &cluster); err != nil {
		v.refused(err, "ClusterModelEndpoints")
	} else {
		listed = true
		versions.add(cluster.ResourceVersion)
		for _, e := range cluster.Items {
			v.Endpoints = append(v.Endpoints, endpointView{Kind: v1alpha1.KindClusterModelEndpoint, Name: e.Name,
				Created: e.CreationTimestamp.Time, Spec: e.Spec, Status: e.Status})
		}
	}
	// A namespace's endpoints by namespace, then the cluster's.
	sort.SliceStable(v.Endpoints, func(i, j int) bool {
		a, b := v.Endpoints[i], v.Endpoints[j]
		if (a.Namespace == "") != (b.Namespace == "") {
			return b.Namespace == ""
		}
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	v.Live = "/live?" + url.Values{"watch": {"endpoints"}, "rv": {versions.String()}, "cluster": {strconv.FormatBool(listed)}}.Encode()
	s.render(w, http.StatusOK, "endpoints", v)
}

// refused notes a list the API server did not give: one the user may not read, or of a kind
// the cluster does not have, is a note; anything else is an error.
func (v *endpointsView) refused(err error, what string) {
	switch {
	case apierrors.IsForbidden(err):
		v.Notes = append(v.Notes, "You may not list "+what+", so they are not shown: "+apiMessage(err))
	case meta.IsNoMatchError(err):
		v.Notes = append(v.Notes, "This cluster does not have "+what+": their CustomResourceDefinition is not installed.")
	default:
		v.Errors = append(v.Errors, "Listing "+what+": "+apiMessage(err))
	}
}

// where names a namespace, or every namespace ("").
func where(namespace string) string {
	if namespace == "" {
		return "in every namespace"
	}
	return "in namespace " + namespace
}

// limitsText says what limits an endpoint has: requests and tokens a minute, calls at once.
func limitsText(l *v1alpha1.EndpointLimits, none string) string {
	var parts []string
	if l != nil && l.RequestsPerMinute != nil {
		parts = append(parts, fmt.Sprintf("%d requests/min", *l.RequestsPerMinute))
	}
	if l != nil && l.TokensPerMinute != nil {
		parts = append(parts, fmt.Sprintf("%d tokens/min", *l.TokensPerMinute))
	}
	if l != nil && l.MaxConcurrent != nil {
		parts = append(parts, fmt.Sprintf("%d at once", *l.MaxConcurrent))
	}
	if len(parts) == 0 {
		return none
	}
	return strings.Join(parts, ", ")
}

// money is an amount with its currency, or nothing when there is no amount.
func money(amount, currency string) string {
	if amount == "" {
		return ""
	}
	return strings.TrimSpace(amount + " " + currency)
}
