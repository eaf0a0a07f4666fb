package workflow

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"pgregory.net/rapid"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
)

// hostile are texts whose JSON is larger than their characters: HTML, emoji, control
// characters, separators JavaScript cares about, invalid UTF-8, quotes.
var hostile = []string{
	"<b>&amp;</b>", "🙂🎉", "\x00\x01\x1f", "\u2028\u2029", "\xff\xfe", `"\`, "é", "plain ascii",
}

func TestStatusTextCountsTheBytesOfTheJSON(t *testing.T) {
	for _, piece := range hostile {
		s := strings.Repeat(piece, 5000)
		for _, n := range []int{63, 256, 4096} {
			got := statusText(s, n)
			data, _ := json.Marshal(got)
			if len(data) > n+2 {
				t.Errorf("statusText(%q×5000, %d) takes %d bytes as JSON", piece, n, len(data)-2)
			}
			if !utf8.ValidString(got) || utf8.RuneCountInString(got) > n {
				t.Errorf("statusText(%q×5000, %d) is not valid UTF-8 of at most %d characters", piece, n, n)
			}
			if statusLen(strings.ToValidUTF8(s, "\uFFFD")) > n && !strings.HasSuffix(got, "…") {
				t.Errorf("statusText(%q×5000, %d) does not mark the cut", piece, n)
			}
		}
		if short := piece; utf8.ValidString(short) && statusText(short, 4096) != short {
			t.Errorf("statusText changed %q, which fits", short)
		}
	}
}

// genHostile draws a text of up to max characters made of hostile pieces.
func genHostile(t *rapid.T, max int, label string) string {
	piece := pick(t, hostile, label+"Piece")
	n := uniform(t, 0, max, label+"Len")
	s := strings.Repeat(piece, n/len([]rune(piece))+1)
	return statusText(s, max*6)
}

// TestPropertyAnyStatusFitsTheBudget fills every text and list of a status to the API's bounds
// with text that escapes badly, and checks FitStatus brings it under the budget, keeps every
// text within the API's character bounds, and leaves a status that fits as it is.
func TestPropertyAnyStatusFitsTheBudget(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := v1alpha1.AgentRunStatus{
			Phase: v1alpha1.PhaseRunning, CurrentAgent: "a", StepCount: 1000,
			Input:              statusText(genHostile(t, maxInput, "input"), maxInput),
			Output:             statusText(genHostile(t, maxOutput, "output"), maxOutput),
			PendingInput:       &v1alpha1.PendingInput{Agent: "a", Question: statusText(genHostile(t, 4096, "question"), 4096)},
			TerminationMessage: statusText(genHostile(t, maxMessage, "message"), maxMessage),
		}
		for i := range uniform(t, 0, maxSequence, "records") {
			s.HandoffSequence = append(s.HandoffSequence, v1alpha1.HandoffRecord{Step: int32(i + 1), From: "a", To: "b",
				Reason: statusText(genHostile(t, maxReason, "reason"), maxReason), InputDigest: digest("x"), OutputDigest: digest("y")})
		}
		for range uniform(t, 0, 64, "approvals") {
			s.Approvals = append(s.Approvals, v1alpha1.ApprovalRecord{Gate: "g", Decision: v1alpha1.RecordApproved,
				By: strings.Repeat("<", 253), Feedback: statusText(genHostile(t, 4096, "feedback"), 4096)})
		}
		for _, typ := range []string{"A", "B", "C", "D", "E", "F"} {
			s.Conditions = append(s.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: "Reason",
				Message: statusText(genHostile(t, maxMessage, "conditionMessage"), maxMessage)})
		}
		before := *s.DeepCopy()
		FitStatus(&s)
		if size := statusSize(&s); size > StatusBudget {
			t.Fatalf("status takes %d bytes after FitStatus, more than %d", size, StatusBudget)
		}
		if statusSize(&before) <= StatusBudget && !equalStatus(before, s) {
			t.Fatalf("FitStatus changed a status that fits")
		}
		for _, text := range []string{s.Input, s.Output, s.PendingInput.Question} {
			if !utf8.ValidString(text) || utf8.RuneCountInString(text) > maxInput {
				t.Fatalf("a text is past its bound or not UTF-8")
			}
		}
		if len(s.HandoffSequence) > 0 && s.HandoffSequence[len(s.HandoffSequence)-1].Step != before.HandoffSequence[len(before.HandoffSequence)-1].Step {
			t.Fatalf("FitStatus lost the latest handoff record")
		}
	})
}

func equalStatus(a, b v1alpha1.AgentRunStatus) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestLongRunsOfEscapedOutputFitTheBudget plays 300 steps whose every output is 32 KiB of HTML
// or emoji: each status the controller would write fits the budget.
func TestLongRunsOfEscapedOutputFitTheBudget(t *testing.T) {
	p := mustPlan(t, MakeConfig("ping", "ns").Agents(
		MakeAgent("a").HandsOffTo("b"), MakeAgent("b").HandsOffTo("a")).
		MaxSteps(1000).MaxHandoffs(1000).MaxTokens(1<<40).Allow(1000, "a", "b"))
	for _, piece := range hostile {
		st := Start(p, v1alpha1.AgentRunStatus{}, strings.Repeat(piece, 40000), "rev", t0).Status
		for i := range 300 {
			r := StepResult{Agent: st.CurrentAgent, Input: st.Input, Result: Result{
				Output: strings.Repeat(piece, 32768/len(piece)) + string(rune('a'+i%26)), Reason: strings.Repeat(piece, 300),
				Handoff: map[string]string{"a": "b", "b": "a"}[st.CurrentAgent]}}
			st = Apply(p, st, r, t0).Status
			FitStatus(&st)
			if size := statusSize(&st); size > StatusBudget {
				t.Fatalf("%q: status takes %d bytes at step %d", piece, size, st.StepCount)
			}
		}
	}
}

// BenchmarkFitStatus is the cost FitStatus adds to every status write of a long run that fits.
func BenchmarkFitStatus(b *testing.B) {
	s := v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, Input: strings.Repeat("ticket text ", 300)}
	for i := range maxSequence {
		s.HandoffSequence = append(s.HandoffSequence, v1alpha1.HandoffRecord{Step: int32(i + 1), From: "orchestrator", To: "memory",
			Reason: "check memory for a cached resolution", InputDigest: digest("x"), OutputDigest: digest("y")})
	}
	b.ReportAllocs()
	for b.Loop() {
		FitStatus(&s)
	}
}

// TestPropertyStatusHoldsTheBeginningOfALongInput checks that whatever the next agent's input,
// the status written holds at most maxStoredInput bytes of it, as JSON; that a cut input names
// the whole by its digest, and nothing else; and that an input that fits is kept as it is.
func TestPropertyStatusHoldsTheBeginningOfALongInput(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		whole := genHostile(t, 4*maxStoredInput, "input")
		s := v1alpha1.AgentRunStatus{Input: whole, InputDigest: "stale"}
		if got := StoreInput(&s); got != whole {
			t.Fatalf("StoreInput returned another input")
		}
		data, _ := json.Marshal(s.Input)
		if len(data)-2 > maxStoredInput {
			t.Fatalf("status holds %d bytes of the input", len(data)-2)
		}
		if statusLen(whole) <= maxStoredInput {
			if s.Input != whole || s.InputDigest != "" {
				t.Fatalf("an input that fits was changed: %q digest %q", s.Input, s.InputDigest)
			}
			return
		}
		if !IsInput(&s, whole) || IsInput(&s, s.Input) || IsInput(&s, whole+" ") {
			t.Fatalf("the digest of a cut input must name the whole and nothing else")
		}
		if !strings.HasPrefix(whole, strings.TrimSuffix(s.Input, "…")) {
			t.Fatalf("status does not hold the input's beginning")
		}
	})
}
