package integration

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
)

var _ = Describe("A session", func() {
	It("numbers its turns as they are created, runs them one at a time in that order, and ends at its maxTurns", func() {
		ns := newNamespace()
		// The gate holds the first turn at work while the second is created.
		cfg := MakeConfig("chat", ns).Agents(
			MakeAgent("writer").HandsOffTo("publisher").Script(Says("draft").HandOff("publisher").Tokens(10)),
			MakeAgent("publisher").Terminator().Script(Says("published").Tokens(10)),
		).Gate("review", "writer", 1).Obj()
		session := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "ticket", Namespace: ns},
			Spec: v1alpha1.AgentSessionSpec{ConfigRef: v1alpha1.ConfigReference{Name: "chat"},
				Limits: &v1alpha1.SessionLimits{MaxTurns: ptr.To[int32](2)}}}
		create(cfg, session)
		turn := func(name string) *v1alpha1.AgentRun {
			r := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: v1alpha1.AgentRunSpec{Session: &v1alpha1.SessionReference{Name: "ticket"}, Input: "question " + name}}
			create(r)
			return r
		}

		first := turn("ticket-t1")
		waitForGate(first, "review", 1)
		second := turn("ticket-t2")
		got := get(second)
		Expect(got.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationTurn, "2"))
		Expect(got.Labels).To(HaveKeyWithValue(v1alpha1.LabelSession, "ticket"))
		Expect(got.Spec.ConfigRef.Name).To(Equal("chat"), "configRef comes from the session")
		Expect(get(first).Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationTurn, "1"))
		Eventually(func(g Gomega) {
			r := get(second)
			g.Expect(r.Status.Phase).To(Equal(v1alpha1.PhaseQueued))
			c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionProgressing)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(v1alpha1.ReasonSessionBusy))
			g.Expect(c.Message).To(Equal("session ticket: waits for turn ticket-t1 to end"))
		}, runTimeout, poll).Should(Succeed())
		Eventually(func(g Gomega) {
			s := &v1alpha1.AgentSession{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(session), s)).To(Succeed())
			g.Expect(s.Status.Phase).To(Equal(v1alpha1.SessionActive))
			g.Expect(s.Status.Turns).To(BeEquivalentTo(2))
			g.Expect(s.Status.LastRun).To(Equal("ticket-t2"))
		}, runTimeout, poll).Should(Succeed())

		Expect(annotate(k8sClient, first, v1alpha1.AnnotationApprove, "review")).To(Succeed())
		Expect(waitForEnd(first).Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))
		waitForGate(second, "review", 1)
		Expect(annotate(k8sClient, second, v1alpha1.AnnotationApprove, "review")).To(Succeed())
		Expect(waitForEnd(second).Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))

		By("ending at maxTurns: a turn created after fails SessionEnded")
		s := &v1alpha1.AgentSession{}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(session), s)).To(Succeed())
			g.Expect(s.Status.Phase).To(Equal(v1alpha1.SessionEnded))
			g.Expect(s.Status.EndReason).To(Equal(v1alpha1.SessionReasonMaxTurns))
			g.Expect(s.Status.TokensUsed).To(BeEquivalentTo(40))
		}, runTimeout, poll).Should(Succeed())
		for _, r := range []*v1alpha1.AgentRun{first, second} {
			Expect(get(r).OwnerReferences).To(ContainElement(HaveField("UID", s.UID)), "%s is owned by its session", r.Name)
		}
		third := waitForEnd(turn("ticket-t3"))
		Expect(third.Status.TerminationReason).To(Equal(v1alpha1.ReasonSessionEnded))
		Expect(third.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationTurn, "3"))
	})

	It("refuses a turn of a session that does not exist, or with another config", func() {
		ns := newNamespace()
		create(&v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "ticket", Namespace: ns},
			Spec: v1alpha1.AgentSessionSpec{ConfigRef: v1alpha1.ConfigReference{Name: "chat"}}})
		missing := MakeRun("t", ns).Obj()
		missing.Spec.Session = &v1alpha1.SessionReference{Name: "nope"}
		Expect(k8sClient.Create(ctx, missing)).To(MatchError(ContainSubstring("AgentSession nope does not exist in namespace " + ns)))
		other := MakeRun("t", ns).Config("helpdesk").Obj()
		other.Spec.Session = &v1alpha1.SessionReference{Name: "ticket"}
		Expect(k8sClient.Create(ctx, other)).To(MatchError(ContainSubstring("a turn of AgentSession ticket runs its config chat, not helpdesk")))
		from := MakeRun("t", ns).Obj()
		from.Spec.Session = &v1alpha1.SessionReference{Name: "ticket"}
		from.Spec.From = &v1alpha1.RunFrom{Run: "earlier", Step: 1}
		Expect(k8sClient.Create(ctx, from)).To(MatchError(ContainSubstring("a turn of a session goes on from the turns before it")))
	})
})
