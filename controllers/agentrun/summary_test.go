package agentrun

import (
	"context"
	"strings"
	"testing"

	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/egress"
	"github.com/baton-dev/baton/internal/records"
	. "github.com/baton-dev/baton/test/builders"
	"github.com/baton-dev/baton/test/fakes"
)

// said is everything a request to the model says, its messages joined.
func said(r fakes.ChatRequest) string {
	var b strings.Builder
	for _, m := range r.Messages {
		b.WriteString(m.Content)
		b.WriteString("\n")
	}
	return b.String()
}

// A turn that leaves a session's window is summarized once, by the summarizer, before the
// first step of the turn that goes without it: the summary is recorded in that turn's
// transcript, given to its agent in place of the turn, counted in its tokens, and carried to
// the turns after it, which summarize on from it.
func TestTurnsThatLeaveTheWindowAreSummarizedOnce(t *testing.T) {
	server := fakes.NewOpenAI()
	t.Cleanup(server.Close)
	server.Reply(
		fakes.Reply{Content: "answer one", Tokens: 100},
		fakes.Reply{Content: "answer two", Tokens: 100},
		fakes.Reply{Content: "SUMMARY-1: the user asked one", Tokens: 30},
		fakes.Reply{Content: "answer three", Tokens: 100},
		fakes.Reply{Content: "SUMMARY-2: one, then two", Tokens: 40},
		fakes.Reply{Content: "answer four", Tokens: 100},
	)
	agent := MakeAgent("a").Provider(v1alpha1.ProviderOpenAI).Terminator()
	agent.Model.Name, agent.Model.Endpoint = "gpt-4o-mini", server.BaseURL()
	agent.Model.APIKeySecretRef = &v1alpha1.SecretKeyRef{Name: "llm", Key: "apiKey"}
	cfg := MakeConfig("chat", ns).Agents(agent).Obj()
	session := chatSession(func(s *v1alpha1.AgentSession) {
		s.Spec.History = &v1alpha1.SessionHistory{MaxTurns: ptr.To[int32](1)}
	})
	policy, err := egress.New([]string{"127.0.0.1/32"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := newOperatorOn(t, agents.Dependencies{Clock: clock.RealClock{}, HTTPClient: policy.Client(), Secrets: keys{"llm/apiKey": "sk-test"}},
		cfg, session, turnRun("t1", 1), turnRun("t2", 2), turnRun("t3", 3), turnRun("t4", 4))
	var ended3 *v1alpha1.AgentRun
	for _, name := range []string{"t1", "t2", "t3", "t4"} {
		run := o.drive(t, name, ended)
		if run.Status.Phase != v1alpha1.PhaseSucceeded {
			t.Fatalf("turn %s ended %s: %s", name, run.Status.Phase, run.Status.TerminationMessage)
		}
		if name == "t3" {
			ended3 = run
		}
	}
	reqs := server.Requests()
	if len(reqs) != 6 {
		t.Fatalf("the model was asked %d times, want 6: a step a turn, and a summary for t3 and t4", len(reqs))
	}
	if s := said(reqs[2]); !strings.Contains(s, "question t1") || !strings.Contains(s, "answer one") || strings.Contains(s, "question t2") || len(reqs[2].Tools) != 0 {
		t.Errorf("the first summary call was sent %d tools and:\n%s\nwant t1's question and answer alone", len(reqs[2].Tools), s)
	}
	if s := said(reqs[3]); !strings.Contains(s, "SUMMARY-1") || strings.Contains(s, "answer one") || !strings.Contains(s, "answer two") {
		t.Errorf("t3's step was sent:\n%s\nwant the summary in place of t1, and t2 verbatim", s)
	}
	if s := said(reqs[4]); !strings.Contains(s, "The summary so far:\nSUMMARY-1") || !strings.Contains(s, "question t2") {
		t.Errorf("the second summary call was sent:\n%s\nwant it to go on from the first summary with t2", s)
	}
	if ended3.Status.TokensUsed != 130 {
		t.Errorf("t3 counted %d tokens, want 130: its step's and its summary's", ended3.Status.TokensUsed)
	}
	rec, found, err := o.store.Get(context.Background(), string(ended3.UID), records.SummaryKey)
	if err != nil || !found {
		t.Fatalf("t3's summary record: found %v, %v", found, err)
	}
	b, err := records.SummaryOf(rec)
	if err != nil || b.Summary != "SUMMARY-1: the user asked one" || b.Tokens != 30 || len(b.Turns) != 1 || b.Turns[0] != "t1" || b.Agent != "a" {
		t.Errorf("t3's summary record %+v, %v", b, err)
	}
	if len(ended3.Status.HandoffSequence) != 1 {
		t.Errorf("t3 took %d steps, want 1: a summary is no step", len(ended3.Status.HandoffSequence))
	}
}
