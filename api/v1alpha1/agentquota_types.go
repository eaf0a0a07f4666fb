package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// QuotaAdmission says who admits a namespace's runs beside its AgentQuotas.
// +kubebuilder:validation:Enum=Kueue
type QuotaAdmission string

const (
	// AdmissionKueue makes every run of the namespace wait for Kueue to admit it, in the LocalQueue
	// it is labelled with or the quota's defaultQueue.
	AdmissionKueue QuotaAdmission = "Kueue"
)

// AgentQuotaSpec caps what a namespace's runs use, as a ResourceQuota caps its pods. Unset
// fields are not capped. Every AgentQuota of a namespace applies: the lowest cap wins.
// +kubebuilder:validation:XValidation:rule="has(self.maxRunningRuns) || has(self.maxCostPerDay) || has(self.maxCostPerMonth) || has(self.maxTokensPerDay) || has(self.maxTokensPerMonth) || has(self.runLimits) || has(self.maxTranscriptBytes) || has(self.admission) || has(self.defaultQueue) || (has(self.priorityClasses) && size(self.priorityClasses) > 0)",message="set at least one of maxRunningRuns, maxCostPerDay, maxCostPerMonth, maxTokensPerDay, maxTokensPerMonth, runLimits, maxTranscriptBytes, admission, defaultQueue and priorityClasses",reason=FieldValueRequired
type AgentQuotaSpec struct {
	// maxRunningRuns is the most runs of the namespace past Pending and not yet ended (runs
	// waiting for people count; Queued runs and branches do not).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	MaxRunningRuns *int32 `json:"maxRunningRuns,omitempty"`

	// currency is the ISO 4217 code the cost caps are in: a model call priced in another
	// currency is refused while a cost cap applies. Defaults to USD, as endpoints' prices do.
	// +kubebuilder:validation:Pattern=`^[A-Z]{3}$`
	// +kubebuilder:validation:MaxLength=3
	// +kubebuilder:default=USD
	// +optional
	Currency *string `json:"currency,omitempty"`

	// maxCostPerDay is the most the namespace's runs may spend in a UTC day, as a decimal
	// string. Checked before every model call with the call's worst case: a call that would
	// pass it is not made, and its run waits (Running, Progressing reason QuotaExceeded) until
	// the next day or a higher cap; a run not started waits Queued.
	// +kubebuilder:validation:MaxLength=25
	// +kubebuilder:validation:Pattern=`^[0-9]{1,12}(\.[0-9]{1,12})?$`
	// +optional
	MaxCostPerDay *string `json:"maxCostPerDay,omitempty"`

	// maxCostPerMonth is maxCostPerDay for the UTC calendar month.
	// +kubebuilder:validation:MaxLength=25
	// +kubebuilder:validation:Pattern=`^[0-9]{1,12}(\.[0-9]{1,12})?$`
	// +optional
	MaxCostPerMonth *string `json:"maxCostPerMonth,omitempty"`

	// maxTokensPerDay is the most tokens the namespace's runs may use in a UTC day, checked
	// before every model call as maxCostPerDay is.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000000000000
	// +optional
	MaxTokensPerDay *int64 `json:"maxTokensPerDay,omitempty"`

	// maxTokensPerMonth is maxTokensPerDay for the UTC calendar month.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000000000000
	// +optional
	MaxTokensPerMonth *int64 `json:"maxTokensPerMonth,omitempty"`

	// runLimits are the most any one run of the namespace may have, whatever its config and
	// its own overrides say: a run that asks for more, or leaves a limit unset, gets these.
	// +optional
	RunLimits *QuotaRunLimits `json:"runLimits,omitempty"`

	// maxTranscriptBytes bounds the transcripts of all the namespace's runs together, in bytes
	// as stored: past it, runs not started wait Queued (deleting runs frees room).
	// +kubebuilder:validation:Minimum=1048576
	// +kubebuilder:validation:Maximum=1099511627776
	// +optional
	MaxTranscriptBytes *int64 `json:"maxTranscriptBytes,omitempty"`

	// admission Kueue makes every run of the namespace wait for Kueue to admit it, whether or
	// not it is labelled with a LocalQueue: an unlabelled run goes to defaultQueue.
	// +optional
	Admission QuotaAdmission `json:"admission,omitempty"`

	// defaultQueue is the Kueue LocalQueue, in the namespace, of the runs that name none.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	DefaultQueue *string `json:"defaultQueue,omitempty"`

	// priorityClasses are the Kueue WorkloadPriorityClasses the namespace's runs may name in
	// spec.priorityClassName (another name is refused); a run naming none gets the first. A
	// run's spec.priority is clamped to the listed classes' values when Kueue admits it.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +listType=atomic
	// +optional
	PriorityClasses []string `json:"priorityClasses,omitempty"`
}

// QuotaRunLimits are the most one run of a namespace may have. Unset fields do not bound runs.
type QuotaRunLimits struct {
	// maxCost bounds limits.maxCost, as a decimal string; a run without one gets this.
	// +kubebuilder:validation:MaxLength=25
	// +kubebuilder:validation:Pattern=`^[0-9]{1,12}(\.[0-9]{1,12})?$`
	// +optional
	MaxCost *string `json:"maxCost,omitempty"`

	// maxSteps bounds limits.maxSteps.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxSteps *int32 `json:"maxSteps,omitempty"`

	// maxTokens bounds limits.maxTokens.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000000000
	// +optional
	MaxTokens *int64 `json:"maxTokens,omitempty"`

	// timeout bounds limits.timeout.
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be more than 0s"
	// +optional
	Timeout *Duration `json:"timeout,omitempty"`

	// maxTranscriptBytes bounds limits.maxTranscriptBytes.
	// +kubebuilder:validation:Minimum=1048576
	// +kubebuilder:validation:Maximum=17179869184
	// +optional
	MaxTranscriptBytes *int64 `json:"maxTranscriptBytes,omitempty"`

	// maxBranches bounds limits.maxBranches: the branches a run may start in all its fan-outs.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	MaxBranches *int32 `json:"maxBranches,omitempty"`

	// maxDepth bounds limits.maxDepth: how deep branches may nest.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=8
	// +optional
	MaxDepth *int32 `json:"maxDepth,omitempty"`
}

// AgentQuota condition reasons, beside QuotaExceeded.
const (
	// ReasonHasRoom is the Ready reason of a quota that runs can start under.
	ReasonHasRoom = "HasRoom"
	// ReasonQuotaConflict is the Ready=False reason of the quotas of a namespace that disagree
	// on defaultQueue or priorityClasses, or on currency: runs of the namespace wait until
	// they agree.
	ReasonQuotaConflict = "QuotaConflict"
)

// AgentQuotaStatus is the namespace's use against the quota.
type AgentQuotaStatus struct {
	// running is the runs that count against maxRunningRuns now.
	// +optional
	Running int32 `json:"running"` //nolint:kubeapilinter // optionalfields: a count of 0 is shown as 0 in kubectl get, not left blank

	// queued is the runs of the namespace waiting Queued for room in this quota.
	// +optional
	Queued int32 `json:"queued"` //nolint:kubeapilinter // optionalfields: a count of 0 is shown as 0 in kubectl get, not left blank

	// heldRuns is the runs of the namespace that started and wait Running at a cost or token
	// cap, their next model call not made.
	// +optional
	HeldRuns int32 `json:"heldRuns,omitempty"`

	// costToday is what the namespace's model calls reserved in the current UTC day cost, as a
	// decimal string, from the operator's ledger: deleting runs does not change it.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	CostToday string `json:"costToday,omitempty"`

	// costThisMonth is costToday for the current UTC calendar month.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	CostThisMonth string `json:"costThisMonth,omitempty"`

	// currency is the currency of costToday and costThisMonth.
	// +kubebuilder:validation:MaxLength=3
	// +optional
	Currency string `json:"currency,omitempty"`

	// tokensToday is the tokens the namespace's runs used in the current UTC day, from the
	// ledger.
	// +optional
	TokensToday int64 `json:"tokensToday"` //nolint:kubeapilinter // optionalfields: a count of 0 is shown as 0 in kubectl get, not left blank

	// tokensThisMonth is tokensToday for the current UTC calendar month.
	// +optional
	TokensThisMonth int64 `json:"tokensThisMonth,omitempty"`

	// transcriptBytes is what the transcripts of the namespace's runs take together, in bytes
	// as stored.
	// +optional
	TranscriptBytes int64 `json:"transcriptBytes,omitempty"`

	// resetTime is when the day's cost and tokens start again from zero (midnight UTC).
	// +optional
	ResetTime *metav1.Time `json:"resetTime,omitempty"`

	// observedGeneration is the spec generation the status was written for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are Ready: True (reason HasRoom) while runs can start and their calls be
	// made, False with reason QuotaExceeded while runs wait for it (naming the cap reached) or
	// QuotaConflict while the namespace's quotas disagree.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// AgentQuota is the namespace's, not its run authors': it caps how many runs of its namespace
// run at once, what they spend and use a day and a month (checked before every model call),
// the most each run may have, and whether Kueue admits them. A run that would pass it waits:
// Queued, in order of spec.priority and then creation, before it starts; Running, its next
// model call not made, once it has.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=aq,categories=baton
// +kubebuilder:printcolumn:name="Running",type=integer,JSONPath=`.status.running`
// +kubebuilder:printcolumn:name="Max Running",type=integer,JSONPath=`.spec.maxRunningRuns`
// +kubebuilder:printcolumn:name="Queued",type=integer,JSONPath=`.status.queued`
// +kubebuilder:printcolumn:name="Held",type=integer,JSONPath=`.status.heldRuns`
// +kubebuilder:printcolumn:name="Cost Today",type=string,JSONPath=`.status.costToday`
// +kubebuilder:printcolumn:name="Max Cost",type=string,JSONPath=`.spec.maxCostPerDay`
// +kubebuilder:printcolumn:name="Tokens Today",type=integer,JSONPath=`.status.tokensToday`
// +kubebuilder:printcolumn:name="Cost This Month",type=string,JSONPath=`.status.costThisMonth`,priority=1
// +kubebuilder:printcolumn:name="Transcript Bytes",type=integer,JSONPath=`.status.transcriptBytes`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="has(self.spec)",message="spec: set at least one of maxRunningRuns, maxCostPerDay, maxCostPerMonth, maxTokensPerDay, maxTokensPerMonth, runLimits, maxTranscriptBytes, admission, defaultQueue and priorityClasses",reason=FieldValueRequired
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
