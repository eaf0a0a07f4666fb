package runview

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/workflow"
)

var t0 = time.Date(2026, 11, 22, 11, 34, 0, 0, time.UTC)

// ticket is a run of n steps between two agents, the last of which ends it with a signal:
// its status with the latest 10 handoffs, as the operator keeps them, and its records, each
// step's carrying the handoff of the step before.
func ticket(n int) (*v1alpha1.AgentRun, []records.Record) {
	agents := []string{"orchestrator", "ticketing"}
	var all []v1alpha1.HandoffRecord
	var recs []records.Record
	for step := int32(1); step <= int32(n); step++ {
		h := v1alpha1.HandoffRecord{Step: step, From: agents[(step-1)%2], To: agents[step%2], Outcome: v1alpha1.OutcomeHandoff,
			Reason: fmt.Sprintf("reason %d", step), Tokens: int64(step * 10), Time: metav1.NewTime(t0.Add(time.Duration(step) * time.Second))}
		if step == int32(n) {
			h.To, h.Outcome, h.Signal, h.Reason = "", v1alpha1.OutcomeSignal, "TERMINATE_WORKFLOW", "TERMINATE_WORKFLOW"
		}
		body := map[string]any{"agent": h.From, "output": fmt.Sprintf("output %d", step), "handoff": h.To,
			"reason": h.Reason, "tokens": h.Tokens, "latencyMs": 5}
		if step > 1 {
			body["previous"] = all[step-2]
		}
		data, _ := json.Marshal(body)
		recs = append(recs, records.Record{Seq: int64(step), Kind: "step", Step: step, Time: h.Time.Time, Body: data})
		all = append(all, h)
	}
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "ticket-1234", Namespace: "default", UID: "u1"}}
	run.Status = v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseSucceeded, StepCount: int32(n), HandoffSequence: all[max(0, n-10):]}
	return run, recs
}

// steps is what a timeline says of each step: number, from, to, outcome, signal, reason.
func steps(entries []Entry) []string {
	var out []string
	for _, e := range entries {
		if e.Kind == EntryStep {
			out = append(out, fmt.Sprintf("%d %s>%s %s %s %s", e.Step, e.Agent, e.To, e.Outcome, e.Signal, e.Reason))
		}
	}
	return out
}

func TestTheTimelineHasEveryStepTheRecordsHave(t *testing.T) {
	run, recs := ticket(12)
	want := []string{}
	for step := 1; step < 12; step++ {
		from, to := "orchestrator", "ticketing"
		if step%2 == 0 {
			from, to = to, from
		}
		want = append(want, fmt.Sprintf("%d %s>%s Handoff  reason %d", step, from, to, step))
	}
	want = append(want, "12 ticketing> Signal TERMINATE_WORKFLOW TERMINATE_WORKFLOW")
	if diff := cmp.Diff(want, steps(BuildTimeline(run, recs))); diff != "" {
		t.Errorf("with the transcript (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[2:], steps(BuildTimeline(run, nil))); diff != "" {
		t.Errorf("from status alone (-want +got):\n%s", diff)
	}

	// Read a page at a time, the timeline is the same.
	tl := NewTimeline(run)
	for _, r := range recs {
		tl.Add(r)
	}
	if diff := cmp.Diff(want, steps(tl.Entries())); diff != "" {
		t.Errorf("added one by one (-want +got):\n%s", diff)
	}
	for _, e := range tl.Entries() {
		if !e.Recorded || e.Latency != 5*time.Millisecond || !strings.HasPrefix(e.Text, "output ") {
			t.Errorf("step %d: recorded %v, latency %s, text %q: want the record's", e.Step, e.Recorded, e.Latency, e.Text)
		}
	}
}

func TestTheTimelineHasEveryDecisionOnce(t *testing.T) {
	run, recs := ticket(3)
	at := func(s int) metav1.Time {
		return metav1.NewTime(t0.Add(time.Duration(s)*time.Second + 500*time.Millisecond))
	}
	early := v1alpha1.ApprovalRecord{Gate: "plan", Decision: "Approved", By: "alice", Time: at(1)}
	late := v1alpha1.ApprovalRecord{Gate: "final", Decision: "Rejected", By: "bob", Revise: "orchestrator", Feedback: "check again", Time: at(2)}
	latest := v1alpha1.ApprovalRecord{Gate: "final", Decision: "Approved", By: "bob", Time: at(3)}
	// Status has dropped the earliest decision; the record of the latest is not written yet.
	run.Status.Approvals = []v1alpha1.ApprovalRecord{late, latest}
	for i, a := range []v1alpha1.ApprovalRecord{early, late} {
		data, _ := json.Marshal(map[string]any{"decisions": []workflow.Decided{{ApprovalRecord: a}}})
		recs = append(recs, records.Record{Seq: int64(10 + i), Kind: "decision", Step: int32(i + 1), Time: a.Time.Time, Body: data})
	}
	var got []string
	for _, e := range BuildTimeline(run, recs) {
		switch e.Kind {
		case EntryStep:
			got = append(got, fmt.Sprintf("step %d", e.Step))
		case EntryDecision:
			got = append(got, fmt.Sprintf("%s %s by %s%s", e.Decision, e.Gate, e.By, e.To))
		}
	}
	want := []string{"step 1", "Approved plan by alice", "step 2", "Rejected final by boborchestrator", "step 3", "Approved final by bob"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestAHeldCallIsShownWhole(t *testing.T) {
	// Arguments past status's 4 KiB, whose end is what matters.
	args := fmt.Sprintf(`{"note":%q,"to":"finance@example.com"}`, strings.Repeat("a", 5000))
	cut := args[:4093] + "…"
	p := &v1alpha1.PendingToolCall{Server: "crm", Tool: "file", Step: 4, Call: 2, Arguments: cut}
	body, _ := json.Marshal(map[string]any{"agent": "crm", "gate": "tool/crm/file",
		"call": map[string]any{"index": 2, "server": "crm", "tool": "file", "arguments": json.RawMessage(args)}})
	rec := records.Record{Seq: 9, Kind: "tool-gate", Step: 4, Call: 2, Body: body}
	for name, r := range map[string]records.Record{
		"another step's": {Kind: "tool-gate", Step: 3, Call: 2, Body: body},
		"another call's": {Kind: "tool-gate", Step: 4, Call: 1, Body: body},
		"a turn's":       {Kind: "tool-turn", Step: 4, Call: 2, Body: body},
	} {
		if Holds(p, r) {
			t.Errorf("%s record is taken for the held call's", name)
		}
	}
	if !Holds(p, rec) {
		t.Fatal("the held call's record is not found")
	}

	h := Held(p, &rec, "")
	if !h.Whole || h.Note != "" || !strings.Contains(h.Arguments, `"to": "finance@example.com"`) || !strings.Contains(h.Arguments, strings.Repeat("a", 5000)) {
		t.Errorf("from its record: whole %v, note %q, arguments %.80q...: want them whole, indented", h.Whole, h.Note, h.Arguments)
	}
	h = Held(p, nil, "the transcript API answered 503")
	if h.Whole || h.Arguments != cut || !strings.Contains(h.Note, "These arguments are cut") ||
		!strings.Contains(h.Note, "the transcript API answered 503") || !strings.Contains(h.Note, "kubectl baton transcript --step 4") {
		t.Errorf("without the transcript: whole %v, note %q", h.Whole, h.Note)
	}
	p.Arguments = `{"vendor":"Acme"}`
	if h = Held(p, nil, "unreachable"); h.Arguments != "{\n  \"vendor\": \"Acme\"\n}" || !strings.Contains(h.Note, "which is whole") {
		t.Errorf("short arguments from status: %q, note %q", h.Arguments, h.Note)
	}
}

func TestEachStepShowsWhatItCost(t *testing.T) {
	run, recs := ticket(12)
	// Steps 1, 2 and 12 are priced, the others are not (their endpoint has no prices). Step 1
	// is known only from the record of step 2, whose previous handoff carries its cost; step 2
	// from its own record, and its handoff in the record of step 3, which agree; step 12 only
	// from its record: status is written after it, and has not been yet.
	cost := map[int32]string{1: "0.00021", 2: "0.000105", 12: "0.0000625"}
	var kept []records.Record
	for _, r := range recs[1:] {
		var body map[string]any
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
		if c := cost[r.Step]; c != "" {
			body["cost"], body["currency"] = c, "USD"
		}
		if prev, ok := body["previous"].(map[string]any); ok && cost[r.Step-1] != "" {
			prev["cost"] = cost[r.Step-1]
		}
		r.Body, _ = json.Marshal(body)
		kept = append(kept, r)
	}
	seq := run.Status.HandoffSequence
	run.Status.HandoffSequence = append([]v1alpha1.HandoffRecord(nil), seq[:len(seq)-1]...)
	run.Status.Phase, run.Status.StepCount = v1alpha1.PhaseRunning, 11
	got := map[int32]string{}
	for _, e := range BuildTimeline(run, kept) {
		if e.Kind == EntryStep {
			got[e.Step] = e.Cost
		}
	}
	want := map[int32]string{}
	for step := int32(1); step <= 12; step++ {
		want[step] = cost[step]
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("costs by step (-want +got):\n%s", diff)
	}

	// From status alone, a step's cost is its handoff's.
	run.Status.HandoffSequence = []v1alpha1.HandoffRecord{{Step: 1, From: "orchestrator", Cost: "0.00021", Time: metav1.NewTime(t0)}}
	run.Status.Phase = v1alpha1.PhaseSucceeded
	if e := BuildTimeline(run, nil); len(e) != 1 || e[0].Cost != "0.00021" {
		t.Errorf("from status: %+v, want step 1 costing 0.00021", e)
	}
}

func TestAFanOutAndItsJoinAreEachAnEntryThoughTheyShareAStep(t *testing.T) {
	at := func(s int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(s) * time.Second)) }
	fanOut := v1alpha1.HandoffRecord{Step: 1, From: "lead", To: "web,papers", Outcome: v1alpha1.OutcomeFanOut, Reason: "fan-out to 2 branches", Time: at(1)}
	joined := v1alpha1.HandoffRecord{Step: 1, From: "web,papers", To: "writer", Outcome: v1alpha1.OutcomeJoined, Reason: "joined 2 of 2 branches (All)", Time: at(5)}
	final := v1alpha1.HandoffRecord{Step: 2, From: "writer", Outcome: v1alpha1.OutcomeFinal, Reason: "final answer", Time: at(6)}
	run := &v1alpha1.AgentRun{}
	run.Status = v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseSucceeded, StepCount: 2, HandoffSequence: []v1alpha1.HandoffRecord{fanOut, joined, final}}
	step := func(n int32, agent string, previous *v1alpha1.HandoffRecord, at time.Time) records.Record {
		data, _ := json.Marshal(map[string]any{"agent": agent, "output": "out", "previous": previous})
		return records.Record{Seq: int64(n), Kind: "step", Step: n, Time: at, Body: data}
	}
	recs := []records.Record{step(1, "lead", nil, t0.Add(time.Second)), step(2, "writer", &joined, t0.Add(6*time.Second))}
	for name, recs := range map[string][]records.Record{"from status alone": nil, "with the records": recs} {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, e := range BuildTimeline(run, recs) {
				got = append(got, fmt.Sprintf("%d %s->%s %s", e.Step, e.Agent, e.To, e.Outcome))
			}
			want := []string{"1 lead->web,papers FanOut", "1 web,papers->writer Joined", "2 writer-> Final"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
		})
	}
}
