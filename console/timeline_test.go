package console

import (
	"encoding/json"
	"fmt"
	"html"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/transcriptapi"
)

// heldRun is the pipeline's run held at the crm tool's gate in step 2, with arguments longer
// than the 4 KiB status keeps of them, and the transcript's records of its steps.
func heldRun(now time.Time, args string) (*v1alpha1.AgentRun, []transcriptapi.Record) {
	run := waitingRun(now)
	run.Status.CurrentAgent = "gmail"
	run.Status.PendingApproval = &v1alpha1.PendingApproval{Gate: "tool/crm/file", Since: metav1.NewMicroTime(now.Add(-10 * time.Second)),
		ToolCall: &v1alpha1.PendingToolCall{Server: "crm", Tool: "file", Step: 2, Call: 1, Arguments: args[:4093] + "…"}}
	body, _ := json.Marshal(map[string]any{"agent": "gmail", "gate": "tool/crm/file",
		"call": map[string]any{"index": 1, "server": "crm", "tool": "file", "arguments": json.RawMessage(args)}})
	return run, []transcriptapi.Record{
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
	s.opts.Transcripts = records{"review/vendor-review": recs}
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

func TestTheRunPageShowsEveryStep(t *testing.T) {
	now := time.Now()
	run := waitingRun(now)
	run.Status.PendingApproval, run.Status.Phase = nil, v1alpha1.PhaseSucceeded
	var all []v1alpha1.HandoffRecord
	var recs []transcriptapi.Record
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
	s.opts.Transcripts = records{"review/vendor-review": recs}
	_, body := get(t, s, "/runs/review/vendor-review")
	for step := 1; step <= 12; step++ {
		if !strings.Contains(body, fmt.Sprintf(`aria-label="Step %d transcript"`, step)) || !strings.Contains(body, fmt.Sprintf("output of step %d<", step)) {
			t.Errorf("the run page does not show step %d", step)
		}
	}
	if !strings.Contains(body, "planner → gmail: 6") || !strings.Contains(body, "gmail → planner: 6") {
		t.Errorf("the team does not count every handoff:\n%s", body[strings.Index(body, `id="team"`):])
	}
}
