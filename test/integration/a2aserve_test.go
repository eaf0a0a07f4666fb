package integration

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/a2aserver"
	. "github.com/baton-dev/baton/test/builders"
)

// a2aCaller is a user who may start the namespace's runs and read its configs.
func a2aCaller(ns, name string, verbs ...string) *rest.Config {
	u, err := testEnv.AddUser(envtest.User{Name: name}, nil)
	Expect(err).NotTo(HaveOccurred())
	if len(verbs) > 0 {
		Expect(k8sClient.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"agents.baton.dev"}, Resources: []string{"agentruns"}, Verbs: verbs},
				{APIGroups: []string{"agents.baton.dev"}, Resources: []string{"agentconfigs"}, Verbs: []string{"get"}},
			}})).To(Succeed())
		Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name}}})).To(Succeed())
		// The API server's authorizer learns of the binding from its own watch: wait until it
		// grants what the binding gives, lest a busy API server refuse the caller's first call.
		Eventually(func(g Gomega) {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: name,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Group: "agents.baton.dev", Resource: "agentruns", Verb: verbs[0]}}}
			g.Expect(k8sClient.Create(ctx, sar)).To(Succeed())
			g.Expect(sar.Status.Allowed).To(BeTrue())
		}).Should(Succeed())
	}
	return u.Config()
}

// a2aClientOf is an A2A client of the team at base, as the user of cfg, in the protocol version
// given ("1.0" or "0.3").
func a2aClientOf(cfg *rest.Config, base, version string) *a2aclient.Client {
	httpClient := transcriptClient(cfg)
	httpClient.Timeout = 0 // streams last as long as their tasks
	card, err := (&agentcard.Resolver{Client: httpClient}).Resolve(ctx, base)
	Expect(err).NotTo(HaveOccurred())
	var keep []*a2a.AgentInterface
	for _, i := range card.SupportedInterfaces {
		if string(i.ProtocolVersion) == version {
			keep = append(keep, i)
		}
	}
	Expect(keep).To(HaveLen(1), "the card offers one interface of A2A %s", version)
	card.SupportedInterfaces = keep
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(httpClient),
		a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{Client: httpClient}))
	Expect(err).NotTo(HaveOccurred())
	return c
}

func text(s string) *a2a.Message { return a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(s)) }

// within is a context that ends after a minute, or with the spec.
func within() context.Context {
	c, cancel := context.WithTimeout(ctx, time.Minute)
	DeferCleanup(cancel)
	return c
}

var _ = Describe("A team served as an A2A agent", Ordered, func() {
	var ns string
	// base is the team's A2A address, once the transcript API listens.
	base := func() string {
		Eventually(transcriptAddr.Load, time.Minute).ShouldNot(BeNil())
		return transcriptURL("/namespaces/" + ns + "/agentconfigs/support")
	}
	var caller, stranger *rest.Config
	BeforeAll(func() {
		ns = newNamespace()
		cfg := MakeConfig("support", ns).Signal("ASK", v1alpha1.ActionAwaitInput).Agents(
			MakeAgent("support").Terminator().Script(
				Says("Which cluster?").When("restart").Emits("ASK"),
				Says("restarted prod-east").When("prod-east"),
				Says("all green").When("status"),
				Says("slowly done").When("slow").Delay(2*time.Second),
			)).Obj()
		cfg.Spec.A2A = &v1alpha1.A2AServing{Expose: true, Description: "Restarts clusters"}
		create(cfg)
		caller = a2aCaller(ns, "a2a-caller", "create")
		stranger = a2aCaller(ns, "a2a-stranger")
	})

	It("serves the team's card to whoever may get the config, naming both protocol versions", func() {
		ctx := within()
		card, err := (&agentcard.Resolver{Client: transcriptClient(caller)}).Resolve(ctx, base())
		Expect(err).NotTo(HaveOccurred())
		Expect(card.Name).To(Equal("support"))
		Expect(card.Description).To(Equal("Restarts clusters"))
		Expect(card.Capabilities.Streaming).To(BeTrue())
		Expect(card.Skills).To(HaveLen(1))
		var versions []string
		for _, i := range card.SupportedInterfaces {
			versions = append(versions, string(i.ProtocolVersion))
		}
		Expect(versions).To(ConsistOf("1.0", "0.3"))

		_, err = (&agentcard.Resolver{Client: transcriptClient(stranger)}).Resolve(ctx, base())
		var notOK *agentcard.ErrStatusNotOK
		Expect(errors.As(err, &notOK)).To(BeTrue(), "%v", err)
		Expect(notOK.StatusCode).To(Equal(http.StatusForbidden))
		_, err = (&agentcard.Resolver{Client: &http.Client{Transport: transcriptClient(stranger).Transport}}).Resolve(ctx,
			transcriptURL("/namespaces/"+ns+"/agentconfigs/nowhere"))
		Expect(errors.As(err, &notOK)).To(BeTrue(), "%v", err)
	})

	for _, version := range []string{"1.0", "0.3"} {
		It("starts a run for a message, asks for input, and the reply continues the same task (A2A "+version+")", func() {
			ctx := within()
			c := a2aClientOf(caller, base(), version)
			res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: text("please restart the cluster")})
			Expect(err).NotTo(HaveOccurred())
			task := res.(*a2a.Task)
			Expect(task.Status.State).To(Equal(a2a.TaskStateInputRequired))
			Expect(task.Status.Message.Parts[0].Text()).To(Equal("Which cluster?"))

			run := &v1alpha1.AgentRun{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: string(task.ID)}, run)).To(Succeed())
			Expect(run.Annotations[v1alpha1.AnnotationCreatedBy]).To(Equal("a2a-caller"), "the run records who asked")
			Expect(run.Annotations[v1alpha1.AnnotationA2AContext]).To(Equal(task.ContextID))
			Expect(run.Spec.Input).To(Equal("please restart the cluster"))

			res, err = c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.NewTextPart("prod-east"))})
			Expect(err).NotTo(HaveOccurred())
			done := res.(*a2a.Task)
			Expect(done.ID).To(Equal(task.ID))
			Expect(done.Status.State).To(Equal(a2a.TaskStateCompleted))
			Expect(done.Artifacts).To(HaveLen(1))
			Expect(done.Artifacts[0].Parts[0].Text()).To(Equal("restarted prod-east"))
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(run), run)).To(Succeed())
			Expect(run.Status.Approvals[len(run.Status.Approvals)-1].By).To(Equal("a2a-caller"), "the reply is the caller's")

			got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
			Expect(err).NotTo(HaveOccurred())
			Expect(got.Status.State).To(Equal(a2a.TaskStateCompleted))
			_, err = c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.NewTextPart("again"))})
			Expect(err).To(MatchError(ContainSubstring("ended Succeeded")))
		})

		It("streams a task's progress to its end, and follows a task again when subscribed (A2A "+version+")", func() {
			ctx := within()
			c := a2aClientOf(caller, base(), version)
			var states []a2a.TaskState
			var output string
			for ev, err := range c.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: text("status please")}) {
				Expect(err).NotTo(HaveOccurred())
				switch e := ev.(type) {
				case *a2a.Task:
					states = append(states, e.Status.State)
				case *a2a.TaskStatusUpdateEvent:
					states = append(states, e.Status.State)
				case *a2a.TaskArtifactUpdateEvent:
					output = e.Artifact.Parts[0].Text()
				}
			}
			Expect(states[len(states)-1]).To(Equal(a2a.TaskStateCompleted))
			Expect(output).To(Equal("all green"))

			res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: text("slow, please"), Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
			Expect(err).NotTo(HaveOccurred())
			slow := res.(*a2a.Task)
			Expect(slow.Status.State.Terminal()).To(BeFalse())
			var last a2a.TaskState
			for ev, err := range c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: slow.ID}) {
				Expect(err).NotTo(HaveOccurred())
				if e, ok := ev.(*a2a.TaskStatusUpdateEvent); ok {
					last = e.Status.State
				}
			}
			Expect(last).To(Equal(a2a.TaskStateCompleted))
		})
	}

	It("cancels a task by cancelling its run, and finds the task a message started when it is sent again", func() {
		ctx := within()
		c := a2aClientOf(caller, base(), "1.0")
		msg := text("restart it")
		res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
		Expect(err).NotTo(HaveOccurred())
		task := res.(*a2a.Task)
		again, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
		Expect(err).NotTo(HaveOccurred())
		Expect(again.(*a2a.Task).ID).To(Equal(task.ID), "the same message is the same task")

		cancelled, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
		Expect(err).NotTo(HaveOccurred())
		Expect(cancelled.Status.State).To(Equal(a2a.TaskStateCanceled))
		run := &v1alpha1.AgentRun{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: string(task.ID)}, run)).To(Succeed())
		Expect(run.Status.Phase).To(Equal(v1alpha1.PhaseCancelled))
		_, err = c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
		Expect(err).NotTo(HaveOccurred(), "cancelling a cancelled task again is no error")
	})

	It("refuses a caller who may not get the config or create runs, and hides one caller's tasks from another", func() {
		ctx := within()
		c := a2aClientOf(caller, base(), "1.0")
		res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: text("status of mine")})
		Expect(err).NotTo(HaveOccurred())
		mine := res.(*a2a.Task)

		// The stranger may not get the config: the endpoint answers them nothing, before it reads
		// anything.
		card, err := (&agentcard.Resolver{Client: transcriptClient(caller)}).Resolve(ctx, base())
		Expect(err).NotTo(HaveOccurred())
		httpClient := transcriptClient(stranger)
		other, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(httpClient))
		Expect(err).NotTo(HaveOccurred())
		_, err = other.SendMessage(ctx, &a2a.SendMessageRequest{Message: text("status")})
		Expect(err).To(MatchError(ContainSubstring("403")))
		_, err = other.GetTask(ctx, &a2a.GetTaskRequest{ID: mine.ID})
		Expect(err).To(MatchError(ContainSubstring("403")))

		// A reader of the config who may not create runs is refused a new task, and is not told
		// that the caller's task exists.
		reader, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(transcriptClient(a2aCaller(ns, "a2a-reader", "list"))))
		Expect(err).NotTo(HaveOccurred())
		_, err = reader.SendMessage(ctx, &a2a.SendMessageRequest{Message: text("status")})
		Expect(errors.Is(err, a2a.ErrUnauthorized)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring(`User "a2a-reader" cannot create resource "agentruns"`))
		_, err = reader.GetTask(ctx, &a2a.GetTaskRequest{ID: mine.ID})
		Expect(errors.Is(err, a2a.ErrTaskNotFound)).To(BeTrue(), "%v", err)
		_, err = reader.CancelTask(ctx, &a2a.CancelTaskRequest{ID: mine.ID})
		Expect(errors.Is(err, a2a.ErrTaskNotFound)).To(BeTrue(), "%v", err)

		anonymous := &http.Client{Transport: &http.Transport{TLSClientConfig: httpClient.Transport.(*http.Transport).TLSClientConfig.Clone()}}
		anonymous.Transport.(*http.Transport).TLSClientConfig.Certificates = nil
		nobody, err := a2aclient.NewFromCard(context.Background(), card, a2aclient.WithJSONRPCTransport(anonymous))
		Expect(err).NotTo(HaveOccurred())
		_, err = nobody.GetTask(ctx, &a2a.GetTaskRequest{ID: mine.ID})
		Expect(err).To(HaveOccurred())
	})

	It("accepts a ServiceAccount's token only when it was made for Baton's audience", func() {
		ctx := within()
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "order-clerk", Namespace: ns}}
		Expect(k8sClient.Create(ctx, sa)).To(Succeed())
		Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "order-clerk", Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "a2a-caller"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}}})).To(Succeed())
		cardAs := func(audiences ...string) int {
			req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: audiences}}
			Expect(k8sClient.SubResource("token").Create(ctx, sa, req)).To(Succeed())
			rt, err := rest.TransportFor(&rest.Config{BearerToken: req.Status.Token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
			Expect(err).NotTo(HaveOccurred())
			resp, err := (&http.Client{Transport: rt}).Get(base() + "/.well-known/agent-card.json")
			Expect(err).NotTo(HaveOccurred())
			Expect(resp.Body.Close()).To(Succeed())
			return resp.StatusCode
		}
		Expect(cardAs()).To(Equal(http.StatusUnauthorized), "a token made for the API server")
		Expect(cardAs("https://vault.example")).To(Equal(http.StatusUnauthorized), "a token made for another service")
		Expect(cardAs(a2aserver.DefaultTokenAudience)).To(Equal(http.StatusOK), "a token made for Baton")
	})
})
