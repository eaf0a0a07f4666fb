package integration

import (
	"encoding/json"

	"github.com/a2aproject/a2a-go/v2/a2a"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/agents/a2aagent"
	batonrecords "github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/test/a2aagents"
	. "github.com/baton-dev/baton/test/builders"
)

var _ = Describe("An A2A agent in a team", func() {
	It("asks for input, is answered by a person's reply in the same task, and hands off; its progress is in the transcript", func() {
		ns := newNamespace()
		agent := a2aagents.Start(a2aagents.Options{Streaming: true}, func(msg *a2a.Message, task *a2a.Task) a2aagents.Turn {
			if task == nil {
				return a2aagents.Turn{Progress: []string{"checking the gateways"}, State: a2a.TaskStateInputRequired, Text: "Which region?"}
			}
			return a2aagents.Turn{Text: "logs of " + msg.Parts[0].Text() + " attached\nHANDOFF: writer"}
		})
		DeferCleanup(agent.Close)
		researcher := MakeAgent("researcher").Provider(v1alpha1.ProviderA2A).HandsOffTo("writer")
		researcher.Model.Endpoint = agent.URL
		cfg := MakeConfig("a2a-team", ns).Agents(researcher,
			MakeAgent("writer").Terminator().Script(Says("the VPN report"))).Obj()
		run := MakeRun("r", ns).Config(cfg.Name).Input("why does the VPN drop?").Obj()
		create(cfg, run)

		waiting := waitForPhase(run, v1alpha1.PhaseAwaitingInput)
		Expect(waiting.Status.PendingInput.Agent).To(Equal("researcher"))
		Expect(waiting.Status.PendingInput.Question).To(Equal("Which region?"))
		Expect(annotate(carol, run, v1alpha1.AnnotationReply, "eu-west")).To(Succeed())
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), run.Status.TerminationMessage)
		Expect(run.Status.Output).To(Equal("the VPN report"))
		Expect(sequence(run)).To(Equal([]string{"researcher->", "researcher->writer", "writer->"}))
		Expect(run.Status.HandoffSequence[0].Reason).To(Equal("asks for input"))

		got := agent.Received()
		Expect(got).To(HaveLen(2))
		Expect(got[0].Message.ID).To(Equal(a2aagent.MessageID(string(run.UID), 1)))
		Expect(got[1].Message.ID).To(Equal(a2aagent.MessageID(string(run.UID), 2)))
		Expect(got[0].Message.ContextID).To(Equal(a2aagent.ContextID(string(run.UID))))
		Expect(got[1].Message.ContextID).To(Equal(got[0].Message.ContextID), "one A2A context per run")
		Expect(got[1].TaskID).To(Equal(got[0].TaskID), "the reply continues the task that asked")
		Expect(got[1].Message.Parts[0].Text()).To(Equal("eu-west"))

		var progress []batonrecords.ProgressBody
		for _, r := range transcriptOf(run) {
			if r.Kind == transcript.KindProgress {
				var b batonrecords.ProgressBody
				Expect(json.Unmarshal(r.Body, &b)).To(Succeed())
				Expect(r.Step).To(BeEquivalentTo(1))
				progress = append(progress, b)
			}
		}
		Expect(progress).To(Equal([]batonrecords.ProgressBody{{Agent: "researcher", State: "TASK_STATE_WORKING", Text: "checking the gateways"}}))
	})
})
