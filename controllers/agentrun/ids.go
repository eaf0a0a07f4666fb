package agentrun

import (
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
)

// The transcript records of tool calls (docs/transcript.md documents them for readers). A
// step's tool loop writes, in order: a tool-turn record for each answer of the model that asks
// for calls, before any call is made; a tool-start record before each call of a tool with side
// effects; a tool record with each call's outcome. A step held at a tool's gate ends, for now,
// with a tool-gate record. Records are keyed by step and by turn or call number, so a step that
// runs again (after a gate, or in an operator that restarted) finds what it already did.

// idOf names the run in its records.
func idOf(run *v1alpha1.AgentRun) records.RunID {
	return records.RunID{UID: string(run.UID), Namespace: run.Namespace, Name: run.Name}
}
