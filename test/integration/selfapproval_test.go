package integration

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
)

// createdByRefused is what the API server answers anyone but Baton who touches the annotation
// that records a run's creator.
const createdByRefused = "the annotation agents.baton.dev/created-by is written only by Baton, when the run is created: it records who created the run, and nobody may set, change or remove it"

// mayCreateRuns lets the users create runs in the namespace, with the shipped editor role's
// rules.
func mayCreateRuns(ns string, users ...string) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "agentrun_editor_role.yaml"))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	editor := &rbacv1.ClusterRole{}
	ExpectWithOffset(1, yaml.Unmarshal(data, editor)).To(Succeed())
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "agentrun-editor", Namespace: ns}, Rules: editor.Rules}
	create(role)
	for _, user := range users {
		create(&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "agentrun-editor-" + user, Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		})
		// The API server's authorizer learns of new bindings from its cache: wait until it has.
		EventuallyWithOffset(1, func() bool {
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: v1alpha1.GroupVersion.Group, Resource: "agentruns"}}}
			return k8sClient.Create(ctx, review) == nil && review.Status.Allowed
		}).Should(BeTrue(), "%s may create runs in %s", user, ns)
	}
}

// setCreatedBy sets (or, with nil, removes) a run's created-by annotation as the client's user.
func setCreatedBy(as client.Client, run *v1alpha1.AgentRun, value any) error {
	obj := &v1alpha1.AgentRun{}
	obj.Name, obj.Namespace = run.Name, run.Namespace
	return as.Patch(ctx, obj, client.RawPatch("application/merge-patch+json", mustJSON(map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{v1alpha1.AnnotationCreatedBy: value}},
	})))
}

var _ = Describe("A gate with allowSelfApproval: false", func() {
	var ns string
	var cfg *v1alpha1.AgentConfig
	BeforeEach(func() {
		ns = newNamespace()
		mayCreateRuns(ns, "alice")
		cfg = MakeConfig("separated", ns).Agents(
			MakeAgent("writer").HandsOffTo("publisher").Script(Says("draft").HandOff("publisher")),
			MakeAgent("publisher").Terminator().Script(Says("published")),
		).Gate("review", "writer", 1).AllowSelfApproval("review", false).Obj()
	})

	It("refuses the approval of the run's creator, says why, and passes with another approver's", func() {
		create(cfg)
		run := MakeRun("r", ns).Config(cfg.Name).Obj()
		Expect(alice.Create(ctx, run)).To(Succeed())
		waitForGate(run, "review", 1)
		Eventually(func() []string { return eventsOf(run) }).Should(ContainElement(ContainSubstring(
			"waiting at gate review for 1 approval(s) from people other than alice, who created the run.")))

		Expect(annotate(alice, run, v1alpha1.AnnotationApprove, "review")).To(Succeed())
		msg := "approve=review by alice changed nothing: alice created this run, and gate review needs an approver other than the run's creator (allowSelfApproval: false)"
		Expect(decisionCondition(run, v1alpha1.ReasonSelfApproval)).To(Equal(msg))
		Expect(meta.FindStatusCondition(get(run).Status.Conditions, v1alpha1.ConditionDecision).Status).To(Equal(metav1.ConditionFalse))
		Eventually(func() []string { return eventsOf(run) }).Should(ContainElement("Warning DecisionIgnored: " + msg))
		waiting := get(run)
		Expect(waiting.Status.Phase).To(Equal(v1alpha1.PhaseAwaitingApproval), "the run still waits at the gate")
		Expect(waiting.Status.PendingApproval.ApprovedBy).To(BeEmpty())
		Expect(waiting.Status.Approvals).To(BeEmpty())

		Expect(annotate(bob, run, v1alpha1.AnnotationApprove, "review")).To(Succeed())
		done := waitForEnd(run)
		Expect(done.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), done.Status.TerminationMessage)
		Expect(records(done)).To(Equal([]string{"Approved review by bob"}))
	})
})

var _ = Describe("The creator of a run", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		mayCreateRuns(ns, "alice")
	})

	It("is recorded when the run is created, whatever the request says, and nobody but Baton may change it", func() {
		run := MakeRun("r", ns).Config("absent").Obj()
		run.Annotations = map[string]string{v1alpha1.AnnotationCreatedBy: "bob"}
		Expect(alice.Create(ctx, run)).To(Succeed())
		Expect(run.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationCreatedBy, "alice"), "the forged creator is replaced")

		Expect(setCreatedBy(alice, run, "bob")).To(MatchError(ContainSubstring(createdByRefused)))
		Expect(setCreatedBy(alice, run, nil)).To(MatchError(ContainSubstring(createdByRefused)))
		Expect(setCreatedBy(k8sClient, run, "bob")).To(MatchError(ContainSubstring(createdByRefused)), "a cluster admin is no exception")
		Expect(get(run).Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationCreatedBy, "alice"))

		// Other writes go on as before.
		Expect(annotate(alice, run, "example.com/team", "payments")).To(Succeed())
		Expect(get(run).Annotations).To(SatisfyAll(
			HaveKeyWithValue(v1alpha1.AnnotationCreatedBy, "alice"), HaveKeyWithValue("example.com/team", "payments")))
	})
})
