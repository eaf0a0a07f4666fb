package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AgentQuotaSpec caps what a namespace's runs use, as a ResourceQuota caps its pods. Unset
// fields are not capped. Every AgentQuota of a namespace applies.
// +kubebuilder:validation:XValidation:rule="has(self.maxRunningRuns) || has(self.maxCostPerDay) || has(self.maxTokensPerDay)",message="set at least one of maxRunningRuns, maxCostPerDay and maxTokensPerDay",reason=FieldValueRequired
type AgentQuotaSpec struct {
	// maxRunningRuns is the most runs of the namespace past Pending and not yet ended (runs
	// waiting for people count; Queued runs do not).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	MaxRunningRuns *int32 `json:"maxRunningRuns,omitempty"`

	// maxCostPerDay is the most the namespace's runs may spend in a UTC day, in the endpoints'
	// currency, as a decimal string. A run that would start while the day's cost is at it
	// waits Queued until the next day.
	// +kubebuilder:validation:MaxLength=25
	// +kubebuilder:validation:Pattern=`^[0-9]{1,12}(\.[0-9]{1,12})?$`
	// +optional
	MaxCostPerDay *string `json:"maxCostPerDay,omitempty"`

	// maxTokensPerDay is the most tokens the namespace's runs may use in a UTC day.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000000000000
	// +optional
	MaxTokensPerDay *int64 `json:"maxTokensPerDay,omitempty"`
}

// AgentQuotaStatus is the namespace's use against the quota.
type AgentQuotaStatus struct {
	// running is the runs that count against maxRunningRuns now.
	// +optional
	Running int32 `json:"running"` //nolint:kubeapilinter // optionalfields: a count of 0 is shown as 0 in kubectl get, not left blank

	// queued is the runs of the namespace waiting Queued for room in this quota.
	// +optional
	Queued int32 `json:"queued"` //nolint:kubeapilinter // optionalfields: a count of 0 is shown as 0 in kubectl get, not left blank

	// costToday is what the namespace's runs spent in the current UTC day, as a decimal string.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	CostToday string `json:"costToday,omitempty"`

	// tokensToday is the tokens the namespace's runs used in the current UTC day.
	// +optional
	TokensToday int64 `json:"tokensToday"` //nolint:kubeapilinter // optionalfields: a count of 0 is shown as 0 in kubectl get, not left blank

	// resetTime is when the day's cost and tokens start again from zero (midnight UTC).
	// +optional
	ResetTime *metav1.Time `json:"resetTime,omitempty"`

	// observedGeneration is the spec generation the status was written for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are Ready: True while the quota has room, False (reason QuotaExceeded) while
	// runs wait for it, naming the cap that is reached.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// AgentQuota caps how many runs of its namespace run at once, and what they spend and use a
// day. A run that would pass it waits in phase Queued, in order of spec.priority and then
// creation, and starts when there is room.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=aq,categories=baton
// +kubebuilder:printcolumn:name="Running",type=integer,JSONPath=`.status.running`
// +kubebuilder:printcolumn:name="Max Running",type=integer,JSONPath=`.spec.maxRunningRuns`
// +kubebuilder:printcolumn:name="Queued",type=integer,JSONPath=`.status.queued`
// +kubebuilder:printcolumn:name="Cost Today",type=string,JSONPath=`.status.costToday`
// +kubebuilder:printcolumn:name="Max Cost",type=string,JSONPath=`.spec.maxCostPerDay`
// +kubebuilder:printcolumn:name="Tokens Today",type=integer,JSONPath=`.status.tokensToday`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AgentQuota struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the caps.
	// +optional
	Spec AgentQuotaSpec `json:"spec,omitzero"`

	// status is the namespace's use, written by the operator.
	// +optional
	Status AgentQuotaStatus `json:"status,omitempty,omitzero"`
}

// AgentQuotaList is a list of AgentQuotas.
// +kubebuilder:object:root=true
type AgentQuotaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AgentQuota `json:"items"`
}
