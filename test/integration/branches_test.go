package integration

import (
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/baton-dev/baton/api/v1alpha1"
	batonrecords "github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcript"
	. "github.com/baton-dev/baton/test/builders"
	"github.com/baton-dev/baton/test/fakes"
)

var _ = Describe("Parallel branches", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	// researchTeam is a lead that fans out to a researcher and a critic, whose outputs the
	// writer joins.
	researchTeam := func(join v1alpha1.Join, researcher *AgentWrapper) *v1alpha1.AgentConfig {
		join.Agent = "writer"
		return MakeConfig("research", ns).Agents(
			MakeAgent("lead").HandsOffTo("researcher", "critic", "writer").Parallel(3, v1alpha1.BudgetSplit, join).
				Script(Says("splitting up").FansOut("researcher", "sources on X", "critic", "weak points of X")),
			researcher,
			MakeAgent("critic").HandsOffTo("lead").Script(Says("two weak points")),
			MakeAgent("writer").Terminator().Script(Says("the report")),
		).Obj()
	}
	researcher := func() *AgentWrapper {
		return MakeAgent("researcher").HandsOffTo("lead").Script(Says("three sources"))
	}
	// branch is the named branch run; an empty one until the operator has made it, so that an
	// Eventually on it waits for the branch rather than fail at once.
	branch := func(name string) *v1alpha1.AgentRun {
		b := &v1alpha1.AgentRun{}
		ExpectWithOffset(1, client.IgnoreNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, b))).To(Succeed())
		return b
	}

	It("fan out to child runs, each guarded, and join their outputs in order for the writer", func() {
		cfg := researchTeam(v1alpha1.Join{}, researcher())
		run := MakeRun("r", ns).Config(cfg.Name).Input("a report on X").Obj()
		create(cfg, run)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), run.Status.TerminationMessage)
		Expect(run.Status.Output).To(Equal("the report"))

		for i, want := range []struct{ agent, input, output string }{
			{"researcher", "sources on X", "three sources"},
			{"critic", "weak points of X", "two weak points"},
		} {
			b := branch([]string{"r-b1-1", "r-b1-2"}[i])
			Expect(b.Labels).To(HaveKeyWithValue(v1alpha1.LabelParent, "r"))
			Expect(metav1.IsControlledBy(b, run)).To(BeTrue(), "the parent controls its branch")
			Expect(b.Spec.Branch).To(Equal(&v1alpha1.RunBranch{Parent: "r", Step: 1, Index: int32(i + 1), Agent: want.agent, Depth: 1}))
			Expect(b.Spec.Input).To(Equal(want.input))
			Expect(b.Spec.Limits.MaxSteps).To(HaveValue(BeEquivalentTo(12)), "half of the 24 steps left after the fan-out")
			Expect(b.Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))
			Expect(b.Status.Output).To(Equal(want.output))
			Expect(b.Status.ConfigRevision).To(Equal(run.Status.ConfigRevision), "the branch runs the config its parent pinned")
		}

		Expect(run.Status.Branches).To(HaveLen(2))
		for _, b := range run.Status.Branches {
			Expect(b.Phase).To(Equal(v1alpha1.PhaseSucceeded))
			Expect(b.Reason).To(Equal(v1alpha1.ReasonCompleted))
		}
		Expect(run.Status.BranchSteps).To(BeEquivalentTo(2))
		Expect(run.Status.StepCount).To(BeEquivalentTo(2), "the fan-out and the writer's step")
		var outcomes []v1alpha1.StepOutcome
		for _, h := range run.Status.HandoffSequence {
			outcomes = append(outcomes, h.Outcome)
		}
		Expect(outcomes).To(Equal([]v1alpha1.StepOutcome{v1alpha1.OutcomeFanOut, v1alpha1.OutcomeJoined, v1alpha1.OutcomeFinal}))
		Expect(run.Status.HandoffSequence[0].To).To(Equal("researcher,critic"))

		// The writer was given both outputs, in the order the lead gave the branches.
		rec, ok, err := controllerOptions.Transcript.Get(ctx, string(run.UID), transcript.Key{Kind: transcript.KindStep, Step: 2})
		Expect(err).NotTo(HaveOccurred())
		Expect(ok).To(BeTrue())
		var body batonrecords.StepBody
		Expect(json.Unmarshal(rec.Body, &body)).To(Succeed())
		Expect(body.Agent).To(Equal("writer"))
		Expect(body.Input).To(Equal("## Branch 1: researcher (Completed)\n\nthree sources\n\n## Branch 2: critic (Completed)\n\ntwo weak points"))
	})

	It("join on the first branch, cancel the slower one, and cancel every branch with the parent", func() {
		slow := MakeAgent("researcher").HandsOffTo("lead").Script(Says("late").Delay(time.Hour))
		cfg := researchTeam(v1alpha1.Join{Mode: v1alpha1.JoinFirst}, slow)
		first := MakeRun("first", ns).Config(cfg.Name).Obj()
		create(cfg, first)
		first = waitForEnd(first)
		Expect(first.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), first.Status.TerminationMessage)
		Eventually(func() v1alpha1.TerminationReason { return branch("first-b1-1").Status.TerminationReason }, runTimeout, poll).
			Should(Equal(v1alpha1.ReasonCancelled), "the slow branch is not needed once the critic answered")

		all := MakeRun("all", ns).Config(cfg.Name).Obj()
		cfgAll := researchTeam(v1alpha1.Join{}, slow)
		cfgAll.Name = "research-all"
		all.Spec.ConfigRef.Name = cfgAll.Name
		create(cfgAll, all)
		Eventually(func() v1alpha1.RunPhase { return branch("all-b1-1").Status.Phase }, runTimeout, poll).Should(Equal(v1alpha1.PhaseRunning))
		Expect(annotate(k8sClient, all, v1alpha1.AnnotationCancel, "not needed")).To(Succeed())
		Expect(waitForEnd(all).Status.TerminationReason).To(Equal(v1alpha1.ReasonCancelled))
		Eventually(func() v1alpha1.TerminationReason { return branch("all-b1-1").Status.TerminationReason }, runTimeout, poll).
			Should(Equal(v1alpha1.ReasonCancelled), "a branch does not outlive its parent")
	})

	It("fail the parent with a failed branch's reason as evidence", func() {
		looping := MakeAgent("researcher").HandsOffTo("lead").Script(Says("fails").Fails("the search backend is down"))
		cfg := researchTeam(v1alpha1.Join{}, looping)
		run := MakeRun("r", ns).Config(cfg.Name).Obj()
		create(cfg, run)
		run = waitForEnd(run)
		Expect(run.Status.Phase).To(Equal(v1alpha1.PhaseFailed))
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonBranchFailed))
		Expect(run.Status.TerminationMessage).To(HavePrefix("branch r-b1-1 (agent researcher) ended TooManyErrors: "))
	})

	It("run the research-team sample (Scripted twin): three branches, each a third of the budget, joined in the writer's report", func() {
		cfg, runs := loadSample("research-team.yaml", ns)
		create(cfg, runs[0])
		run := waitForEnd(runs[0])
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), run.Status.TerminationMessage)
		Expect(run.Status.Output).To(HavePrefix("Report: the method is established"))
		Expect(run.Status.Branches).To(HaveLen(3))
		// 220 for the fan-out, 340 + 310 + 280 in the branches, 400 for the report.
		Expect(run.Status.TokensUsed).To(BeEquivalentTo(1550))
		list := &v1alpha1.AgentRunList{}
		Expect(k8sClient.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelParent: run.Name})).To(Succeed())
		Expect(list.Items).To(HaveLen(3), "kubectl get agentruns -l agents.baton.dev/parent=%s lists the branches", run.Name)
		for _, b := range list.Items {
			// (25 steps - 1) / 3 and (20,000 - 220) / 3, rounded down.
			Expect(*b.Spec.Limits.MaxSteps).To(BeEquivalentTo(8))
			Expect(*b.Spec.Limits.MaxTokens).To(BeEquivalentTo(6593))
		}

		By("replaying it with its branches, each from its branch run's transcript")
		again := replayOf(ns, "research-again", cfg.Name, run.Name)
		Expect(again.Status.TerminationMessage).To(ContainSubstring("it ran the same path, tokens and end (Completed)"), again.Status.TerminationMessage)
		Expect(again.Status.Replay.Replayed.Tokens).To(BeEquivalentTo(1550))
		Expect(sequence(again)).To(Equal(sequence(run)))

		By("and against a lead that may fan out to two branches only: its fan-out to three fails")
		editConfig(cfg, func(c *v1alpha1.AgentConfig) { c.Spec.Agents[0].Parallel.MaxBranches = ptr.To[int32](2) })
		two := replayOf(ns, "research-two", cfg.Name, run.Name)
		Expect(two.Status.Replay.Diverged).To(BeEquivalentTo(1), two.Status.TerminationMessage)
	})

	It("run the research-team sample's OpenAI twin: the lead's fan_out call starts the branches", func() {
		server := fakes.NewOpenAI()
		DeferCleanup(server.Close)
		cfg, runs := loadSample("research-team-openai.yaml", ns)
		for i := range cfg.Spec.Agents {
			cfg.Spec.Agents[i].Model.Endpoint = server.BaseURL()
		}
		server.ReplyTo("lead", fakes.Reply{Content: "splitting up", Tokens: 100, ToolCalls: []fakes.ToolCall{{Name: "fan_out",
			Args: `{"branches":[{"agent":"researcher","input":"prior work"},{"agent":"researcher","input":"current practice"},{"agent":"critic","input":"weak points"}]}`}}})
		server.ReplyTo("researcher", fakes.Reply{Content: "three surveys", Tokens: 50})
		server.ReplyTo("critic", fakes.Reply{Content: "small samples", Tokens: 50})
		server.ReplyTo("writer", fakes.Reply{Content: "the report", Tokens: 80})
		create(apiKeySecret(ns), cfg, runs[0])
		run := waitForEnd(runs[0])
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), run.Status.TerminationMessage)
		Expect(run.Status.Output).To(Equal("the report"))
		Expect(run.Status.Branches).To(HaveLen(3))
		Expect(run.Status.TokensUsed).To(BeEquivalentTo(100 + 3*50 + 80))
		var leadTools []string
		for _, r := range server.Requests() {
			if r.Agent() == "lead" {
				leadTools = r.ToolNames()
			}
		}
		Expect(leadTools).To(ContainElement("fan_out"), "the lead is offered the fan-out")
	})

	It("refuse a tenant's forged branch, at create and given later", func() {
		// Mallory may create and edit runs in the namespace, as a run author may.
		create(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "run-author", Namespace: ns}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"agentruns"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch"}}}},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "mallory", Namespace: ns},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "run-author"},
				Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "mallory"}}})
		mallory := clientFor(envtest.User{Name: "mallory"})
		cfg := researchTeam(v1alpha1.Join{}, MakeAgent("researcher").HandsOffTo("lead").Script(Says("late").Delay(time.Hour)))
		victim := MakeRun("victim", ns).Config(cfg.Name).Input("a report on X").Obj()
		create(cfg, victim)
		Eventually(func() int { return len(get(victim).Status.Branches) }, runTimeout, poll).Should(Equal(2))
		victim = get(victim)

		By("a run with the marks of the victim's branch is refused at create")
		forged := MakeRun("victim-b1-3", ns).Config(cfg.Name).Input("my own words").Obj()
		forged.Labels = map[string]string{v1alpha1.LabelParent: victim.Name}
		forged.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "AgentRun",
			Name: victim.Name, UID: victim.UID, Controller: ptr.To(true)}}
		err := mallory.Create(ctx, forged)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring(`user "mallory" may not create AgentRun %s/victim-b1-3 with the label agents.baton.dev/parent and a controller reference to an AgentRun: they make a run a branch of another run, and only Baton makes branch runs`, ns))

		By("and so are the marks given later, to a run of her own")
		mine := MakeRun("mine", ns).Config("no-such-config").Input("my own words").Obj()
		Expect(mallory.Create(ctx, mine)).To(Succeed())
		labelled := mine.DeepCopy()
		labelled.Labels = map[string]string{v1alpha1.LabelParent: victim.Name}
		err = mallory.Patch(ctx, labelled, client.MergeFrom(mine))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("a change of the label agents.baton.dev/parent"))
		owned := mine.DeepCopy()
		owned.OwnerReferences = forged.OwnerReferences
		err = mallory.Patch(ctx, owned, client.MergeFrom(mine))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("a new controller reference to an AgentRun"))
		Expect(annotate(mallory, victim, v1alpha1.AnnotationCancel, "stop")).To(Succeed(), "other updates do not depend on the webhook")
	})
})
