package integration

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/baton-dev/baton/agents/httpagent"
	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
	"github.com/baton-dev/baton/test/fakes"
)

var _ = Describe("Status writes", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("take several quick steps of a run at once, and every step is in the transcript as it ends", func() {
		turn := func(to string) *TurnWrapper { return Says("passing on").HandOff(to) }
		cfg := tolerant(MakeConfig("quick", ns).Agents(
			MakeAgent("a").HandsOffTo("b").Script(turn("b")),
			MakeAgent("b").HandsOffTo("a").Script(turn("a")),
		).MaxHandoffs(20)).Obj()
		run := MakeRun("r", ns).Config(cfg.Name).Obj()
		create(cfg, run)
		done := waitForEnd(run)
		Expect(done.Status.TerminationReason).To(Equal(v1alpha1.ReasonMaxHandoffsExceeded))
		Expect(done.Status.StepCount).To(BeEquivalentTo(20))
		Expect(transcriptOf(done)).To(HaveLen(20))
		// 20 steps of a few milliseconds: written once a batch period, and at the end. One
		// write per step would be 20.
		Expect(writesOf(done)).To(BeNumerically("<=", 5))
	})

	It("held when the operator stops are applied from the transcript, and no agent is called twice", func() {
		agent := fakes.NewHTTPAgent(
			fakes.HTTPAnswer{Body: map[string]any{"output": "one", "handoff": "b"}},
			fakes.HTTPAnswer{Body: map[string]any{"output": "two", "handoff": "a"}},
			fakes.HTTPAnswer{Body: map[string]any{"output": "three", "handoff": "b"}},
			fakes.HTTPAnswer{Body: map[string]any{"output": "four", "handoff": "c"}},
		)
		DeferCleanup(agent.Close)
		httpAgent := func(name string, to ...string) *AgentWrapper {
			a := MakeAgent(name).Provider(v1alpha1.ProviderHTTP).HandsOffTo(to...)
			a.Model.Endpoint = agent.URL + "/step"
			return a
		}
		cfg := MakeConfig("relay", ns).Agents(httpAgent("a", "b", "c"), httpAgent("b", "a", "c"),
			MakeAgent("c").Terminator().Script(Says("done").Delay(2*time.Second))).Obj()
		run := MakeRun("r", ns).Config(cfg.Name).Input("go").Obj()

		By("running with a batch period longer than the test, so that the first four steps are held")
		stopManager()
		long := controllerOptions
		long.StatusBatchPeriod = time.Hour
		stopManager = startManager(long)
		defaults := false
		DeferCleanup(func() {
			if !defaults { // the spec failed before the restart: the specs after it get the usual operator
				stopManager()
				stopManager = startManager(controllerOptions)
			}
		})
		create(cfg, run)
		Eventually(func() int { return len(transcriptOf(get(run))) }, runTimeout, poll).Should(Equal(4))
		stopManager()
		stopped := get(run)
		Expect(stopped.Status.StepCount).To(BeZero(), "the four steps were held, not written")

		By("restarting with the default batch period: the four steps come from the transcript")
		stopManager, defaults = startManager(controllerOptions), true
		done := waitForEnd(run)
		Expect(done.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), done.Status.TerminationMessage)
		Expect(sequence(done)).To(HaveLen(5))
		Expect(sequence(done)[:4]).To(Equal([]string{"a->b", "b->a", "a->b", "b->c"}))
		Expect(done.Status.Output).To(Equal("done"))
		calls := agent.Calls()
		Expect(calls).To(HaveLen(4), "each HTTP step called once")
		for i, c := range calls {
			Expect(c.IdempotencyKey).To(Equal(httpagent.IdempotencyKey(string(done.UID), int32(i+1))))
		}
		Expect(transcriptOf(done)).To(HaveLen(5))
	})
})
