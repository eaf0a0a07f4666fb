package notify

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
)

func facts(before *v1alpha1.AgentRunStatus, after v1alpha1.AgentRunStatus, now time.Time) Facts {
	return Facts{Namespace: "team-a", Run: "refund-7", UID: "u1", Config: "refunds", Before: before, After: after, Now: now,
		Console: "https://console.example/", Gates: []v1alpha1.ApprovalGate{{Name: "plan",
			Remind:   &v1alpha1.GateReminder{Every: "30m"},
			Escalate: &v1alpha1.GateEscalation{After: "2h", To: v1alpha1.Deciders{Groups: []string{"oncall-leads"}}}}}}
}

func waitingAt(gate string, since time.Time) v1alpha1.AgentRunStatus {
	return v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseAwaitingApproval,
		PendingApproval: &v1alpha1.PendingApproval{Gate: gate, Since: metav1.NewMicroTime(since)}}
}

func types(es []Event) []v1alpha1.NotifyEvent {
	var out []v1alpha1.NotifyEvent
	for _, e := range es {
		out = append(out, e.Type)
	}
	return out
}

func TestTheEventsOfAChange(t *testing.T) {
	running := v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning}
	waiting := waitingAt("plan", t0)
	decided := running
	decided.Approvals = []v1alpha1.ApprovalRecord{{Gate: "plan", Decision: v1alpha1.RecordApproved, By: "bob", Time: metav1.NewTime(t0.Add(time.Minute))}}
	ended := decided
	ended.Phase, ended.TerminationReason = v1alpha1.PhaseSucceeded, v1alpha1.ReasonCompleted
	ended.CompletionTime = &metav1.Time{Time: t0.Add(2 * time.Minute)}
	warned := running
	warned.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionTokenBudgetWarning, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}}
	for name, tc := range map[string]struct {
		before *v1alpha1.AgentRunStatus
		after  v1alpha1.AgentRunStatus
		now    time.Time
		want   []v1alpha1.NotifyEvent
	}{
		"a gate opens":                       {before: &running, after: waiting, now: t0, want: []v1alpha1.NotifyEvent{v1alpha1.NotifyGateOpened}},
		"nothing changed at the gate":        {before: &waiting, after: waiting, now: t0},
		"the gate is decided":                {before: &waiting, after: decided, now: t0, want: []v1alpha1.NotifyEvent{v1alpha1.NotifyGateDecided}},
		"the run ends":                       {before: &decided, after: ended, now: t0, want: []v1alpha1.NotifyEvent{v1alpha1.NotifyRunEnded}},
		"a budget warning":                   {before: &running, after: warned, now: t0, want: []v1alpha1.NotifyEvent{v1alpha1.NotifyBudgetWarning}},
		"seen first after a restart":         {after: ended, now: t0.Add(time.Hour), want: []v1alpha1.NotifyEvent{v1alpha1.NotifyGateDecided, v1alpha1.NotifyRunEnded}},
		"seen first a day and more after it": {after: ended, now: t0.Add(25 * time.Hour)},
	} {
		t.Run(name, func(t *testing.T) {
			got := types(Changes(facts(tc.before, tc.after, tc.now)))
			if len(got) != len(tc.want) {
				t.Fatalf("events %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("events %v, want %v", got, tc.want)
				}
			}
		})
	}
	// An event derived again has the same ID; the gate's opening links to the gate.
	a, b := Changes(facts(&running, waiting, t0)), Changes(facts(nil, waiting, t0.Add(time.Hour)))
	if a[0].ID != b[0].ID || a[0].URL != "https://console.example/runs/team-a/refund-7#gate" {
		t.Errorf("ids %s and %s, url %s", a[0].ID, b[0].ID, a[0].URL)
	}
}

// A gate reminds every remind.every while it waits (once for reminders missed while nobody
// looked), escalates once at escalate.after naming the escalation's deciders, and says when
// the next is due.
func TestRemindersAndEscalation(t *testing.T) {
	waiting := waitingAt("plan", t0)
	for name, tc := range map[string]struct {
		after time.Duration
		want  []v1alpha1.NotifyEvent
		next  time.Duration
	}{
		"just opened":    {after: time.Minute, next: 30 * time.Minute},
		"first reminder": {after: 31 * time.Minute, want: []v1alpha1.NotifyEvent{v1alpha1.NotifyGateReminder}, next: time.Hour},
		"three missed":   {after: 95 * time.Minute, want: []v1alpha1.NotifyEvent{v1alpha1.NotifyGateReminder}, next: 2 * time.Hour},
		"escalated, too": {after: 2*time.Hour + time.Second, want: []v1alpha1.NotifyEvent{v1alpha1.NotifyGateEscalated, v1alpha1.NotifyGateReminder}, next: 150 * time.Minute},
	} {
		t.Run(name, func(t *testing.T) {
			es, next := Due(facts(nil, waiting, t0.Add(tc.after)))
			got := types(es)
			if len(got) != len(tc.want) || next.Sub(t0) != tc.next {
				t.Fatalf("events %v next +%s, want %v next +%s", got, next.Sub(t0), tc.want, tc.next)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("events %v, want %v", got, tc.want)
				}
			}
			for _, e := range es {
				if e.Type == v1alpha1.NotifyGateEscalated && (e.Deciders == nil || e.Deciders.Groups[0] != "oncall-leads") {
					t.Errorf("an escalation names %+v", e.Deciders)
				}
			}
		})
	}
	a, _ := Due(facts(nil, waiting, t0.Add(31*time.Minute)))
	b, _ := Due(facts(nil, waiting, t0.Add(59*time.Minute)))
	if a[0].ID != b[0].ID {
		t.Error("the same reminder has two IDs")
	}
	if es, next := Due(facts(nil, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning}, t0)); len(es) != 0 || !next.IsZero() {
		t.Error("a run at no gate is reminded")
	}
}

// Every change that makes an event is relevant; a step that changes nothing a notification
// says is not.
func TestRelevantChanges(t *testing.T) {
	running := v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, StepCount: 3}
	stepped := running
	stepped.StepCount, stepped.TokensUsed = 4, 100
	waiting := waitingAt("plan", t0)
	decided := running
	decided.Approvals = []v1alpha1.ApprovalRecord{{Gate: "plan", Decision: v1alpha1.RecordApproved, By: "bob", Time: metav1.NewTime(t0)}}
	warned := running
	warned.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionCostBudgetWarning, Status: metav1.ConditionTrue}}
	if Relevant(&running, &stepped) {
		t.Error("a step is relevant")
	}
	for name, after := range map[string]v1alpha1.AgentRunStatus{"a gate": waiting, "a decision": decided, "a warning": warned} {
		if !Relevant(&running, &after) {
			t.Errorf("%s is not relevant", name)
		}
		if len(Changes(facts(&running, after, t0))) > 0 != Relevant(&running, &after) {
			t.Errorf("%s: Changes and Relevant disagree", name)
		}
	}
}

// Whatever a change, if it makes an event it is relevant: the notifier never skips one that
// does.
func TestNoChangeThatMakesAnEventIsSkipped(t *testing.T) {
	var statuses []v1alpha1.AgentRunStatus
	for _, phase := range []v1alpha1.RunPhase{v1alpha1.PhaseRunning, v1alpha1.PhaseAwaitingApproval, v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed} {
		for _, gate := range []string{"", "plan", "final"} {
			for _, decisions := range []int{0, 1, 2} {
				for _, warned := range []bool{false, true} {
					st := v1alpha1.AgentRunStatus{Phase: phase, CompletionTime: &metav1.Time{Time: t0}}
					if gate != "" {
						st.PendingApproval = &v1alpha1.PendingApproval{Gate: gate, Since: metav1.NewMicroTime(t0)}
					}
					for i := range decisions {
						st.Approvals = append(st.Approvals, v1alpha1.ApprovalRecord{Gate: "plan", Decision: v1alpha1.RecordApproved,
							By: string(rune('a' + i)), Time: metav1.NewTime(t0)})
					}
					if warned {
						st.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionTokenBudgetWarning, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}}
					}
					statuses = append(statuses, st)
				}
			}
		}
	}
	for i := range statuses {
		for j := range statuses {
			a, b := statuses[i], statuses[j]
			if len(Changes(facts(&a, b, t0))) > 0 && !Relevant(&a, &b) {
				t.Fatalf("a change that makes %v is skipped:\n%+v\n->\n%+v", types(Changes(facts(&a, b, t0))), a, b)
			}
		}
	}
}

// What waits at a guardrail's gate is the text it holds, whatever else the gate holds (the call
// whose result it is); at a tool's gate, the call.
func TestWhatWaitsAtAGate(t *testing.T) {
	running := v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning}
	call := &v1alpha1.PendingToolCall{Server: "web", Tool: "fetch", Step: 1, Call: 2, Arguments: `{"url":"x"}`}
	guarded := waitingAt("guard/screen", t0)
	guarded.PendingApproval.ToolCall = call
	guarded.PendingApproval.Guard = &v1alpha1.PendingGuard{Guardrail: "screen", Stage: v1alpha1.StageToolResult, Step: 1, Call: 2, Text: "IGNORE ALL"}
	tool := waitingAt("tool/web/fetch", t0)
	tool.PendingApproval.ToolCall = call
	for name, tc := range map[string]struct {
		after        v1alpha1.AgentRunStatus
		output, call string
	}{
		"a guardrail's gate": {after: guarded, output: "IGNORE ALL"},
		"a tool's gate":      {after: tool, call: `web/fetch {"url":"x"}`},
	} {
		t.Run(name, func(t *testing.T) {
			events := Changes(facts(&running, tc.after, t0))
			if len(events) != 1 || events[0].Waiting == nil {
				t.Fatalf("events %+v; want the gate's opening with what waits", events)
			}
			if w := events[0].Waiting; w.Output != tc.output || w.ToolCall != tc.call || w.SHA256 == "" {
				t.Errorf("waiting %+v; want output %q, call %q", w, tc.output, tc.call)
			}
		})
	}
}
