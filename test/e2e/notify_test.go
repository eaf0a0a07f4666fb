package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/baton-dev/baton/internal/notify"
)

// hookReceiver is a CloudEvents receiver on loopback, as a team's incident tool would run one:
// it checks each request's Baton-Signature with the key it shares with the sink's Secret,
// answers 500 to the first delivery, and keeps the events it took, in order.
type hookReceiver struct {
	addr string
	key  []byte
	srv  *http.Server

	mu       sync.Mutex
	failed   bool
	bad      int
	received []receivedEvent
}

type receivedEvent struct {
	ID, Type string
	Data     notify.Event
}

func newHookReceiver(key string) *hookReceiver {
	h := &hookReceiver{addr: freeAddress(), key: []byte(key)}
	h.up()
	return h
}

// up listens at the receiver's address; down stops listening: its sink cannot be reached.
func (h *hookReceiver) up() {
	l, err := net.Listen("tcp", h.addr)
	Expect(err).NotTo(HaveOccurred())
	h.srv = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = h.srv.Serve(l) }()
}

func (h *hookReceiver) down() { Expect(h.srv.Close()).To(Succeed()) }

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	if notify.Verify(h.key, body, r.Header.Get(notify.SignatureHeader), time.Now(), 5*time.Minute) != nil ||
		r.Header.Get("Content-Type") != notify.ContentCloudEvents {
		h.bad++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if !h.failed {
		h.failed = true
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	var ce struct {
		ID          string       `json:"id"`
		Type        string       `json:"type"`
		SpecVersion string       `json:"specversion"`
		Data        notify.Event `json:"data"`
	}
	if json.Unmarshal(body, &ce) != nil || ce.SpecVersion != "1.0" {
		h.bad++
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	h.received = append(h.received, receivedEvent{ID: ce.ID, Type: ce.Type, Data: ce.Data})
	w.WriteHeader(http.StatusAccepted)
}

// types are the types of the events taken, each once, in the order first taken.
func (h *hookReceiver) types() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, e := range h.received {
		if !seen[e.ID] {
			seen[e.ID] = true
			out = append(out, e.Type)
		}
	}
	return out
}

var _ = Describe("Notifications reach a receiver that fails, goes down and comes back", Ordered, func() {
	const ns = "notify"

	It("delivers a gate's opening, its decision and the run's end, signed, in order, across a restart", func() {
		hook := newHookReceiver("whsec-e2e")
		DeferCleanup(func() { _ = hook.srv.Close() })
		kubectl("create", "namespace", ns)
		kubectl("apply", "-n", ns, "-f", manifest("notify.yaml", `apiVersion: v1
kind: Secret
metadata: {name: hooks, labels: {agents.baton.dev/api-key: "true"}}
stringData: {ops: "http://`+hook.addr+`/events", signingKey: whsec-e2e}
---
apiVersion: agents.baton.dev/v1alpha1
kind: AgentConfig
metadata: {name: refunds}
spec:
  entrypoint: planner
  agents:
  - {name: planner, handoffs: [payer], script: [{output: "Refund 12 EUR for order 1001", handoff: payer}]}
  - {name: payer, terminator: true, script: [{output: "refunded"}]}
  approvals:
  - {name: plan, after: planner}
  notify:
  - name: ops
    urlFrom: {name: hooks, key: ops}
    secretRef: {name: hooks, key: signingKey}
    format: CloudEvents
---
apiVersion: agents.baton.dev/v1alpha1
kind: AgentRun
metadata: {name: refund-1001}
spec: {configRef: {name: refunds}, input: "refund order 1001"}
`))
		By("the gate's opening arrives once its first delivery, refused with 500, is tried again")
		Eventually(hook.types, "60s", "200ms").Should(Equal([]string{"dev.baton.GateOpened"}))
		hook.mu.Lock()
		opened := hook.received[0].Data
		hook.mu.Unlock()
		Expect(opened.Gate).To(Equal("plan"))
		Expect(opened.Waiting).NotTo(BeNil())
		Expect(opened.Waiting.Output).To(Equal("Refund 12 EUR for order 1001"), "what waits for the decision, whole")

		By("the receiver goes down, the gate is decided, and the operator is killed before it could deliver")
		hook.down()
		kubectl("annotate", "-n", ns, "agentrun/refund-1001", "agents.baton.dev/approve=plan")
		kubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=Succeeded", "--timeout=60s", "agentrun/refund-1001")
		killManager()
		hook.up()

		By("the decision and the run's end arrive after the restart, in order")
		Eventually(hook.types, "90s", "250ms").Should(Equal([]string{"dev.baton.GateOpened", "dev.baton.GateDecided", "dev.baton.RunEnded"}))
		Expect(hook.bad).To(BeZero(), "every request was signed with the sink's key")
		Eventually(func() string {
			return jsonpath("agentconfig", "refunds", ns, "{.status.notifications[0].sent}")
		}, "60s", "500ms").Should(Equal("3"))
		Expect(strings.ToLower(kubectl("get", "agentrun", "refund-1001", "-n", ns, "-o", "jsonpath={.status}"))).
			NotTo(ContainSubstring("notif"), "nothing about notifications is written to the run")
	})
})
