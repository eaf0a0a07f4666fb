package webhook

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/decisions"
	"github.com/baton-dev/baton/internal/workflow"
	. "github.com/baton-dev/baton/test/builders"
)

// A gate's decisions are judged by who the webhook says made them, against who it recorded as
// the run's creator: these tests send the people's requests through the webhook, and give the
// queue it keeps to the workflow core, as the operator does.

// reviewed is a writer whose draft waits at gate review, for required approvals, before the
// publisher's turn.
func reviewed(required int32) *ConfigWrapper {
	return MakeConfig("reviewed", team).Agents(
		MakeAgent("writer").HandsOffTo("publisher"),
		MakeAgent("publisher").Terminator(),
	).Gate("review", "writer", required)
}

// gated is the run of cfg that creator made through the webhook, waiting at its first gate
// after the entrypoint's step, and its plan as the operator makes it: for the creator the
// webhook recorded.
func gated(t *testing.T, w *Decisions, cfg *ConfigWrapper, creator string, annotations map[string]string) (*v1alpha1.AgentRun, *workflow.Plan) {
	t.Helper()
	run := MakeRun("r", team).Config(cfg.Name).Obj()
	run.Annotations = annotations
	stored, res := createAs(t, w, creator, run)
	if !res.Allowed {
		t.Fatalf("%s's run was refused: %s", creator, refusal(res))
	}
	p, errs := workflow.NewPlan(cfg.Obj().Spec, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	p = p.ForRun(stored.Name, stored.Namespace, stored.Spec.Approvals, stored.Annotations[v1alpha1.AnnotationCreatedBy])
	st := workflow.Start(p, stored.Status, "a draft please", "reviewed-rev", t0).Status
	entry := st.CurrentAgent
	next := cfg.Spec.Agents[1].Name
	stored.Status = workflow.Apply(p, st, workflow.StepResult{Agent: entry, Input: st.Input,
		Result: workflow.Result{Output: "the draft", Handoff: next}}, t0).Status
	if stored.Status.Phase != v1alpha1.PhaseAwaitingApproval {
		t.Fatalf("the run does not wait at a gate: %s %s", stored.Status.Phase, stored.Status.TerminationMessage)
	}
	return stored, p
}

// operatorTakes applies the run's queued decisions the run has not taken yet, in order, as the
// operator does, and returns what it did.
func operatorTakes(t *testing.T, p *workflow.Plan, run *v1alpha1.AgentRun) workflow.Update {
	t.Helper()
	var pending []decisions.Queued
	for _, q := range queueOf(t, run) {
		if q.Seq > run.Status.LastDecision {
			pending = append(pending, q)
		}
	}
	u := workflow.DecideAll(p, run.Status, pending, t0)
	run.Status = u.Status
	return u
}

// outcome is what people see of a run's gate: its phase, the approvals it recorded as
// "Decision gate by", and the Decision condition's reason and message.
type outcome struct {
	Phase     v1alpha1.RunPhase
	Approvals []string
	Decision  string
}

func outcomeOf(run *v1alpha1.AgentRun) outcome {
	o := outcome{Phase: run.Status.Phase}
	for _, a := range run.Status.Approvals {
		o.Approvals = append(o.Approvals, strings.Join([]string{string(a.Decision), a.Gate, "by", a.By}, " "))
	}
	if c := meta.FindStatusCondition(run.Status.Conditions, v1alpha1.ConditionDecision); c != nil {
		o.Decision = c.Reason + ": " + c.Message
	}
	return o
}

// A gate with allowSelfApproval: false is passed only by an approver other than the run's
// creator as the webhook recorded it, which a creator cannot forge; a gate that requires two
// approvals takes them from two people. Each decision is taken as soon as it is made.
func TestAGateHearsWhoCreatedTheRunAndWhoDecided(t *testing.T) {
	type decision struct{ by, gate string }
	approvers := rbac{"alice": {v1alpha1.ApproveVerb}, "bob": {v1alpha1.ApproveVerb}, "mallory": {v1alpha1.ApproveVerb}}
	for name, tc := range map[string]struct {
		cfg       *ConfigWrapper
		creator   string
		named     map[string]string
		decisions []decision
		want      outcome
	}{
		"the creator's approval of a gate that needs another approver": {
			cfg: reviewed(1).AllowSelfApproval("review", false), creator: "alice", decisions: []decision{{"alice", "review"}},
			want: outcome{Phase: v1alpha1.PhaseAwaitingApproval, Decision: v1alpha1.ReasonSelfApproval + ": approve=review by alice changed nothing: " +
				"alice created this run, and gate review needs an approver other than the run's creator (allowSelfApproval: false)"}},
		"another approver's after the creator's": {
			cfg: reviewed(1).AllowSelfApproval("review", false), creator: "alice", decisions: []decision{{"alice", "review"}, {"bob", "review"}},
			want: outcome{Phase: v1alpha1.PhaseRunning, Approvals: []string{"Approved review by bob"},
				Decision: v1alpha1.ReasonApplied + ": approve=review by bob: gate review passed"}},
		"the creator's approval of a run she said someone else created": {
			cfg: reviewed(1).AllowSelfApproval("review", false), creator: "mallory", named: map[string]string{v1alpha1.AnnotationCreatedBy: "bob"},
			decisions: []decision{{"mallory", "review"}},
			want: outcome{Phase: v1alpha1.PhaseAwaitingApproval, Decision: v1alpha1.ReasonSelfApproval + ": approve=review by mallory changed nothing: " +
				"mallory created this run, and gate review needs an approver other than the run's creator (allowSelfApproval: false)"}},
		"the creator's approval of a gate that does not say": {
			cfg: reviewed(1), creator: "alice", decisions: []decision{{"alice", "review"}},
			want: outcome{Phase: v1alpha1.PhaseRunning, Approvals: []string{"Approved review by alice"},
				Decision: v1alpha1.ReasonApplied + ": approve=review by alice: gate review passed"}},
		"one approval of a gate that requires two": {
			cfg: reviewed(2), creator: "carol", decisions: []decision{{"alice", "review"}},
			want: outcome{Phase: v1alpha1.PhaseAwaitingApproval, Approvals: []string{"Approved review by alice"},
				Decision: v1alpha1.ReasonApplied + ": approve=review by alice: 1 of 2 approvals"}},
		"the same approver twice at a gate that requires two": {
			cfg: reviewed(2), creator: "carol", decisions: []decision{{"alice", "review"}, {"alice", "review"}},
			want: outcome{Phase: v1alpha1.PhaseAwaitingApproval, Approvals: []string{"Approved review by alice"},
				Decision: v1alpha1.ReasonAlreadyApproved + ": approve=review by alice changed nothing: " +
					"alice already approved gate review (1 of 2 approvals); approvals must come from different people"}},
		"two approvers at a gate that requires two": {
			cfg: reviewed(2), creator: "carol", decisions: []decision{{"alice", "review"}, {"alice", "review"}, {"bob", "review"}},
			want: outcome{Phase: v1alpha1.PhaseRunning, Approvals: []string{"Approved review by alice", "Approved review by bob"},
				Decision: v1alpha1.ReasonApplied + ": approve=review by bob: gate review passed"}},
	} {
		t.Run(name, func(t *testing.T) {
			w := testWebhook(t, approvers)
			run, p := gated(t, w, tc.cfg, tc.creator, tc.named)
			for _, d := range tc.decisions {
				annotateOrFail(t, w, user(d.by), &run, v1alpha1.AnnotationApprove, d.gate)
				operatorTakes(t, p, run)
			}
			if diff := cmp.Diff(tc.want, outcomeOf(run)); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
		})
	}
}

// Decisions made while the operator was away are taken once it is back, once each, in the
// order they were made, each judged on the run as the ones before left it.
func TestDecisionsMadeWhileTheOperatorWasAwayAreTakenInOrder(t *testing.T) {
	w := testWebhook(t, rbac{"alice": {v1alpha1.ApproveVerb}, "bob": {v1alpha1.ApproveVerb}})
	cfg := MakeConfig("pipeline", team).Agents(
		MakeAgent("planner").HandsOffTo("worker"),
		MakeAgent("worker").Terminator(),
	).Gate("plan", "planner", 1).Gate("final", "Complete", 1)
	run, p := gated(t, w, cfg, "carol", nil)
	for _, d := range []struct{ by, gate string }{{"alice", "final"}, {"bob", "plan"}, {"alice", "plan"}} {
		annotateOrFail(t, w, user(d.by), &run, v1alpha1.AnnotationApprove, d.gate)
	}
	u := operatorTakes(t, p, run)
	var events []string
	for _, e := range u.Events {
		events = append(events, e.Action+" "+e.Type+" "+e.Reason+": "+e.Message)
	}
	want := []string{
		"Decision1 Warning DecisionIgnored: approve=final by alice changed nothing: gate final is not pending; the pending gate is plan",
		"Decision2 Normal DecisionApplied: approve=plan by bob: gate plan passed",
		"Decision3 Warning DecisionIgnored: approve=plan by alice changed nothing: the run is not waiting for approval (phase Running)",
	}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("Events (-want +got):\n%s", diff)
	}
	if got := outcomeOf(run); got.Phase != v1alpha1.PhaseRunning || !cmp.Equal(got.Approvals, []string{"Approved plan by bob"}) || run.Status.LastDecision != 3 {
		t.Errorf("outcome %+v, last decision %d; want running past plan, approved by bob, all three taken", got, run.Status.LastDecision)
	}
	if again := operatorTakes(t, p, run); len(again.Events) > 0 {
		t.Errorf("decisions taken twice: %+v", again.Events)
	}
}
