package webhook

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/decisions"
	. "github.com/baton-dev/baton/test/builders"
)

// people are who the decision tests' RBAC knows: alice may approve, as may the members of
// approvers; erin may approve one other run only; carol may get and edit runs, as a run's
// author may, but not approve.
var people = rbac{
	"alice":           {"get", "patch", v1alpha1.ApproveVerb},
	"group:approvers": {v1alpha1.ApproveVerb},
	"erin":            {"approve other"},
	"carol":           {"get", "patch", "update"},
}

// waitingRun is a run alice created, waiting at its gate plan.
func waitingRun() *v1alpha1.AgentRun {
	run := MakeRun("r", team).Config("pipeline").Annotate(v1alpha1.AnnotationCreatedBy, "alice").Obj()
	run.Status.Phase = v1alpha1.PhaseAwaitingApproval
	run.Status.PendingApproval = &v1alpha1.PendingApproval{Gate: "plan", Since: metav1.NewMicroTime(t0.Add(-time.Minute))}
	return run
}

// queueOf is the run's queue of decisions.
func queueOf(t *testing.T, run *v1alpha1.AgentRun) []decisions.Queued {
	t.Helper()
	queue, err := decisions.Read(run.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	return queue
}

// A decision made with kubectl annotate is queued for the operator, whole and attributed to
// whoever made it, when they may make it: approving and rejecting take the approve verb on the
// run (from a user's own bindings or a group's), a reply only the right to edit the run. Anyone
// else is refused, with the permission they lack; the run is left as it was.
func TestWhoMayDecide(t *testing.T) {
	now := metav1.NewTime(t0)
	long := strings.Repeat("x", 5000)
	for name, tc := range map[string]struct {
		user   authenticationv1.UserInfo
		kv     []string
		queued decisions.Queued
		refuse string
	}{
		"an approver approves, with feedback": {user: user("alice"), kv: []string{v1alpha1.AnnotationApprove, "plan", v1alpha1.AnnotationFeedback, "looks good"},
			queued: decisions.Queued{Seq: 1, Action: decisions.Approve, Gate: "plan", Feedback: "looks good", By: "alice", Time: now}},
		"an approver rejects and sends the run back to an agent": {user: user("alice"),
			kv:     []string{v1alpha1.AnnotationReject, "plan", v1alpha1.AnnotationRevise, "crm", v1alpha1.AnnotationFeedback, "check the disputes"},
			queued: decisions.Queued{Seq: 1, Action: decisions.Reject, Gate: "plan", Revise: "crm", Feedback: "check the disputes", By: "alice", Time: now}},
		"a member of a group that may approve approves": {user: user("dave", "approvers"), kv: []string{v1alpha1.AnnotationApprove, "plan"},
			queued: decisions.Queued{Seq: 1, Action: decisions.Approve, Gate: "plan", By: "dave", Time: now}},
		"someone who may edit the run replies": {user: user("carol"), kv: []string{v1alpha1.AnnotationReply, "prod-east"},
			queued: decisions.Queued{Seq: 1, Action: decisions.Reply, Reply: "prod-east", By: "carol", Time: now}},
		"an approval that names no gate is queued, for the operator to say why it changes nothing": {user: user("alice"),
			kv: []string{v1alpha1.AnnotationApprove, ""}, queued: decisions.Queued{Seq: 1, Action: decisions.Approve, By: "alice", Time: now}},
		"an oversized feedback is queued one character past its bound, for the operator to refuse": {user: user("alice"),
			kv:     []string{v1alpha1.AnnotationApprove, "plan", v1alpha1.AnnotationFeedback, long},
			queued: decisions.Queued{Seq: 1, Action: decisions.Approve, Gate: "plan", Feedback: long[:decisions.MaxValue+1], By: "alice", Time: now}},
		"an editor who may not approve approves": {user: user("carol"), kv: []string{v1alpha1.AnnotationApprove, "plan"},
			refuse: `user "carol" may not approve gates of AgentRun team-a/r: it needs the "approve" verb on agentruns.agents.baton.dev in namespace team-a (the ClusterRole baton-approver grants it)`},
		"an editor who may not approve rejects": {user: user("carol"), kv: []string{v1alpha1.AnnotationReject, "plan", v1alpha1.AnnotationRevise, "replan"},
			refuse: `user "carol" may not reject gates of AgentRun team-a/r: it needs the "approve" verb`},
		"someone who may approve another run only": {user: user("erin"), kv: []string{v1alpha1.AnnotationApprove, "plan"},
			refuse: `user "erin" may not approve gates of AgentRun team-a/r`},
		"a revise without a decision": {user: user("alice"), kv: []string{v1alpha1.AnnotationRevise, "replan"},
			refuse: "agents.baton.dev/revise goes with agents.baton.dev/approve, agents.baton.dev/reject or agents.baton.dev/reply in the same kubectl annotate"},
		"a feedback without a decision": {user: user("carol"), kv: []string{v1alpha1.AnnotationFeedback, "LGTM"},
			refuse: "agents.baton.dev/feedback goes with agents.baton.dev/approve, agents.baton.dev/reject or agents.baton.dev/reply in the same kubectl annotate"},
		"a hand-written decision queue": {user: user("carol"),
			kv:     []string{v1alpha1.AnnotationDecisions, `[{"seq":9,"action":"approve","gate":"plan","by":"alice"}]`},
			refuse: "the annotation agents.baton.dev/decisions is written only by Baton; decide with agents.baton.dev/approve, agents.baton.dev/reject or agents.baton.dev/reply"},
	} {
		t.Run(name, func(t *testing.T) {
			w := testWebhook(t, people)
			run := waitingRun()
			stored, res := annotateAs(t, w, tc.user, run, tc.kv...)
			if tc.refuse != "" {
				if got := refusal(res); !strings.HasPrefix(got, tc.refuse) {
					t.Fatalf("refusal %q; want %q", got, tc.refuse)
				}
				return
			}
			if !res.Allowed {
				t.Fatalf("refused: %s", refusal(res))
			}
			if diff := cmp.Diff([]decisions.Queued{tc.queued}, queueOf(t, stored)); diff != "" {
				t.Errorf("queue (-want +got):\n%s", diff)
			}
			if !undecided(stored) {
				t.Errorf("the decision's annotations were left on the run: %v", stored.Annotations)
			}
			if stored.Annotations[v1alpha1.AnnotationCreatedBy] != "alice" {
				t.Errorf("annotations %v; want the run's other annotations kept", stored.Annotations)
			}
		})
	}
}

// user is a Kubernetes user, in groups.
func user(name string, groups ...string) authenticationv1.UserInfo {
	return authenticationv1.UserInfo{Username: name, Groups: groups}
}

// The webhook asks the API server whether the user who approves may approve that very run, as
// themselves and their groups; a reply needs no such question.
func TestTheApprovePermissionIsAskedOfTheRunAsTheUser(t *testing.T) {
	s := &apiServer{rbac: people}
	w := webhookOn(t, s)
	dave := authenticationv1.UserInfo{Username: "dave", UID: "dave-uid", Groups: []string{"approvers", "system:authenticated"},
		Extra: map[string]authenticationv1.ExtraValue{"scopes": {"baton"}}}
	if _, res := annotateAs(t, w, dave, waitingRun(), v1alpha1.AnnotationApprove, "plan"); !res.Allowed {
		t.Fatalf("refused: %s", refusal(res))
	}
	want := []authorizationv1.SubjectAccessReviewSpec{{User: "dave", UID: "dave-uid", Groups: dave.Groups,
		Extra: map[string]authorizationv1.ExtraValue{"scopes": {"baton"}},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: team, Verb: v1alpha1.ApproveVerb,
			Group: v1alpha1.GroupVersion.Group, Resource: "agentruns", Name: "r"}}}
	if diff := cmp.Diff(want, s.asked); diff != "" {
		t.Errorf("reviews (-want +got):\n%s", diff)
	}
	s.asked = nil
	if _, res := annotate(t, w, "carol", waitingRun(), v1alpha1.AnnotationReply, "yes"); !res.Allowed || len(s.asked) > 0 {
		t.Errorf("a reply: refused %q, reviews %+v; want it taken without asking", refusal(res), s.asked)
	}
}

// A decision is refused when it cannot be taken or checked: on an ended run, past the queue's
// bound, or while the API server cannot say whether the user may approve; never taken
// unchecked.
func TestADecisionThatCannotBeTakenIsRefused(t *testing.T) {
	ended := waitingRun()
	ended.Status.Phase, ended.Status.TerminationReason, ended.Status.PendingApproval = v1alpha1.PhaseCancelled, v1alpha1.ReasonCancelled, nil
	full := waitingRun()
	var queue []decisions.Queued
	for i := range decisions.MaxQueued {
		queue = append(queue, decisions.Queued{Seq: int64(i + 1), Action: decisions.Reply, Reply: "again", By: "carol"})
	}
	full.Annotations = decisions.Write(full.Annotations, queue)
	for name, tc := range map[string]struct {
		run    *v1alpha1.AgentRun
		down   error
		code   int32
		refuse string
	}{
		"an approval of an ended run": {run: ended, code: 403,
			refuse: "AgentRun r ended Cancelled (Cancelled); decisions no longer apply to it"},
		"an approval while the queue is full": {run: full, code: 403,
			refuse: "32 decisions on this run are already waiting for the operator; try again once it has taken them"},
		"an approval while the API server cannot answer": {run: waitingRun(), down: errors.New("etcdserver: request timed out"), code: 500,
			refuse: "checking the approve permission: etcdserver: request timed out"},
	} {
		t.Run(name, func(t *testing.T) {
			w := webhookOn(t, &apiServer{rbac: people, down: tc.down})
			_, res := annotate(t, w, "alice", tc.run, v1alpha1.AnnotationApprove, "plan")
			if res.Allowed || res.Result.Code != tc.code || res.Result.Message != tc.refuse {
				t.Fatalf("allowed %t, %d %q; want refused, %d %q", res.Allowed, res.Result.Code, refusal(res), tc.code, tc.refuse)
			}
		})
	}
}

// The operator, and only the operator, writes the queue itself (where it takes a decision the
// webhook did not see); its own writes are taken as they are.
func TestTheOperatorWritesTheQueue(t *testing.T) {
	w := testWebhook(t, people)
	queue := `[{"seq":1,"action":"approve","gate":"plan","by":"unverified (no admission webhook)","time":"2026-11-23T11:00:00Z"}]`
	stored, res := annotate(t, w, operatorUser, waitingRun(), v1alpha1.AnnotationDecisions, queue)
	if !res.Allowed || stored.Annotations[v1alpha1.AnnotationDecisions] != queue {
		t.Fatalf("refused %q, annotations %v; want the operator's queue stored as written", refusal(res), stored.Annotations)
	}
}

// Decisions are queued in the order they were made, each numbered after the last one the run
// took and stamped with when it was made; those the run already took leave the queue. A feedback
// left on the run from an earlier write goes with no later decision.
func TestDecisionsAreQueuedInTheOrderTheyWereMade(t *testing.T) {
	w := testWebhook(t, people)
	clk := clocktesting.NewFakePassiveClock(t0)
	w.Clock = clk
	run := waitingRun()
	for _, d := range []struct{ by, gate string }{{"alice", "final"}, {"dave", "plan"}, {"alice", "plan"}} {
		annotateOrFail(t, w, user(d.by, "approvers"), &run, v1alpha1.AnnotationApprove, d.gate)
		clk.SetTime(clk.Now().Add(time.Second))
	}
	at := func(s int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(s) * time.Second)) }
	want := []decisions.Queued{
		{Seq: 1, Action: decisions.Approve, Gate: "final", By: "alice", Time: at(0)},
		{Seq: 2, Action: decisions.Approve, Gate: "plan", By: "dave", Time: at(1)},
		{Seq: 3, Action: decisions.Approve, Gate: "plan", By: "alice", Time: at(2)},
	}
	if diff := cmp.Diff(want, queueOf(t, run)); diff != "" {
		t.Fatalf("queue (-want +got):\n%s", diff)
	}

	// The operator took the first two; a feedback was left on the run by a write the webhook did
	// not see.
	run.Status.LastDecision = 2
	run.Annotations[v1alpha1.AnnotationFeedback] = "stale"
	annotateOrFail(t, w, user("carol"), &run, v1alpha1.AnnotationReply, "prod-east", v1alpha1.AnnotationFeedback, "stale")
	want = []decisions.Queued{want[2], {Seq: 4, Action: decisions.Reply, Reply: "prod-east", By: "carol", Time: at(3)}}
	if diff := cmp.Diff(want, queueOf(t, run)); diff != "" {
		t.Errorf("queue after the operator took two (-want +got):\n%s", diff)
	}
	if !undecided(run) {
		t.Errorf("annotations %v; want the stale feedback gone with the decision", run.Annotations)
	}
}

// annotateOrFail is annotateAs, which must be admitted; *run becomes the run as stored.
func annotateOrFail(t *testing.T, w *Decisions, u authenticationv1.UserInfo, run **v1alpha1.AgentRun, kv ...string) {
	t.Helper()
	stored, res := annotateAs(t, w, u, *run, kv...)
	if !res.Allowed {
		t.Fatalf("%s's %v refused: %s", u.Username, kv, refusal(res))
	}
	*run = stored
}
