package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Model endpoints: a model server account that many agents and runs share, with its limits
// and its prices, as cert-manager's Issuer and ClusterIssuer are shared by certificates.

// ModelEndpointSpec is a model server account: where it is, the key that pays for it, the
// limits its provider enforces on it, and what its models cost.
type ModelEndpointSpec struct {
	// provider is how steps speak to the server: OpenAI (any OpenAI-compatible chat
	// completions server) or HTTP (an agent behind an HTTP endpoint).
	// +kubebuilder:validation:XValidation:rule="self != 'Scripted' && self != 'A2A'",message="must be OpenAI or HTTP: a Scripted agent needs no endpoint, and an A2A agent names its own in model.endpoint"
	// +required
	Provider ModelProvider `json:"provider,omitempty"`

	// url is the base URL of an OpenAI-compatible server, or the HTTP agent's URL. The
	// operator's egress policy decides whether it may be reached.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self)",message="must be an absolute URL"
	// +required
	URL string `json:"url,omitempty"`

	// apiKeySecretRef names the key of a Secret that holds the API key: in the endpoint's
	// namespace for a ModelEndpoint, in the operator's namespace for a ClusterModelEndpoint.
	// +optional
	APIKeySecretRef *SecretKeyRef `json:"apiKeySecretRef,omitempty"`

	// limits are the provider's limits on this account, shared by every step that uses the
	// endpoint, in every run: the operator paces calls to stay within them, and learns the
	// limits the server reports in its answers.
	// +optional
	Limits *EndpointLimits `json:"limits,omitempty"`

	// prices are what each model costs, per million tokens, in currency. A step on a model
	// with no price costs nothing and says so.
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=model
	// +optional
	Prices []ModelPrice `json:"prices,omitempty"`

	// currency is the ISO 4217 code of the prices, e.g. USD. Defaults to USD.
	// +kubebuilder:validation:MaxLength=3
	// +kubebuilder:validation:Pattern=`^[A-Z]{3}$`
	// +kubebuilder:default=USD
	// +optional
	Currency string `json:"currency,omitempty"`

	// namespaceSelector selects the namespaces whose runs may use a ClusterModelEndpoint (a
	// ModelEndpoint has none). Unset, no namespace may; {} selects every namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// EndpointLimits are a provider's limits on an account. Unset fields are not limited here
// (the server's own answers may still slow calls down).
type EndpointLimits struct {
	// requestsPerMinute is the most calls a minute.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000000
	// +optional
	RequestsPerMinute *int64 `json:"requestsPerMinute,omitempty"`

	// tokensPerMinute is the most tokens a minute, counted as providers count them: each
	// call's prompt and its output cap are reserved when it is made, and settled from the
	// usage it reports.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000000000
	// +optional
	TokensPerMinute *int64 `json:"tokensPerMinute,omitempty"`

	// maxConcurrent is the most calls in flight at once.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	// +optional
	MaxConcurrent *int32 `json:"maxConcurrent,omitempty"`
}

// ModelPrice is what one model costs, per million tokens, as decimal strings (never floating
// point): "0.15" is 15 cents a million tokens in USD.
type ModelPrice struct {
	// model is the model's name, as agents name it in model.name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +required
	Model string `json:"model,omitempty"`

	// input is the price of a million prompt tokens.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=13
	// +kubebuilder:validation:Pattern=`^[0-9]{1,6}(\.[0-9]{1,6})?$`
	// +required
	Input string `json:"input,omitempty"`

	// cachedInput is the price of a million prompt tokens the server had cached. Defaults to
	// input.
	// +kubebuilder:validation:MaxLength=13
	// +kubebuilder:validation:Pattern=`^[0-9]{1,6}(\.[0-9]{1,6})?$`
	// +optional
	CachedInput string `json:"cachedInput,omitempty"`

	// output is the price of a million output tokens.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=13
	// +kubebuilder:validation:Pattern=`^[0-9]{1,6}(\.[0-9]{1,6})?$`
	// +required
	Output string `json:"output,omitempty"`
}

// ModelEndpointStatus is an endpoint's use, as the operator paces it. It is written every
// few seconds at most, and only when it changed.
type ModelEndpointStatus struct {
	// requestsLastMinute is the calls made over the last minute, by every operator replica's
	// pacer that uses the endpoint (the leader's).
	// +optional
	RequestsLastMinute int64 `json:"requestsLastMinute,omitempty"`

	// tokensLastMinute is the tokens used over the last minute.
	// +optional
	TokensLastMinute int64 `json:"tokensLastMinute,omitempty"`

	// inFlight is the calls in flight now.
	// +optional
	InFlight int64 `json:"inFlight,omitempty"`

	// waiting is the steps waiting for capacity now.
	// +optional
	Waiting int64 `json:"waiting,omitempty"`

	// rateLimited is the 429 answers the server gave since the operator started.
	// +optional
	RateLimited int64 `json:"rateLimited,omitempty"`

	// effectiveLimits are the limits the operator paces by: the configured ones, lowered to
	// what the server says its limits are, or learned from it when none are configured.
	// +optional
	EffectiveLimits *EndpointLimits `json:"effectiveLimits,omitempty"`

	// observedGeneration is the spec generation the status was written for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are Ready: True when the endpoint can be used (its prices parse and, for a
	// ClusterModelEndpoint, its Secret is in the operator's namespace), with the reason
	// otherwise.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ModelEndpoint is a model server account that the agents of the namespace's AgentConfigs
// share: its calls are paced within the account's limits across every run, and its prices make
// each step's cost.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=me,categories=baton
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.provider`
// +kubebuilder:printcolumn:name="RPM",type=integer,JSONPath=`.status.requestsLastMinute`
// +kubebuilder:printcolumn:name="TPM",type=integer,JSONPath=`.status.tokensLastMinute`
// +kubebuilder:printcolumn:name="Waiting",type=integer,JSONPath=`.status.waiting`
// +kubebuilder:printcolumn:name="429s",type=integer,JSONPath=`.status.rateLimited`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.url`,priority=1
// +kubebuilder:validation:XValidation:rule="!has(self.spec.namespaceSelector)",message="spec.namespaceSelector: only a ClusterModelEndpoint selects namespaces",reason=FieldValueForbidden
type ModelEndpoint struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the account: its URL, key, limits and prices.
	// +required
	Spec ModelEndpointSpec `json:"spec,omitzero"`

	// status is the endpoint's use, written by the operator.
	// +optional
	Status ModelEndpointStatus `json:"status,omitempty,omitzero"`
}

// ModelEndpointList is a list of ModelEndpoints.
// +kubebuilder:object:root=true
type ModelEndpointList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ModelEndpoint `json:"items"`
}

// ClusterModelEndpoint is a model server account shared by the namespaces its
// namespaceSelector selects; its API key is a Secret in the operator's namespace, which those
// namespaces cannot read.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=cme,categories=baton
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.provider`
// +kubebuilder:printcolumn:name="RPM",type=integer,JSONPath=`.status.requestsLastMinute`
// +kubebuilder:printcolumn:name="TPM",type=integer,JSONPath=`.status.tokensLastMinute`
// +kubebuilder:printcolumn:name="Waiting",type=integer,JSONPath=`.status.waiting`
// +kubebuilder:printcolumn:name="429s",type=integer,JSONPath=`.status.rateLimited`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.url`,priority=1
type ClusterModelEndpoint struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the account: its URL, key, limits, prices and the namespaces that may use it.
	// +required
	Spec ModelEndpointSpec `json:"spec,omitzero"`

	// status is the endpoint's use, written by the operator.
	// +optional
	Status ModelEndpointStatus `json:"status,omitempty,omitzero"`
}

// ClusterModelEndpointList is a list of ClusterModelEndpoints.
// +kubebuilder:object:root=true
type ClusterModelEndpointList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterModelEndpoint `json:"items"`
}

// EndpointKind names the kind of a model endpoint an agent refers to.
// +kubebuilder:validation:Enum=ModelEndpoint;ClusterModelEndpoint
type EndpointKind string

const (
	// KindModelEndpoint is a ModelEndpoint in the config's namespace.
	KindModelEndpoint EndpointKind = "ModelEndpoint"
	// KindClusterModelEndpoint is a ClusterModelEndpoint that selects the config's namespace.
	KindClusterModelEndpoint EndpointKind = "ClusterModelEndpoint"
)

// EndpointReference names the model endpoint an agent's steps use.
type EndpointReference struct {
	// kind is ModelEndpoint (in the config's namespace) or ClusterModelEndpoint. Defaults to
	// ModelEndpoint.
	// +kubebuilder:default=ModelEndpoint
	// +optional
	Kind EndpointKind `json:"kind,omitempty"`

	// name is the endpoint's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name,omitempty"`
}
