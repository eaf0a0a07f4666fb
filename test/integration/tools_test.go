package integration

import (
	"encoding/json"
	"sort"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/transcript"
	. "github.com/baton-dev/baton/test/builders"
	"github.com/baton-dev/baton/test/fakes"
	"github.com/baton-dev/baton/test/toolservers"
)

// Tool servers nobody here wrote: the MCP reference servers from npm (server-everything in its
// streamable HTTP mode, server-memory behind a stdio bridge), started on loopback for these
// specs, and an HTTP tool that counts every call by its idempotency key.
var everything, memory *toolservers.Server

var _ = Describe("Agents with tools", Ordered, func() {
	var ns string
	var model *fakes.OpenAI
	var crm *toolservers.CountingTool

	BeforeAll(func() {
		var err error
		if everything == nil {
			everything, err = toolservers.StartEverything(ctx)
			Expect(err).NotTo(HaveOccurred(), "starting server-everything")
			DeferCleanup(func() { everything.Stop(); everything = nil })
			memory, err = toolservers.StartMemory(ctx)
			Expect(err).NotTo(HaveOccurred(), "starting server-memory behind its bridge")
			DeferCleanup(func() { memory.Stop(); memory = nil })
		}
	})
	BeforeEach(func() {
		ns = newNamespace()
		model = fakes.NewOpenAI()
		DeferCleanup(model.Close)
		crm = toolservers.NewCountingTool()
		DeferCleanup(crm.Close)
	})

	// researcher calls the tools of server-everything that it is allowed, and hands off to the
	// writer, which answers.
	researchTeam := func(name string, tools ...*ToolsWrapper) *ConfigWrapper {
		if len(tools) == 0 {
			tools = []*ToolsWrapper{Uses("everything").Allow("echo", "get-sum")}
		}
		return MakeConfig(name, ns).MCPServer("everything", everything.URL).HTTPTool("crm", crm.URL).Agents(
			modelAgent("researcher", model).HandsOffTo("writer").Tools(tools...),
			MakeAgent("writer").Terminator().Script(Says("Report written.")),
		)
	}
	toolRecords := func(run *v1alpha1.AgentRun, kind transcript.Kind) []map[string]any {
		var out []map[string]any
		for _, rec := range transcriptOf(run) {
			if rec.Kind == kind {
				var body map[string]any
				Expect(json.Unmarshal(rec.Body, &body)).To(Succeed())
				out = append(out, body)
			}
		}
		return out
	}

	It("run a tool loop on a real MCP server that ends in a handoff, and record every call", func() {
		cfg := researchTeam("research").Obj()
		model.ReplyTo("researcher",
			fakes.Reply{Content: "Checking.", Tokens: 40, ToolCalls: []fakes.ToolCall{
				{Name: "everything__echo", Args: `{"message":"hello"}`}, {Name: "everything__get-sum", Args: `{"a":2,"b":3}`}}},
			fakes.Reply{Tokens: 20, ToolCalls: []fakes.ToolCall{{Name: "transfer_to_writer", Args: `{"reason":"facts gathered"}`}}},
		)
		run := MakeRun("r1", ns).Config(cfg.Name).Input("Research Acme").Obj()
		create(apiKeySecret(ns), cfg, run)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), run.Status.TerminationMessage)
		Expect(sequence(run)).To(Equal([]string{"researcher->writer", "writer->"}))
		Expect(run.Status.ToolCalls).To(BeEquivalentTo(2))
		Expect(run.Status.HandoffSequence[0].ToolCalls).To(BeEquivalentTo(2))
		Expect(run.Status.HandoffSequence[0].Tokens).To(BeEquivalentTo(60), "every request of the loop counts")
		Expect(run.Status.HandoffSequence[0].Reason).To(Equal("facts gathered"))

		sent := model.Requests()
		Expect(sent).To(HaveLen(2))
		Expect(sent[0].ToolNames()).To(ConsistOf("transfer_to_writer", "everything__echo", "everything__get-sum"), "only the allowed tools")
		results := sent[1].ToolResults()
		Expect(results).To(HaveLen(2))
		Expect(results[0].Content).To(ContainSubstring("Echo: hello"))
		Expect(results[1].Content).To(ContainSubstring("5"))

		calls := toolRecords(run, transcript.KindTool)
		Expect(calls).To(HaveLen(2))
		// The calls of one answer are sent together: their records are in the order they ended.
		sort.Slice(calls, func(i, j int) bool { return calls[i]["index"].(float64) < calls[j]["index"].(float64) })
		Expect(calls[0]).To(HaveKeyWithValue("tool", "echo"))
		Expect(calls[0]).To(HaveKeyWithValue("made", true))
		Expect(calls[0]["idempotencyKey"]).To(Equal(string(run.UID) + "/1/1"))
		Expect(toolRecords(run, transcript.KindToolTurn)).To(HaveLen(1))
	})

	It("give a tool's error to the model as its result, not a failed step", func() {
		cfg := researchTeam("errors").Obj()
		model.ReplyTo("researcher",
			fakes.Reply{Tokens: 10, ToolCalls: []fakes.ToolCall{{Name: "everything__echo", Args: `{"wrong":"argument"}`}}},
			fakes.Reply{Tokens: 10, ToolCalls: []fakes.ToolCall{{Name: "transfer_to_writer", Args: `{"reason":"tool broken"}`}}},
		)
		run := MakeRun("r1", ns).Config(cfg.Name).Input("Research Acme").Obj()
		create(apiKeySecret(ns), cfg, run)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), run.Status.TerminationMessage)
		Expect(run.Status.ErrorCount).To(BeZero())
		result := model.Requests()[1].ToolResults()[0].Content
		Expect(result).To(HavePrefix("error: "))
		Expect(result).To(ContainSubstring("message"), "the server's own validation error")
	})

	It("stop a step's calls at its maxToolCalls and ask the model to answer without tools", func() {
		c := researchTeam("per-step")
		c.Spec.Agents[0].MaxToolCalls = ptr.To[int32](1)
		cfg := c.Obj()
		model.ReplyTo("researcher",
			fakes.Reply{Tokens: 10, ToolCalls: []fakes.ToolCall{{Name: "everything__echo", Args: `{"message":"a"}`}, {Name: "everything__echo", Args: `{"message":"b"}`}}},
			fakes.Reply{Tokens: 10, ToolCalls: []fakes.ToolCall{{Name: "transfer_to_writer", Args: `{"reason":"enough"}`}}},
		)
		run := MakeRun("r1", ns).Config(cfg.Name).Input("Research Acme").Obj()
		create(apiKeySecret(ns), cfg, run)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), run.Status.TerminationMessage)
		Expect(run.Status.ToolCalls).To(BeEquivalentTo(1))
		last := model.Requests()[1]
		Expect(last.ToolNames()).To(Equal([]string{"transfer_to_writer"}))
		Expect(last.ToolResults()[1].Content).To(ContainSubstring("limit of 1 tool calls"))
	})

	It("end the run ToolCallLimitExceeded at limits.maxToolCalls, with the evidence", func() {
		cfg := researchTeam("per-run").MaxToolCalls(2).Obj()
		model.ReplyTo("researcher",
			fakes.Reply{Tokens: 10, ToolCalls: []fakes.ToolCall{{Name: "everything__echo", Args: `{"message":"1"}`}}},
			fakes.Reply{Tokens: 10, ToolCalls: []fakes.ToolCall{{Name: "everything__echo", Args: `{"message":"2"}`}}},
			fakes.Reply{Tokens: 10, ToolCalls: []fakes.ToolCall{{Name: "everything__get-sum", Args: `{"a":1,"b":1}`}}},
		)
		run := MakeRun("r1", ns).Config(cfg.Name).Input("Research Acme").Obj()
		create(apiKeySecret(ns), cfg, run)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonToolCallLimitExceeded))
		Expect(run.Status.TerminationMessage).To(ContainSubstring("limits.maxToolCalls 2 reached: step 1 asked for another call (everything/get-sum)"))
		Expect(run.Status.ToolCalls).To(BeEquivalentTo(2))
	})

	It("detect the same call repeated and end the run LoopDetected", func() {
		cfg := researchTeam("repeated").MaxRepeatedToolCalls(2).Obj()
		model.ReplyTo("researcher", fakes.Reply{Tokens: 10, ToolCalls: []fakes.ToolCall{{Name: "everything__echo", Args: `{"message":"again"}`}}})
		run := MakeRun("r1", ns).Config(cfg.Name).Input("Research Acme").Obj()
		create(apiKeySecret(ns), cfg, run)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonLoopDetected), run.Status.TerminationMessage)
		Expect(run.Status.Loop).To(Equal(&v1alpha1.LoopStatus{Detector: v1alpha1.DetectorRepeatedToolCall,
			Pattern: []string{"everything/echo"}, Steps: []int32{1, 1, 1}}))
		Expect(run.Status.TerminationMessage).To(ContainSubstring("more than loopDetection.maxRepeatedToolCalls 2"))
		Expect(run.Status.ToolCalls).To(BeEquivalentTo(2))
	})

	It("hold a call at its tool's gate: approved it is made, rejected the model is told", func() {
		cfg := researchTeam("gated", Uses("crm").Approved(1).SideEffects()).Obj()
		model.ReplyTo("researcher",
			fakes.Reply{Tokens: 10, ToolCalls: []fakes.ToolCall{{Name: "crm__crm", Args: `{"email":"ada@example.com"}`}}},
			fakes.Reply{Tokens: 10, ToolCalls: []fakes.ToolCall{{Name: "crm__crm", Args: `{"email":"bob@example.com"}`}}},
			fakes.Reply{Tokens: 10, ToolCalls: []fakes.ToolCall{{Name: "transfer_to_writer", Args: `{"reason":"looked up"}`}}},
		)
		run := MakeRun("r1", ns).Config(cfg.Name).Input("Look Ada up").Obj()
		create(apiKeySecret(ns), cfg, run)

		By("waiting at the gate with the call's arguments, the call not made")
		held := waitForGate(run, "tool/crm/crm", 0)
		Expect(held.Status.PendingApproval.ToolCall).To(Equal(&v1alpha1.PendingToolCall{
			Server: "crm", Tool: "crm", Step: 1, Call: 1, Arguments: `{"email":"ada@example.com"}`}))
		Expect(held.Status.StepCount).To(BeZero())
		Expect(crm.Calls()).To(BeEmpty())

		By("refusing a person without the approve verb")
		Expect(annotate(carol, run, v1alpha1.AnnotationApprove, "tool/crm/crm")).To(MatchError(ContainSubstring("approve")))

		By("making the call once approved")
		Expect(annotate(alice, run, v1alpha1.AnnotationApprove, "tool/crm/crm")).To(Succeed())
		waitForGate(run, "tool/crm/crm", 0)
		// Between the two gates the run works, and waits at none.
		Eventually(func() int32 {
			if p := get(run).Status.PendingApproval; p != nil && p.ToolCall != nil {
				return p.ToolCall.Call
			}
			return 0
		}, runTimeout, poll).Should(BeEquivalentTo(2))
		Expect(crm.Calls()).To(HaveLen(1))
		Expect(crm.Calls()[0].IdempotencyKey).To(Equal(string(run.UID) + "/1/1"))

		By("telling the model when rejected, without making the call")
		Expect(annotate(bob, run, v1alpha1.AnnotationReject, "tool/crm/crm", v1alpha1.AnnotationFeedback, "not Bob's record")).To(Succeed())
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), run.Status.TerminationMessage)
		Expect(crm.Calls()).To(HaveLen(1))
		Expect(run.Status.StepCount).To(BeEquivalentTo(2), "the held step counts once")
		Expect(run.Status.ToolCalls).To(BeEquivalentTo(1))
		Expect(run.Status.HandoffSequence[0].Tokens).To(BeEquivalentTo(30))
		Expect(run.Status.TokensUsed).To(BeEquivalentTo(30), "the tokens counted at the gates are not counted again")
		Expect(records(run)).To(Equal([]string{"Approved tool/crm/crm by alice", "Rejected tool/crm/crm by bob"}))
		Expect(run.Status.Approvals[1].Feedback).To(Equal("not Bob's record"))
		Expect(run.Status.Approvals[1].ToolCall).To(BeEquivalentTo(2))
		results := model.Requests()[2].ToolResults()
		Expect(results[0].Content).To(ContainSubstring(`"ok":true`), "the CRM's answer")
		Expect(results[1].Content).To(Equal("error: rejected by bob: not Bob's record"))
		Expect(model.Requests()).To(HaveLen(3), "the model is not asked again for turns it gave")
	})

	It("do not send a side-effecting call again when the operator restarts mid-step", func() {
		cfg := MakeConfig("restart", ns).HTTPTool("crm", crm.URL).Agents(
			MakeAgent("writer").Terminator().Tools(Uses("crm").SideEffects()).Script(
				Says("Ticket filed.").Calls("crm", "crm", `{"file":"ticket"}`).Delay(3 * time.Second)),
		).Obj()
		run := MakeRun("r1", ns).Config(cfg.Name).Input("File it").Obj()
		create(cfg, run)
		Eventually(func() int { return len(crm.Calls()) }, runTimeout, poll).Should(Equal(1))

		By("restarting the operator while the step waits after its call")
		stopManager()
		stopManager = startManager(controllerOptions)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), run.Status.TerminationMessage)
		Expect(crm.Calls()).To(HaveLen(1))
		Expect(crm.Repeated()).To(BeZero())
		Expect(toolRecords(run, transcript.KindToolStart)).To(HaveLen(1))
		Expect(run.Status.ToolCalls).To(BeEquivalentTo(1))
	})

	It("keep a call held at its gate across a restart of the operator, and make it once approved", func() {
		cfg := MakeConfig("held", ns).HTTPTool("crm", crm.URL).Agents(
			MakeAgent("writer").Terminator().Tools(Uses("crm").Approved(1).SideEffects()).Script(
				Says("Ticket filed.").Calls("crm", "crm", `{"file":"ticket"}`)),
		).Obj()
		run := MakeRun("r1", ns).Config(cfg.Name).Input("File it").Obj()
		create(cfg, run)
		waitForGate(run, "tool/crm/crm", 0)

		By("restarting the operator while the run waits")
		stopManager()
		stopManager = startManager(controllerOptions)
		Consistently(func() v1alpha1.RunPhase { return get(run).Status.Phase }, 2*time.Second, poll).Should(Equal(v1alpha1.PhaseAwaitingApproval))
		Expect(crm.Calls()).To(BeEmpty())

		Expect(annotate(alice, run, v1alpha1.AnnotationApprove, "tool/crm/crm")).To(Succeed())
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), run.Status.TerminationMessage)
		Expect(crm.Calls()).To(HaveLen(1))
		Expect(run.Status.StepCount).To(BeEquivalentTo(1))
		Expect(run.Status.HandoffSequence[0].ToolCalls).To(BeEquivalentTo(1))
		Expect(toolRecords(run, transcript.KindToolGate)).To(HaveLen(1))
	})

	It("keep the helpdesk's memory in the MCP memory server (the sample)", func() {
		cfg, runs := loadSample("helpdesk-memory.yaml", ns)
		cfg.Spec.ToolServers[0].MCP.URL = memory.URL
		create(cfg, runs[0])
		first := waitForEnd(runs[0])
		Expect(first.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), first.Status.TerminationMessage)
		Expect(first.Status.ToolCalls).To(BeEquivalentTo(2))
		calls := toolRecords(first, transcript.KindTool)
		Expect(calls).To(HaveLen(2))
		Expect(calls[0]).To(HaveKeyWithValue("tool", "search_nodes"))
		Expect(calls[1]).To(HaveKeyWithValue("tool", "create_entities"))
		Expect(calls[1]["isError"]).To(BeNil(), calls[1]["content"])

		By("finding the stored resolution in the next run's search")
		second := runs[0].DeepCopy()
		second.Name, second.ResourceVersion, second.UID = "ticket-2002", "", ""
		create(second)
		second = waitForEnd(second)
		search := toolRecords(second, transcript.KindTool)[0]
		Expect(search["content"]).To(ContainSubstring("keepalive to 30 s"))

		By("replaying the first run on the sample's config: its path, tokens and end, its two tool calls checked against the config")
		again := replayOf(ns, "again", cfg.Name, first.Name)
		Expect(again.Status.TerminationMessage).To(ContainSubstring("it ran the same path, tokens and end (Completed)"), again.Status.TerminationMessage)
		Expect(again.Status.Replay.Replayed.Tokens).To(Equal(first.Status.TokensUsed))
		Expect(sequence(again)).To(Equal(sequence(first)))
	})
})

var _ = Describe("The two-gate pipeline with a CRM behind a tool's gate (the sample)", func() {
	It("waits at the plan gate, then at the CRM lookup with its arguments, and calls the CRM once approved", func() {
		ns := newNamespace()
		crm := toolservers.NewCountingTool()
		DeferCleanup(crm.Close)
		cfg, runs := loadSample("vendor-review-crm.yaml", ns)
		cfg.Spec.ToolServers[0].HTTP.URL = crm.URL
		run := runs[0]
		create(cfg, run)
		waitForGate(run, "plan", 1)
		Expect(annotate(alice, run, v1alpha1.AnnotationApprove, "plan")).To(Succeed())
		held := waitForGate(run, "tool/crm/lookup", 3)
		Expect(held.Status.PendingApproval.ToolCall.Arguments).To(Equal(`{"vendor":"Acme"}`))
		Expect(crm.Calls()).To(BeEmpty())
		Expect(annotate(bob, run, v1alpha1.AnnotationApprove, "tool/crm/lookup")).To(Succeed())
		waitForGate(run, "final", 5)
		Expect(crm.Calls()).To(HaveLen(1))
		Expect(string(crm.Calls()[0].Arguments)).To(MatchJSON(`{"vendor":"Acme"}`))
		Expect(annotate(alice, run, v1alpha1.AnnotationApprove, "final")).To(Succeed())
		done := waitForEnd(run)
		Expect(done.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), done.Status.TerminationMessage)
		Expect(records(done)).To(Equal([]string{"Approved plan by alice", "Approved tool/crm/lookup by bob", "Approved final by alice"}))
	})
})
