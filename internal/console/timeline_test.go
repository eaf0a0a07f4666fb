package console

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
)

// heldRun is the pipeline's run held at the crm tool's gate in step 2, with arguments longer
// than the 4 KiB status keeps of them, and the transcript's records of its steps.
func heldRun(now time.Time, args string) (*v1alpha1.AgentRun, []records.Record) {
	run := waitingRun(now)
	run.Status.CurrentAgent = "gmail"
	run.Status.PendingApproval = &v1alpha1.PendingApproval{Gate: "tool/crm/file", Since: metav1.NewMicroTime(now.Add(-10 * time.Second)),
		ToolCall: &v1alpha1.PendingToolCall{Server: "crm", Tool: "file", Step: 2, Call: 1, Arguments: args[:4093] + "…"}}
	body, _ := json.Marshal(map[string]any{"agent": "gmail", "gate": "tool/crm/file",
		"call": map[string]any{"index": 1, "server": "crm", "tool": "file", "arguments": json.RawMessage(args)}})
	return run, []records.Record{
		stepRecord(1, now.Add(-50*time.Second), map[string]any{"agent": "planner", "output": "Plan: 1) gmail: invoices", "handoff": "gmail", "tokens": 300}),
		{Seq: 2, Kind: "tool-gate", Step: 2, Call: 1, Time: now.Add(-10 * time.Second), Body: body},
	}
}

func TestAToolGateShowsTheWholeArgumentsOfTheCall(t *testing.T) {
	now := time.Now()
	end := "and then send it to finance@example.com"
	args := fmt.Sprintf(`{"note":"%s %s"}`, strings.Repeat("x", 5000), end)
	run, recs := heldRun(now, args)
	s, _ := newConsole(t, true, pipeline(), run)
	s.opts.Transcripts = transcripts{"review/vendor-review": recs}
	whole := "{\n  \"note\": \"" + strings.Repeat("x", 5000) + " " + end + "\"\n}"
	for _, path := range []string{"/runs/review/vendor-review", "/inbox"} {
		_, body := get(t, s, path)
		body = html.UnescapeString(body)
		if !strings.Contains(body, fmt.Sprintf("crm/file</code> (step 2, call 1) with these arguments, whole (%d bytes: the box scrolls):", len(whole))) ||
			!strings.Contains(body, ">"+whole+"</pre>") {
			t.Errorf("%s does not show the call's whole arguments:\n%.3000s", path, body)
		}
	}

	// Without the transcript, the page says the arguments are cut, and where they are whole.
	s.opts.Transcripts, s.opts.TranscriptsErr = nil, fmt.Errorf("no operator")
	for _, path := range []string{"/runs/review/vendor-review", "/inbox"} {
		_, body := get(t, s, path)
		body = html.UnescapeString(body)
		if strings.Contains(body, end) || !strings.Contains(body, "These arguments are cut: the run's status keeps their first 4 KiB, and the transcript was not read: the transcript API was not reached: no operator.") {
			t.Errorf("%s does not say the arguments are cut:\n%.3000s", path, body)
		}
	}
}

// A text a guardrail holds is shown, on the run's page and in the inbox, with what it is and
// why, and the decision there cannot send the run to another agent.
func TestAGuardrailsGateShowsTheTextItHolds(t *testing.T) {
	now := time.Now()
	run := waitingRun(now)
	run.Status.CurrentAgent = "gmail"
	run.Status.PendingApproval = &v1alpha1.PendingApproval{Gate: "guard/screen", Since: metav1.NewMicroTime(now.Add(-10 * time.Second)),
		Guard: &v1alpha1.PendingGuard{Guardrail: "screen", Stage: v1alpha1.StageOutput, Step: 2, Call: 1, Reason: "names an order", Text: "refund order 1001"}}
	s, _ := newConsole(t, true, pipeline(), run)
	for _, path := range []string{"/runs/review/vendor-review", "/inbox"} {
		_, body := get(t, s, path)
		body = html.UnescapeString(body)
		if !strings.Contains(body, "asks a person to review the output of step 2: names an order.") || !strings.Contains(body, ">refund order 1001</pre>") ||
			!strings.Contains(body, "Block it") || strings.Contains(body, "Send back to") {
			t.Errorf("%s does not show what the guardrail holds:\n%.3000s", path, body)
		}
	}
}

func TestTheRunPageShowsEveryStep(t *testing.T) {
	now := time.Now()
	run := waitingRun(now)
	run.Status.PendingApproval, run.Status.Phase = nil, v1alpha1.PhaseSucceeded
	var all []v1alpha1.HandoffRecord
	var recs []records.Record
	agents := []string{"planner", "gmail"}
	for step := int32(1); step <= 12; step++ {
		h := v1alpha1.HandoffRecord{Step: step, From: agents[(step-1)%2], To: agents[step%2], Outcome: v1alpha1.OutcomeHandoff,
			Time: metav1.NewTime(now.Add(time.Duration(step-20) * time.Second))}
		body := map[string]any{"agent": h.From, "output": fmt.Sprintf("output of step %d", step), "handoff": h.To}
		if step > 1 {
			body["previous"] = all[step-2]
		}
		rec := stepRecord(step, h.Time.Time, body)
		recs, all = append(recs, rec), append(all, h)
	}
	run.Status.StepCount, run.Status.HandoffSequence = 12, all[2:]
	s, _ := newConsole(t, true, pipeline(), run)
	s.opts.Transcripts = transcripts{"review/vendor-review": recs}
	_, body := get(t, s, "/runs/review/vendor-review")
	for step := 1; step <= 12; step++ {
		if !strings.Contains(body, fmt.Sprintf(`aria-label="Step %d transcript"`, step)) || !strings.Contains(body, fmt.Sprintf("output of step %d<", step)) {
			t.Errorf("the run page does not show step %d", step)
		}
	}
	if !strings.Contains(body, "planner → gmail: 6") || !strings.Contains(body, "gmail → planner: 6") {
		_, team, _ := strings.Cut(body, `id="team"`)
		t.Errorf("the team does not count every handoff:\n%s", team)
	}
}

// longRun is a run of n steps between planner and gmail that passed gate plan after each of
// the given steps, and its step records.
func longRun(now time.Time, n int32, approvedAfter ...int32) (*v1alpha1.AgentRun, []records.Record) {
	run := waitingRun(now)
	run.Status.PendingApproval, run.Status.Phase = nil, v1alpha1.PhaseSucceeded
	agents := []string{"planner", "gmail"}
	at := func(step int32) time.Time { return now.Add(time.Duration(step-n-1) * time.Second) }
	var recs []records.Record
	var last []v1alpha1.HandoffRecord
	for step := int32(1); step <= n; step++ {
		h := v1alpha1.HandoffRecord{Step: step, From: agents[(step-1)%2], To: agents[step%2], Outcome: v1alpha1.OutcomeHandoff, Time: metav1.NewTime(at(step))}
		body := map[string]any{"agent": h.From, "output": fmt.Sprintf("output of step %d", step), "handoff": h.To}
		if len(last) > 0 {
			body["previous"] = last[len(last)-1]
		}
		recs, last = append(recs, stepRecord(step, h.Time.Time, body)), append(last, h)
	}
	for _, step := range approvedAfter {
		run.Status.Approvals = append(run.Status.Approvals, v1alpha1.ApprovalRecord{Gate: "plan", Step: step, Decision: "Approved", By: "bob",
			Time: metav1.NewTime(at(step).Add(500 * time.Millisecond))})
	}
	run.Status.StepCount, run.Status.HandoffSequence = n, last[len(last)-10:]
	return run, recs
}

func TestTheRunPageOfALongRunShowsItsLatestSteps(t *testing.T) {
	run, recs := longRun(time.Now(), 450, 5, 300)
	s, _ := newConsole(t, true, pipeline(), run)
	s.opts.Transcripts = transcripts{"review/vendor-review": recs}
	shown := func(body string) (steps []int, retry []int) {
		for step := 1; step <= 450; step++ {
			if strings.Contains(body, fmt.Sprintf(`aria-label="Step %d transcript"`, step)) {
				steps = append(steps, step)
			}
			if strings.Contains(body, fmt.Sprintf(`<option value="%d">`, step)) {
				retry = append(retry, step)
			}
		}
		return steps, retry
	}
	span := func(from, to int) []int {
		var out []int
		for i := from; i <= to; i++ {
			out = append(out, i)
		}
		return out
	}
	for _, tc := range []struct {
		name, query string
		steps       []int
		leftOut     string
	}{
		{"by default, the latest 200 steps", "", span(251, 450),
			`250 earlier steps and 1 decision not shown: these are the latest 200. <a href="/runs/review/vendor-review?tail=0">Show every step</a>`},
		{"as many as asked", "?tail=10", span(441, 450), "440 earlier steps and 2 decisions not shown: these are the latest 10."},
		{"every step, with tail=0", "?tail=0", span(1, 450), ""},
		{"every step, when the run has no more", "?tail=450", span(1, 450), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, s, "/runs/review/vendor-review"+tc.query)
			if code != http.StatusOK {
				t.Fatalf("status %d", code)
			}
			steps, retry := shown(body)
			if diff := cmp.Diff(tc.steps, steps); diff != "" {
				t.Errorf("steps shown (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.steps, retry); diff != "" {
				t.Errorf("steps a retry can start after (-want +got):\n%s", diff)
			}
			if tc.leftOut == "" && strings.Contains(body, `id="left-out"`) || tc.leftOut != "" && !strings.Contains(body, tc.leftOut) {
				t.Errorf("the page does not say %q:\n%s", tc.leftOut, between(body, `id="timeline"`, `id="team"`))
			}
			// The team counts every handoff, shown or not.
			if !strings.Contains(body, "planner → gmail: 225") || !strings.Contains(body, "gmail → planner: 225") {
				t.Errorf("the team does not count every handoff:\n%s", between(body, `id="team"`, `id="more"`))
			}
		})
	}

	code, body := get(t, s, "/runs/review/vendor-review?tail=-1")
	if steps, _ := shown(body); code != http.StatusBadRequest || !strings.Contains(body, "tail: must be a whole number from 0 (0 shows every step)") || len(steps) != 200 {
		t.Errorf("?tail=-1: status %d, %d steps shown, and the page does not say what is wrong:\n%.2000s", code, len(steps), body)
	}
}

// between is the part of s from the first from to the next to, for a failure's message.
func between(s, from, to string) string {
	_, rest, _ := strings.Cut(s, from)
	part, _, _ := strings.Cut(rest, to)
	return part
}
