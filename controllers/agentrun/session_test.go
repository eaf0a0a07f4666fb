package agentrun

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/sessions"
	"github.com/baton-dev/baton/internal/workflow"
	. "github.com/baton-dev/baton/test/builders"
)

// chat is a one-agent team whose every answer costs 100 tokens.
func chat() *v1alpha1.AgentConfig {
	return MakeConfig("chat", ns).Agents(MakeAgent("a").Terminator().Script(Says("an answer").Tokens(100))).Obj()
}

func chatSession(mod func(*v1alpha1.AgentSession)) *v1alpha1.AgentSession {
	s := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: ns, UID: "uid-of-s"},
		Spec: v1alpha1.AgentSessionSpec{ConfigRef: v1alpha1.ConfigReference{Name: "chat"}}}
	if mod != nil {
		mod(s)
	}
	return s
}

func turnRun(name string, n int) *v1alpha1.AgentRun {
	r := MakeRun(name, ns).Config("chat").Input("question "+name).Turn("s", n).Obj()
	r.UID = types.UID("uid-of-" + name)
	return r
}

func progressing(run *v1alpha1.AgentRun) (string, string) {
	c := meta.FindStatusCondition(run.Status.Conditions, v1alpha1.ConditionProgressing)
	if run.Status.Phase == v1alpha1.PhasePending {
		c = meta.FindStatusCondition(run.Status.Conditions, v1alpha1.ConditionConfigResolved)
	}
	if c == nil {
		return "", ""
	}
	return c.Reason, c.Message
}

// Turns run one at a time in their order, each with what is left of its session's limits.
func TestTurnsRunOneAtATimeWithWhatIsLeft(t *testing.T) {
	limited := chatSession(func(s *v1alpha1.AgentSession) {
		s.Spec.Limits = &v1alpha1.SessionLimits{MaxTokens: ptr.To[int64](250)}
	})
	o := newOperator(t, chat(), limited, turnRun("t1", 1), turnRun("t2", 2))

	second := o.drive(t, "t2", func(r *v1alpha1.AgentRun) bool { return r.Status.Phase != "" })
	reason, msg := progressing(second)
	if second.Status.Phase != v1alpha1.PhaseQueued || reason != v1alpha1.ReasonSessionBusy || msg != "session s: waits for turn t1 to end" {
		t.Fatalf("the second turn is %s (%s: %s), want Queued for the first", second.Status.Phase, reason, msg)
	}
	first := o.drive(t, "t1", ended)
	if first.Status.Phase != v1alpha1.PhaseSucceeded || first.Status.TokensUsed != 100 {
		t.Fatalf("the first turn ended %s with %d tokens", first.Status.Phase, first.Status.TokensUsed)
	}
	if first.Status.Limits == nil || first.Status.Limits.MaxTokens != 250 {
		t.Errorf("the first turn's limits %+v, want the session's 250 tokens", first.Status.Limits)
	}
	second = o.drive(t, "t2", ended)
	if second.Status.Phase != v1alpha1.PhaseSucceeded {
		t.Fatalf("the second turn ended %s: %s", second.Status.Phase, second.Status.TerminationMessage)
	}
	l := second.Status.Limits
	if l == nil || l.MaxTokens != 150 || !setBy(l, "maxTokens", "AgentSession/s") {
		t.Errorf("the second turn's limits %+v, want the 150 tokens the session has left", l)
	}

	// The second turn was given the first's question and answer, from the transcript.
	rec, found, err := o.store.Get(context.Background(), string(second.UID), records.HistoryKey)
	if err != nil || !found {
		t.Fatalf("the second turn's history: found %v, %v", found, err)
	}
	h, err := records.HistoryOf(rec)
	if err != nil {
		t.Fatal(err)
	}
	want := []sessions.Exchange{{Turn: "t1", Input: "question t1", Output: "an answer"}}
	if fmt.Sprint(h.Turns) != fmt.Sprint(want) || h.Input != "question t2" {
		t.Errorf("the second turn's history %+v, want the first's exchange %+v and its own question", h, want)
	}
	entries := records.ContextOf(rec)
	if len(entries) != 2 || entries[0].Kind != workflow.ContextAsked || entries[1].Text != "an answer" {
		t.Errorf("the history as context %+v", entries)
	}
}

func setBy(l *v1alpha1.EffectiveLimits, limit, by string) bool {
	for _, s := range l.SetBy {
		if s.Limit == limit && s.Quota == by {
			return true
		}
	}
	return false
}

// A turn waits for its session, and ends with it.
func TestATurnWaitsForItsSessionAndEndsWithIt(t *testing.T) {
	created := metav1.NewTime(t0)
	endedSession := chatSession(func(s *v1alpha1.AgentSession) {
		end := metav1.NewTime(t0.Add(-1))
		s.Status = v1alpha1.AgentSessionStatus{Phase: v1alpha1.SessionEnded, EndReason: v1alpha1.SessionReasonEnded,
			EndMessage: "the customer left", EndTime: &end}
	})
	for name, tc := range map[string]struct {
		session *v1alpha1.AgentSession
		phase   v1alpha1.RunPhase
		reason  string
		message string
	}{
		"a session that does not exist": {
			phase: v1alpha1.PhasePending, reason: v1alpha1.ReasonSessionNotFound,
			message: "AgentSession s does not exist in the run's namespace; the turn starts when it is created",
		},
		"a session that ended before the turn": {
			session: endedSession, phase: v1alpha1.PhaseFailed, reason: string(v1alpha1.ReasonSessionEnded),
			message: "session s ended (Ended) before this turn was created: the customer left",
		},
	} {
		t.Run(name, func(t *testing.T) {
			run := turnRun("t1", 1)
			run.CreationTimestamp = created
			objs := []client.Object{chat(), run}
			if tc.session != nil {
				objs = append(objs, tc.session)
			}
			o := newOperator(t, objs...)
			got := o.drive(t, "t1", func(r *v1alpha1.AgentRun) bool { return r.Status.Phase != "" })
			reason, msg := progressing(got)
			if got.Status.Phase.Terminal() {
				reason, msg = string(got.Status.TerminationReason), got.Status.TerminationMessage
			}
			if got.Status.Phase != tc.phase || reason != tc.reason || msg != tc.message {
				t.Errorf("the turn is %s (%s: %s), want %s (%s: %s)", got.Status.Phase, reason, msg, tc.phase, tc.reason, tc.message)
			}
		})
	}
}

// A turn is held to its session's limits when it is next, before the session's status says the
// session ended: past maxTurns it fails SessionEnded; an end annotated by hand stops it too.
func TestATurnPastItsSessionsLimitsDoesNotStart(t *testing.T) {
	started := metav1.NewMicroTime(t0)
	done := func(name string, n int, tokens int64) *v1alpha1.AgentRun {
		r := turnRun(name, n)
		r.Status = v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseSucceeded, StartTime: &started, TokensUsed: tokens}
		return r
	}
	for name, tc := range map[string]struct {
		session *v1alpha1.AgentSession
		phase   v1alpha1.RunPhase
		message string
	}{
		"two turns taken of maxTurns 2": {
			session: chatSession(func(s *v1alpha1.AgentSession) {
				s.Spec.Limits = &v1alpha1.SessionLimits{MaxTurns: ptr.To[int32](2)}
			}),
			phase: v1alpha1.PhaseFailed, message: "session s: the session took 2 turns of 2",
		},
		"the tokens used up": {
			session: chatSession(func(s *v1alpha1.AgentSession) {
				s.Spec.Limits = &v1alpha1.SessionLimits{MaxTokens: ptr.To[int64](200)}
			}),
			phase: v1alpha1.PhaseFailed, message: "session s: the session's turns used 200 tokens of 200",
		},
		"ended by hand, not yet written by the session's controller": {
			session: chatSession(func(s *v1alpha1.AgentSession) {
				s.Annotations = map[string]string{v1alpha1.AnnotationEnd: "the customer left"}
			}),
			phase: v1alpha1.PhaseCancelled, message: "session s ended (Ended) while this turn waited: the customer left",
		},
	} {
		t.Run(name, func(t *testing.T) {
			o := newOperator(t, chat(), tc.session, done("t1", 1, 100), done("t2", 2, 100), turnRun("t3", 3))
			got := o.drive(t, "t3", ended)
			if got.Status.Phase != tc.phase || got.Status.TerminationMessage != tc.message {
				t.Errorf("the turn ended %s: %s; want %s: %s", got.Status.Phase, got.Status.TerminationMessage, tc.phase, tc.message)
			}
		})
	}
}

// The repeated-input detector sees across turns given the same history: a conversation stuck
// asking the same of a team that answers the same ends in a loop, while the same question
// asked with a different history does not.
func TestALoopAcrossTurnsGivenTheSameHistoryIsDetected(t *testing.T) {
	session := chatSession(func(s *v1alpha1.AgentSession) {
		s.Spec.History = &v1alpha1.SessionHistory{MaxTurns: ptr.To[int32](1), Compaction: v1alpha1.CompactionDrop}
	})
	turns := []client.Object{chat(), session}
	for i, name := range []string{"t1", "t2", "t3"} {
		run := turnRun(name, i+1)
		run.Spec.Input = "again"
		turns = append(turns, run)
	}
	o := newOperator(t, turns...)
	for _, name := range []string{"t1", "t2"} {
		if run := o.drive(t, name, ended); run.Status.Phase != v1alpha1.PhaseSucceeded {
			t.Fatalf("turn %s ended %s: %s; want it to succeed, its history being its own", name, run.Status.Phase, run.Status.TerminationMessage)
		}
	}
	third := o.drive(t, "t3", ended)
	if third.Status.TerminationReason != v1alpha1.ReasonLoopDetected || third.Status.Loop == nil ||
		third.Status.Loop.Detector != v1alpha1.DetectorRepeatedInput ||
		!strings.Contains(third.Status.TerminationMessage, "1 of them in earlier turns of the session") {
		t.Fatalf("the third turn ended %s (%s): %s; want a repeated input seen across turns", third.Status.Phase, third.Status.TerminationReason, third.Status.TerminationMessage)
	}
	second := o.run(t, "t2")
	if second.Status.HistoryDigest == "" || second.Status.HistoryDigest != third.Status.HistoryDigest || o.run(t, "t1").Status.HistoryDigest == second.Status.HistoryDigest {
		t.Errorf("history digests t1 %q t2 %q t3 %q; want t2 and t3 alone the same", o.run(t, "t1").Status.HistoryDigest, second.Status.HistoryDigest, third.Status.HistoryDigest)
	}
}

// A turn stored after a later-numbered one that this operator has begun, its start not yet
// written (it is written with its first step's result), waits for it: two turns of a session
// never run at once.
func TestATurnWaitsForALaterOneBegunHere(t *testing.T) {
	slow := MakeConfig("chat", ns).Agents(MakeAgent("a").Terminator().Script(Says("an answer").Delay(time.Hour))).Obj()
	o := newOperator(t, slow, chatSession(nil), turnRun("t2", 2))
	if _, err := o.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "t2"}}); err != nil {
		t.Fatal(err)
	}
	if p := o.run(t, "t2").Status.Phase; p != "" {
		t.Fatalf("t2 is %s in the API server: its start was written, and this test needs it held", p)
	}
	if err := o.Create(context.Background(), turnRun("t1", 1)); err != nil {
		t.Fatal(err)
	}
	first := o.drive(t, "t1", func(r *v1alpha1.AgentRun) bool { return r.Status.Phase != "" })
	reason, msg := progressing(first)
	if first.Status.Phase != v1alpha1.PhaseQueued || reason != v1alpha1.ReasonSessionBusy || msg != "session s: waits for turn t2 to end" {
		t.Fatalf("t1 is %s (%s: %s), want Queued for t2, which is at work", first.Status.Phase, reason, msg)
	}
}
