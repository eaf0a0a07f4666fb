package v1alpha1

// A2AServing says whether and how a team is served as an Agent2Agent (A2A) agent: the operator
// serves its AgentCard at /namespaces/{namespace}/agentconfigs/{name}/.well-known/agent-card.json
// on its HTTPS address, and a message sent to it starts an AgentRun, which is the A2A task.
// Callers authenticate as to the API server and need create on agentruns in the namespace.
type A2AServing struct {
	// expose serves the team as an A2A agent.
	// +optional
	Expose bool `json:"expose,omitempty"`

	// description is the card's description of the team; unset, the entrypoint agent's.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Description string `json:"description,omitempty"`
}

const (
	// LabelA2ATask marks the AgentRuns started by A2A messages: its value is the digest of the
	// message's ID and its sender, which names the run, so that a message sent again finds the
	// run it started.
	LabelA2ATask = "agents.baton.dev/a2a-task"
	// AnnotationA2AContext is the A2A context of a run an A2A message started, and of the
	// AgentSession the context is.
	AnnotationA2AContext = "agents.baton.dev/a2a-context"
	// LabelA2AContext marks the AgentSession of an A2A context: its value is a digest of the
	// context's ID.
	LabelA2AContext = "agents.baton.dev/a2a-context"
)
