// Package v1alpha1 holds the agents.baton.dev/v1alpha1 API: AgentConfig, which describes a team
// of agents, its workflow and its limits, and AgentRun, one execution of that team.
// +kubebuilder:object:generate=true
// +groupName=agents.baton.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "agents.baton.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this API with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the kinds of this API to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
