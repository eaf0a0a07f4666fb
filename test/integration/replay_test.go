package integration

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
)

// replayOf is a run of config, in ns, that replays the recorded run, once it ended.
func replayOf(ns, name, config, recorded string) *v1alpha1.AgentRun {
	run := MakeRun(name, ns).Config(config).Obj()
	run.Spec.Replay = &v1alpha1.RunReplay{Run: recorded}
	create(run)
	return waitForEnd(run)
}

var _ = Describe("A run with spec.replay", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	// pipeline is a writer whose draft a person reviews, and a publisher that ends the run.
	pipeline := func(name string) *ConfigWrapper {
		return MakeConfig(name, ns).Agents(
			MakeAgent("writer").HandsOffTo("publisher").Script(Says("draft").HandOff("publisher").Tokens(40)),
			MakeAgent("publisher").Terminator().Script(Says("published").Tokens(60)),
		).Gate("review", "writer", 1)
	}

	// recordOpen runs the pipeline without its gate, as run "recorded", and returns its config.
	recordOpen := func() *v1alpha1.AgentConfig {
		open := MakeConfig("open", ns).Agents(
			MakeAgent("writer").HandsOffTo("publisher").Script(Says("draft").HandOff("publisher")),
			MakeAgent("publisher").Terminator().Script(Says("published")),
		).Obj()
		recorded := MakeRun("recorded", ns).Config(open.Name).Obj()
		create(open, recorded)
		waitForEnd(recorded)
		return open
	}

	It("replays a recorded run on the config as it is now, and says where the path parts", func() {
		cfg := pipeline("pipeline").Obj()
		recorded := MakeRun("recorded", ns).Config(cfg.Name).Obj()
		create(cfg, recorded)
		waitForGate(recorded, "review", 1)
		Expect(annotate(alice, recorded, v1alpha1.AnnotationApprove, "review")).To(Succeed())
		recorded = waitForEnd(recorded)
		Expect(recorded.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted))

		same := replayOf(ns, "same", cfg.Name, "recorded")
		Expect(same.Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))
		Expect(same.Status.TerminationReason).To(Equal(v1alpha1.ReasonReplayed))
		Expect(same.Status.TerminationMessage).To(HavePrefix("replayed run recorded on the config as it is now: it ran the same path, tokens and end (Completed)"))
		Expect(same.Status.Replay).To(Equal(&v1alpha1.ReplayStatus{Run: "recorded", Attempts: 1,
			Recorded: v1alpha1.ReplayOutcome{Phase: v1alpha1.PhaseSucceeded, Reason: v1alpha1.ReasonCompleted, Message: recorded.Status.TerminationMessage, Steps: 2, Tokens: 100},
			Replayed: v1alpha1.ReplayOutcome{Phase: v1alpha1.PhaseSucceeded, Reason: v1alpha1.ReasonCompleted, Message: recorded.Status.TerminationMessage, Steps: 2, Tokens: 100}}))
		Expect(sequence(same)).To(Equal(sequence(recorded)), "the replayed path is the run's handoff sequence")
		Expect(same.Status.TokensUsed).To(BeZero(), "a replay calls no agent: it spends nothing")
		Expect(same.Status.ConfigRevision).To(Equal(recorded.Status.ConfigRevision))

		// The config changes: one step is all a run may take now.
		Eventually(func() error {
			c := &v1alpha1.AgentConfig{}
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(cfg), c); err != nil {
				return err
			}
			c.Spec.Limits.MaxSteps = ptr.To[int32](1)
			return k8sClient.Update(ctx, c)
		}, runTimeout, poll).Should(Succeed())
		lower := replayOf(ns, "lower", cfg.Name, "recorded")
		Expect(lower.Status.TerminationReason).To(Equal(v1alpha1.ReasonReplayed))
		Expect(lower.Status.Replay.Diverged).To(BeEquivalentTo(2))
		Expect(lower.Status.Replay.Replayed.Reason).To(Equal(v1alpha1.ReasonMaxStepsExceeded))
		Expect(lower.Status.TerminationMessage).To(ContainSubstring("the paths part at handoff 2; it ends MaxStepsExceeded (recorded: Completed)"))
		Expect(lower.Status.ConfigRevision).NotTo(Equal(recorded.Status.ConfigRevision), "the replay pinned the config as it is now")
	})

	It("reproduces the approvals-pipeline sample's run: its gates, a rejection sent back to an agent, and the approvals after", func() {
		cfg, runs := loadSample("approvals-pipeline.yaml", ns)
		run := runs[0]
		create(cfg, run)
		waitForGate(run, "plan", 1)
		Expect(annotate(alice, run, v1alpha1.AnnotationApprove, "plan")).To(Succeed())
		waitForGate(run, "final", 5)
		Expect(annotate(alice, run, v1alpha1.AnnotationReject, "final", v1alpha1.AnnotationRevise, "crm",
			v1alpha1.AnnotationFeedback, "check whether the disputes are resolved")).To(Succeed())
		waitForGate(run, "final", 7)
		Expect(annotate(bob, run, v1alpha1.AnnotationApprove, "final")).To(Succeed())
		run = waitForEnd(run)

		again := replayOf(ns, "again", cfg.Name, run.Name)
		Expect(again.Status.TerminationMessage).To(ContainSubstring("it ran the same path, tokens and end (Completed)"), again.Status.TerminationMessage)
		Expect(again.Status.Replay.Replayed.Tokens).To(Equal(run.Status.TokensUsed))
		Expect(sequence(again)).To(Equal(sequence(run)))
	})

	It("stops at a gate the recorded run never passed, and refuses a run that does not exist", func() {
		recordOpen()
		gated := pipeline("gated").Obj()
		create(gated)
		run := replayOf(ns, "gated-replay", gated.Name, "recorded")
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonReplayed))
		Expect(run.Status.Replay.Stopped).To(Equal("after step 1 the run waits at gate review, and the recording holds no decision of it that passes it"))
		Expect(run.Status.Replay.Replayed.Phase).To(Equal(v1alpha1.PhaseAwaitingApproval))

		missing := replayOf(ns, "missing", gated.Name, "nowhere")
		Expect(missing.Status.TerminationReason).To(Equal(v1alpha1.ReasonConfigInvalid))
		Expect(missing.Status.TerminationMessage).To(Equal("spec.replay: run nowhere does not exist in namespace " + ns))
	})

	It("counts in maxRunningRuns like any run: it waits Queued while the namespace's runs fill it", func() {
		recordOpen()
		cfg := pipeline("pipeline").Obj()
		create(cfg, quotaNamed(ns, "team-a", v1alpha1.AgentQuotaSpec{MaxRunningRuns: ptr.To[int32](1)}))
		busy := MakeRun("busy", ns).Config(cfg.Name).Obj()
		create(busy)
		waitForGate(busy, "review", 1)

		check := MakeRun("check", ns).Config(cfg.Name).Obj()
		check.Spec.Replay = &v1alpha1.RunReplay{Run: "recorded"}
		create(check)
		waitQueued(check, `quota "team-a": 1 of 1 runs running`)
		Expect(get(check).Status.Replay).To(BeNil(), "a queued replay run begins no replay")

		Expect(annotate(k8sClient, busy, v1alpha1.AnnotationCancel, "make room")).To(Succeed())
		check = waitForEnd(check)
		Expect(check.Status.TerminationReason).To(Equal(v1alpha1.ReasonReplayed), check.Status.TerminationMessage)
		Expect(check.Status.Replay.Attempts).To(BeEquivalentTo(1))
		Expect(check.Status.Replay.Stopped).To(ContainSubstring("waits at gate review"))
	})

	It("is refused by the API server when it sets limits or approvals of its own", func() {
		// A replay runs under the recorded run's own limits and approvals, not ones of its own.
		skip := MakeRun("skip", ns).Config("open").Obj()
		skip.Spec.Replay, skip.Spec.Approvals = &v1alpha1.RunReplay{Run: "recorded"}, v1alpha1.ApprovalsSkip
		Expect(k8sClient.Create(ctx, skip)).To(MatchError(ContainSubstring("replay replays the recorded run under the recorded run's own limits and approvals")))
		limited := MakeRun("limited", ns).Config("open").Obj()
		limited.Spec.Replay, limited.Spec.Limits = &v1alpha1.RunReplay{Run: "recorded"}, &v1alpha1.LimitOverrides{MaxSteps: ptr.To[int32](1)}
		Expect(k8sClient.Create(ctx, limited)).To(MatchError(ContainSubstring("set neither limits nor approvals: Skip")))
	})
})
