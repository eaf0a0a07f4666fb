package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/notify"
	. "github.com/baton-dev/baton/test/builders"
)

// cloudEvents is a receiver of CloudEvents that keeps what it took, in order.
type cloudEvents struct {
	mu     sync.Mutex
	events []notify.Event
}

func (c *cloudEvents) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var ce struct {
		Type string       `json:"type"`
		Data notify.Event `json:"data"`
	}
	if json.Unmarshal(body, &ce) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	ce.Data.Type = v1alpha1.NotifyEvent(ce.Type[len(notify.TypePrefix):])
	c.mu.Lock()
	c.events = append(c.events, ce.Data)
	c.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (c *cloudEvents) taken() []notify.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]notify.Event(nil), c.events...)
}

var _ = Describe("Notifications", func() {
	It("escalate a gate nobody decides, naming its deciders, and say that its timeout decided it", func() {
		ns := newNamespace()
		sink := &cloudEvents{}
		srv := httptest.NewServer(sink)
		DeferCleanup(srv.Close)
		cfg := MakeConfig("timed", ns).Agents(
			MakeAgent("writer").HandsOffTo("publisher").Script(Says("draft").HandOff("publisher")),
			MakeAgent("publisher").Terminator().Script(Says("published")),
		).Gate("review", "writer", 1).GateTimeout("review", 4*time.Second, "Approve").Obj()
		cfg.Spec.Approvals[0].Escalate = &v1alpha1.GateEscalation{After: "1s", To: v1alpha1.Deciders{Groups: []string{"oncall-leads"}}}
		cfg.Spec.Notify = []v1alpha1.NotifySink{{Name: "ops", URL: srv.URL, Format: v1alpha1.NotifyCloudEvents}}
		run := MakeRun("r", ns).Config(cfg.Name).Obj()
		create(cfg, run)
		Expect(waitForEnd(run).Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))

		var types []v1alpha1.NotifyEvent
		Eventually(func() []v1alpha1.NotifyEvent {
			types = nil
			for _, e := range sink.taken() {
				types = append(types, e.Type)
			}
			return types
		}, "30s", "100ms").Should(Equal([]v1alpha1.NotifyEvent{v1alpha1.NotifyGateOpened, v1alpha1.NotifyGateEscalated,
			v1alpha1.NotifyGateDecided, v1alpha1.NotifyRunEnded}))
		got := sink.taken()
		Expect(got[0].Waiting).NotTo(BeNil())
		Expect(got[0].Waiting.Output).To(Equal("draft"))
		Expect(got[1].Deciders).NotTo(BeNil())
		Expect(got[1].Deciders.Groups).To(ConsistOf("oncall-leads"))
		Expect(got[2].Decision).To(Equal(v1alpha1.RecordTimedOut), "a timeout is said as such")
		Expect(got[2].Reason).To(Equal("by timeout"))
		Expect(got[3].Decision).To(Equal(string(v1alpha1.PhaseSucceeded)))
		Eventually(func() []v1alpha1.SinkStatus {
			c := &v1alpha1.AgentConfig{}
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(cfg), c)).To(Succeed())
			return c.Status.Notifications
		}, "30s", "200ms").Should(ConsistOf(HaveField("Sent", BeEquivalentTo(4))))
	})
})
