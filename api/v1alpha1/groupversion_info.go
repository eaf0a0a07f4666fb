// Package v1alpha1 holds the agents.baton.dev/v1alpha1 API: AgentConfig, which describes a team
// of agents, its workflow and its limits; AgentRun, one execution of that team; ModelEndpoint
// and ClusterModelEndpoint, model server accounts that runs share, with their limits and
// prices; AgentQuota, what a namespace's runs may use; and AgentSession, a conversation whose
// turns are runs.
// +kubebuilder:object:generate=true
// +groupName=agents.baton.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "agents.baton.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this API with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &AgentConfig{}, &AgentConfigList{}, &AgentRun{}, &AgentRunList{},
			&ModelEndpoint{}, &ModelEndpointList{}, &ClusterModelEndpoint{}, &ClusterModelEndpointList{},
			&AgentQuota{}, &AgentQuotaList{}, &AgentSession{}, &AgentSessionList{})
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})

	// AddToScheme adds the kinds of this API to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
