package replay

import (
	"slices"

	"github.com/shopspring/decimal"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/cost"
	"github.com/baton-dev/baton/internal/workflow"
)

// What a replay reports: the recorded and the replayed run's ends side by side, and where their
// paths part.

// Summary is what a run came to: its phase, end and use.
type Summary struct {
	Phase   v1alpha1.RunPhase          `json:"phase"`
	Reason  v1alpha1.TerminationReason `json:"reason,omitempty"`
	Message string                     `json:"message,omitempty"`
	Steps   int32                      `json:"steps"`
	Tokens  int64                      `json:"tokens"`
	Cost    string                     `json:"cost,omitempty"`
	Path    []v1alpha1.HandoffRecord   `json:"path"`
	// Output is the run's output; Gates the gates it reached, in the order it first reached
	// them (the one it waits at last, if it waits).
	Output string   `json:"output,omitempty"`
	Gates  []string `json:"gates,omitempty"`
}

// Report is a replay's outcome.
type Report struct {
	Recorded Summary `json:"recorded"`
	Replayed Summary `json:"replayed"`
	// Diverged is the place (from 1) in the handoff sequences where they first differ: another
	// agent, destination or outcome, or one of them ends. 0 when they are the same.
	Diverged int `json:"diverged,omitempty"`
	// Stopped says why the replay stopped before the replayed run ended, if it did.
	Stopped string `json:"stopped,omitempty"`
	// Live are the steps answered live, by calling the agent.
	Live []int32 `json:"live,omitempty"`
	// Branches are the replays of the branches of the replayed run's fan-outs, in the order
	// they were replayed.
	Branches []BranchReport `json:"branches,omitempty"`
	// Err is why the recording could not be read as far as the replay went (Recording.Load
	// failed): the report then finds nothing, and the replay is to be failed with it.
	Err error `json:"-"`
}

// Same reports whether the replay reproduced the recorded run from the recording alone: the
// same path, tokens, cost and end, no turn answered live, and each branch reproduced.
func (r Report) Same() bool {
	for _, b := range r.Branches {
		if !b.reproduced() {
			return false
		}
	}
	return r.Diverged == 0 && r.Stopped == "" && len(r.Live) == 0 && r.Recorded.Reason == r.Replayed.Reason &&
		r.Recorded.Tokens == r.Replayed.Tokens && r.Recorded.Phase == r.Replayed.Phase && sameCost(r.Recorded.Cost, r.Replayed.Cost)
}

// sameCost reports whether two costs are the same amount ("" being none).
func sameCost(a, b string) bool {
	amount := func(s string) (decimal.Decimal, error) {
		if s == "" {
			return decimal.Zero, nil
		}
		return cost.Parse(s)
	}
	x, errA := amount(a)
	y, errB := amount(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return x.Equal(y)
}

// summary is what a run with this status at its end, path and gates reached came to.
func summary(st v1alpha1.AgentRunStatus, path []v1alpha1.HandoffRecord, gates []string) Summary {
	return Summary{Phase: st.Phase, Reason: st.TerminationReason, Message: st.TerminationMessage,
		Steps: st.StepCount, Tokens: st.TokensUsed, Cost: st.Cost, Path: path, Output: st.Output, Gates: gatesOf(st, gates)}
}

// gateNames are the gates decisions were made at, in order.
func gateNames(decided []workflow.Decided) []string {
	out := make([]string, 0, len(decided))
	for _, d := range decided {
		out = append(out, d.Gate)
	}
	return out
}

// gatesOf are the gates a run reached: those given, in order, then the one it waits at. The
// decisions are the run's whole list (status.approvals keeps only the latest).
func gatesOf(st v1alpha1.AgentRunStatus, gates []string) []string {
	var out []string
	add := func(g string) {
		if g != "" && !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	for _, g := range gates {
		add(g)
	}
	// Records written before decisions were kept whole name none: the status's do.
	for _, a := range st.Approvals {
		add(a.Gate)
	}
	if pa := st.PendingApproval; pa != nil {
		add(pa.Gate)
	}
	return out
}

// diverged is the first place (from 1) where the two paths differ, 0 when they do not.
func diverged(a, b []v1alpha1.HandoffRecord) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) {
			return i + 1
		}
		x, y := a[i], b[i]
		if x.Step != y.Step || x.From != y.From || x.To != y.To || x.Outcome != y.Outcome {
			return i + 1
		}
	}
	return 0
}
