package integration

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/decisions"
	. "github.com/baton-dev/baton/test/builders"
)

// Three people: alice and bob may approve (the shipped baton-approver role); carol may edit
// runs but not approve.
var alice, bob, carol client.Client

var _ = BeforeEach(func() {
	if alice != nil {
		return
	}
	approver := &rbacv1.ClusterRole{}
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "approver_role.yaml"))
	Expect(err).NotTo(HaveOccurred())
	Expect(yaml.Unmarshal(data, approver)).To(Succeed())
	approver.Name = "baton-approver"
	editor := &rbacv1.ClusterRole{Rules: []rbacv1.PolicyRule{{APIGroups: []string{"agents.baton.dev"},
		Resources: []string{"agentruns"}, Verbs: []string{"get", "list", "watch", "patch", "update"}}}}
	editor.Name = "test-run-editor"
	create(approver, editor)
	for _, b := range []struct{ user, role string }{{"alice", "baton-approver"}, {"bob", "baton-approver"}, {"carol", "test-run-editor"}} {
		binding := &rbacv1.ClusterRoleBinding{
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.role},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: b.user}},
		}
		binding.Name = "test-" + b.user
		create(binding)
	}
	alice = clientFor(envtest.User{Name: "alice"})
	bob = clientFor(envtest.User{Name: "bob"})
	carol = clientFor(envtest.User{Name: "carol"})
})

// annotate sets annotations on a run as the user, as kubectl annotate does.
func annotate(as client.Client, run *v1alpha1.AgentRun, kv ...string) error {
	patch := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		patch[kv[i]] = kv[i+1]
	}
	obj := &v1alpha1.AgentRun{}
	obj.Name, obj.Namespace = run.Name, run.Namespace
	return as.Patch(ctx, obj, client.RawPatch("application/merge-patch+json", mustJSON(map[string]any{
		"metadata": map[string]any{"annotations": patch},
	})))
}

// waitForPhase waits until the run is in the phase and returns it.
func waitForPhase(run *v1alpha1.AgentRun, phase v1alpha1.RunPhase) *v1alpha1.AgentRun {
	out := &v1alpha1.AgentRun{}
	EventuallyWithOffset(1, func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(run), out)).To(Succeed())
		g.Expect(out.Status.Phase).To(Equal(phase), out.Status.TerminationMessage)
	}, runTimeout, poll).Should(Succeed())
	return out
}

// waitForGate waits until the run waits at the gate, after at least steps steps.
func waitForGate(run *v1alpha1.AgentRun, gate string, steps int32) *v1alpha1.AgentRun {
	out := &v1alpha1.AgentRun{}
	EventuallyWithOffset(1, func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(run), out)).To(Succeed())
		g.Expect(out.Status.Phase).To(Equal(v1alpha1.PhaseAwaitingApproval), out.Status.TerminationMessage)
		g.Expect(out.Status.PendingApproval.Gate).To(Equal(gate))
		g.Expect(out.Status.StepCount).To(BeNumerically(">=", steps))
	}, runTimeout, poll).Should(Succeed())
	return out
}

// decisionCondition waits for the Decision condition to say reason and returns its message.
func decisionCondition(run *v1alpha1.AgentRun, reason string) string {
	var msg string
	EventuallyWithOffset(1, func(g Gomega) {
		c := meta.FindStatusCondition(get(run).Status.Conditions, v1alpha1.ConditionDecision)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(reason))
		msg = c.Message
	}, runTimeout, poll).Should(Succeed())
	return msg
}

func records(run *v1alpha1.AgentRun) []string {
	var out []string
	for _, a := range run.Status.Approvals {
		r := strings.Join(strings.Fields(a.Decision+" "+a.Gate), " ") + " by " + a.By
		if a.Revise != "" {
			r += " revise " + a.Revise
		}
		out = append(out, strings.TrimSpace(r))
	}
	return out
}

var _ = Describe("Human gates", func() {
	var ns string
	var run *v1alpha1.AgentRun
	BeforeEach(func() {
		ns = newNamespace()
		cfg, runs := loadSample("approvals-pipeline.yaml", ns)
		create(cfg, runs[0])
		run = runs[0]
	})

	It("waits at the plan gate and the final gate of the pipeline, and completes once both are approved", func() {
		waiting := waitForGate(run, "plan", 1)
		Expect(waiting.Status.CurrentAgent).To(Equal("gmail"), "the plan's handoff waits for the gate")
		Expect(waiting.Status.PendingApproval.Since).NotTo(BeZero())
		Expect(meta.FindStatusCondition(waiting.Status.Conditions, v1alpha1.ConditionProgressing).Reason).To(Equal("AwaitingApproval"))
		Eventually(func() []string { return eventsOf(run) }).Should(ContainElement(ContainSubstring(
			"Approve: kubectl annotate agentrun vendor-review -n " + ns + " agents.baton.dev/approve=plan ; reject: kubectl annotate agentrun vendor-review -n " + ns + " agents.baton.dev/reject=plan")))

		Expect(annotate(alice, run, v1alpha1.AnnotationApprove, "plan", v1alpha1.AnnotationFeedback, "looks good")).To(Succeed())
		Expect(get(run).Annotations).NotTo(HaveKey(v1alpha1.AnnotationApprove), "the decision annotation is taken at once")
		waiting = waitForGate(run, "final", 5)
		Expect(sequence(waiting)).To(Equal([]string{"planner->gmail", "gmail->accounts-payable", "accounts-payable->crm",
			"crm->analysis", "analysis->"}))
		Expect(waiting.Status.PendingApproval.Completes.Reason).To(Equal(v1alpha1.ReasonCompleted))
		Expect(waiting.Status.Output).To(HavePrefix("Risk: medium"))

		Expect(annotate(bob, run, v1alpha1.AnnotationApprove, "final")).To(Succeed())
		done := waitForEnd(run)
		Expect(done.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted))
		Expect(records(done)).To(Equal([]string{"Approved plan by alice", "Approved final by bob"}))
		Expect(done.Status.Approvals[0].Feedback).To(Equal("looks good"))
		// The time it waited for people, in whole seconds as kubectl describe prints it.
		Expect(done.Status.Waited).NotTo(BeNil())
		Expect(string(*done.Status.Waited)).To(MatchRegexp(`^([0-9]+h)?([0-9]+m)?[0-9]+s$`))
	})

	It("sends the run back to one agent on reject with revise, with the feedback and the earlier output", func() {
		waitForGate(run, "plan", 1)
		Expect(annotate(alice, run, v1alpha1.AnnotationApprove, "plan")).To(Succeed())
		waitForGate(run, "final", 5)
		Expect(annotate(alice, run, v1alpha1.AnnotationReject, "final", v1alpha1.AnnotationRevise, "crm",
			v1alpha1.AnnotationFeedback, "check whether the disputes are resolved")).To(Succeed())
		again := waitForGate(run, "final", 7)
		Expect(sequence(again)[5:]).To(Equal([]string{"crm->analysis", "analysis->"}))
		Expect(again.Status.Output).To(HavePrefix("Risk: low"))
		Expect(annotate(alice, run, v1alpha1.AnnotationApprove, "final")).To(Succeed())
		done := waitForEnd(run)
		Expect(done.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted))
		Expect(records(done)).To(Equal([]string{"Approved plan by alice", "Rejected final by alice revise crm", "Approved final by alice"}))
	})

	It("refuses a hand-written decision queue", func() {
		err := annotate(carol, run, v1alpha1.AnnotationDecisions, `[{"seq":9,"action":"approve","gate":"plan","by":"alice"}]`)
		Expect(err).To(MatchError(ContainSubstring("the annotation agents.baton.dev/decisions is written only by Baton")))
	})

	It("applies decisions made while the operator was stopped, once each, in order", func() {
		waitForGate(run, "plan", 1)
		stopManager()
		Expect(annotate(alice, run, v1alpha1.AnnotationApprove, "final")).To(Succeed())
		Expect(annotate(bob, run, v1alpha1.AnnotationApprove, "plan")).To(Succeed())
		Expect(annotate(alice, run, v1alpha1.AnnotationApprove, "plan")).To(Succeed())
		queue, err := decisions.Read(get(run).Annotations)
		Expect(err).NotTo(HaveOccurred())
		Expect(queue).To(HaveLen(3))
		stopManager = startManager(controllerOptions)

		// In order: a stale approve of final, bob's approval of plan, then alice's, too late.
		waiting := waitForGate(run, "final", 5)
		Expect(records(waiting)).To(Equal([]string{"Approved plan by bob"}))
		Expect(waiting.Status.LastDecision).To(BeEquivalentTo(3))
		Eventually(func() []string { return eventsOf(run) }).Should(SatisfyAll(
			ContainElement("Warning DecisionIgnored: approve=final by alice changed nothing: gate final is not pending; the pending gate is plan"),
			ContainElement("Normal DecisionApplied: approve=plan by bob: gate plan passed"),
			ContainElement(ContainSubstring("Warning DecisionIgnored: approve=plan by alice changed nothing: the run is not waiting for approval"))))
		Consistently(func() []v1alpha1.ApprovalRecord { return get(run).Status.Approvals }, time.Second, 200*time.Millisecond).Should(HaveLen(1))
	})
})

var _ = Describe("A gate", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	gated := func(required int32) *v1alpha1.AgentConfig {
		return MakeConfig("gated", ns).Agents(
			MakeAgent("writer").HandsOffTo("publisher").Script(Says("draft").HandOff("publisher")),
			MakeAgent("publisher").Terminator().Script(Says("published")),
		).Gate("review", "writer", required).Obj()
	}

	DescribeTable("acts on its timeout",
		func(onTimeout string, phase v1alpha1.RunPhase, reason v1alpha1.TerminationReason, want []string) {
			cfg := MakeConfig("timed", ns).Agents(
				MakeAgent("writer").HandsOffTo("publisher").Script(Says("draft").HandOff("publisher")),
				MakeAgent("publisher").Terminator().Script(Says("published")),
			).Gate("review", "writer", 1).GateTimeout("review", 2*time.Second, onTimeout).Obj()
			run := MakeRun("r", ns).Config(cfg.Name).Obj()
			create(cfg, run)
			done := waitForEnd(run)
			Expect(done.Status.Phase).To(Equal(phase))
			Expect(done.Status.TerminationReason).To(Equal(reason))
			Expect(records(done)).To(Equal(want))
		},
		Entry("Reject ends the run ApprovalExpired", "Reject", v1alpha1.PhaseFailed, v1alpha1.ReasonApprovalExpired, []string(nil)),
		Entry("Approve lets the run go on, recorded as the timeout it was", "Approve", v1alpha1.PhaseSucceeded, v1alpha1.ReasonCompleted, []string{"TimedOut review by timeout"}),
	)

	It("does not count waiting time against the run's timeout", func() {
		cfg := MakeConfig("patient", ns).Agents(
			MakeAgent("writer").HandsOffTo("publisher").Script(Says("draft").HandOff("publisher")),
			MakeAgent("publisher").Terminator().Script(Says("published")),
		).Gate("review", "writer", 1).Timeout(2 * time.Second).Obj()
		run := MakeRun("r", ns).Config(cfg.Name).Obj()
		create(cfg, run)
		waitForGate(run, "review", 1)
		// The behaviour is that nothing happens: the run keeps waiting well past its 2 s timeout.
		Consistently(func() v1alpha1.RunPhase { return get(run).Status.Phase }, 3*time.Second, poll).
			Should(Equal(v1alpha1.PhaseAwaitingApproval))
		Expect(annotate(alice, run, v1alpha1.AnnotationApprove, "review")).To(Succeed())
		done := waitForEnd(run)
		Expect(done.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), done.Status.TerminationMessage)
		Expect(done.Status.Waited.OrZero()).To(BeNumerically(">=", 3*time.Second))
	})

	It("is skipped by a run with approvals: Skip", func() {
		cfg := gated(1)
		run := MakeRun("r", ns).Config(cfg.Name).SkipApprovals().Obj()
		create(cfg, run)
		Expect(waitForEnd(run).Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted))
	})
})

var _ = Describe("A question to a person", func() {
	It("pauses the run until a reply, which reaches the same agent as its input", func() {
		ns := newNamespace()
		cfg := MakeConfig("ask", ns).Agents(
			MakeAgent("support").Terminator().Script(
				Says("Which cluster is affected?").Emits("NEEDS_INPUT"),
				Says("Restarting checkout in prod-east.").When("prod-east")),
		).Signal("NEEDS_INPUT", v1alpha1.ActionAwaitInput).Obj()
		run := MakeRun("r", ns).Config(cfg.Name).Input("checkout is down").Obj()
		create(cfg, run)
		waiting := waitForPhase(run, v1alpha1.PhaseAwaitingInput)
		Expect(waiting.Status.PendingInput.Agent).To(Equal("support"))
		Expect(waiting.Status.PendingInput.Question).To(Equal("Which cluster is affected?"))
		Eventually(func() []string { return eventsOf(run) }).Should(ContainElement(ContainSubstring(
			"Reply: kubectl annotate agentrun r -n " + ns + " agents.baton.dev/reply=<answer>")))
		Expect(annotate(carol, run, v1alpha1.AnnotationReply, "prod-east")).To(Succeed())
		done := waitForEnd(run)
		Expect(done.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted))
		Expect(done.Status.Output).To(Equal("Restarting checkout in prod-east."))
		Expect(records(done)).To(Equal([]string{"Replied by carol"}))
		Expect(done.Status.PendingInput).To(BeNil())
	})
})

var _ = Describe("Without the admission webhook", func() {
	It("still takes decisions, once and in order, recorded as unverified", func() {
		// The webhook lets the operator's own requests through untouched, as a cluster without
		// the webhook would let everyone's: this client is the operator's identity.
		operator, err := client.New(operatorConfig, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		ns := newNamespace()
		cfg := MakeConfig("plain", ns).Agents(
			MakeAgent("writer").HandsOffTo("publisher").Script(Says("draft").HandOff("publisher")),
			MakeAgent("publisher").Terminator().Script(Says("published")),
		).Gate("review", "writer", 1).Obj()
		run := MakeRun("r", ns).Config(cfg.Name).Obj()
		create(cfg, run)
		waitForGate(run, "review", 1)
		Expect(annotate(operator, run, v1alpha1.AnnotationApprove, "review", v1alpha1.AnnotationFeedback, "fine")).To(Succeed())
		done := waitForEnd(run)
		Expect(done.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted))
		Expect(records(done)).To(Equal([]string{"Approved review by " + v1alpha1.ByUnverified}))
		Expect(done.Annotations).NotTo(HaveKey(v1alpha1.AnnotationApprove))
		Expect(done.Status.LastDecision).To(BeEquivalentTo(1))
	})
})
