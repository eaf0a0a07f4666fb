package integration

import (
	"encoding/json"

	"github.com/a2aproject/a2a-go/v2/a2a"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/baton-dev/baton/agents/a2aagent"
	"github.com/baton-dev/baton/api/v1alpha1"
	batonrecords "github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/test/a2aagents"
	"github.com/baton-dev/baton/test/a2ajs"
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

	It("runs the order-desk sample, whose stock clerk is the sample agent on the A2A JavaScript SDK", func() {
		ns := newNamespace()
		stock, err := a2ajs.StartStockAgent(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(stock.Stop)
		cfg, runs := loadSample("a2a/order-desk.yaml", ns)
		for i := range cfg.Spec.Agents {
			if cfg.Spec.Agents[i].Model.Provider == v1alpha1.ProviderA2A {
				cfg.Spec.Agents[i].Model.Endpoint = stock.URL
			}
		}
		run := runs[0]
		create(cfg, run)

		waiting := waitForPhase(run, v1alpha1.PhaseAwaitingInput)
		Expect(waiting.Status.PendingInput.Agent).To(Equal("stock"))
		Expect(waiting.Status.PendingInput.Question).To(Equal("Which warehouse: berlin or lyon?"))
		Expect(annotate(carol, run, v1alpha1.AnnotationReply, "berlin")).To(Succeed())
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), run.Status.TerminationMessage+"\n"+stock.LogTail(4096))
		Expect(sequence(run)).To(Equal([]string{"dispatcher->stock", "stock->", "stock->dispatcher", "dispatcher->"}))
		Expect(run.Status.HandoffSequence[2].Reason).NotTo(BeEmpty())

		var said []string
		for _, r := range transcriptOf(run) {
			if r.Kind == transcript.KindProgress {
				var b batonrecords.ProgressBody
				Expect(json.Unmarshal(r.Body, &b)).To(Succeed())
				said = append(said, b.Text)
			}
			if r.Kind == transcript.KindStep && r.Step == 3 {
				var b batonrecords.StepBody
				Expect(json.Unmarshal(r.Body, &b)).To(Succeed())
				Expect(b.Output).To(Equal("SKU-123: 42 units in berlin."))
			}
		}
		Expect(said).To(Equal([]string{"counting SKU-123 in berlin"}))
	})
})
