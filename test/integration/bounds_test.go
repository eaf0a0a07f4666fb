package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/transcriptclient"
	. "github.com/baton-dev/baton/test/builders"
	"github.com/baton-dev/baton/test/fakes"
)

// Every byte a tenant can make Baton keep is bounded in the unit it is stored in: an answer of
// megabytes of HTML is cut by its stored size, stored once, counted against the run's
// transcript budget, and read back a page at a time.
var _ = Describe("A run whose model answers megabytes of HTML", func() {
	var ns string
	var server *fakes.OpenAI
	var cfg *v1alpha1.AgentConfig
	// table is 2 MB of HTML, and a number to tell answers apart.
	table := func(n int) string {
		return fmt.Sprintf("<p>%d</p>", n) + strings.Repeat("<tr><td>row</td><td>&amp; \"quoted\"</td></tr>\n", (2<<20)/48)
	}
	BeforeEach(func() {
		ns = newNamespace()
		server = fakes.NewOpenAI()
		DeferCleanup(server.Close)
		for i := range 3 {
			server.ReplyTo("reader", fakes.Reply{Content: table(i), Tokens: 10, ToolCalls: []fakes.ToolCall{{Name: "transfer_to_writer", Args: `{"reason":"read"}`}}})
			server.ReplyTo("writer", fakes.Reply{Content: table(10 + i), Tokens: 10, ToolCalls: []fakes.ToolCall{{Name: "transfer_to_reader", Args: `{"reason":"more"}`}}})
		}
		cfg = MakeConfig("tables", ns).Agents(
			modelAgent("reader", server).HandsOffTo("writer"),
			modelAgent("writer", server).HandsOffTo("reader"),
		).Allow(10, "reader", "writer").MaxSteps(5).Obj()
		create(apiKeySecret(ns), cfg)
	})

	It("ends with a reason within seconds, each record bounded and each output stored once, read back a page at a time", func() {
		run := MakeRun("tables", ns).Config(cfg.Name).Obj()
		create(run)
		done := waitForEnd(run)
		Expect(done.Status.TerminationReason).To(Equal(v1alpha1.ReasonMaxStepsExceeded), done.Status.TerminationMessage)
		Expect(done.Status.CompletionTime.Sub(done.Status.StartTime.Time)).To(BeNumerically("<", 30*time.Second))

		var total int64
		for _, rec := range transcriptOf(done) {
			Expect(len(rec.Body)).To(BeNumerically("<=", transcript.MaxBody))
			total += int64(len(rec.Body))
			if rec.Kind != transcript.KindStep {
				continue
			}
			var body struct {
				Output string `json:"output"`
			}
			Expect(json.Unmarshal(rec.Body, &body)).To(Succeed())
			Expect(len(body.Output)).To(BeNumerically(">", 512<<10), "the output is cut near its bound, not far below it")
			Expect(strings.Count(string(rec.Body), "<tr><td>row</td>")).To(BeNumerically("<=", 2*strings.Count(body.Output, "<tr><td>row</td>")+1),
				"the output is stored once; the input (the step before's output) once more, and the messages hold only the input")
			Expect(string(rec.Body)).NotTo(ContainSubstring(`\u003c`), "HTML is stored as it is")
		}
		Expect(done.Status.TranscriptBytes).To(Equal(total), "status counts what the steps' records take")

		By("reading it through the transcript API, a page of about 4 MiB at a time")
		c := transcriptClient(testEnv.Config)
		var pages int
		var seen []int32
		after := int64(0)
		for {
			resp, err := c.Get(transcriptURL(fmt.Sprintf("/v1/namespaces/%s/agentruns/tables/records?after=%d", ns, after)))
			Expect(err).NotTo(HaveOccurred())
			Expect(resp.StatusCode).To(Equal(http.StatusOK))
			var page transcriptclient.Page
			Expect(json.NewDecoder(resp.Body).Decode(&page)).To(Succeed())
			resp.Body.Close()
			if len(page.Records) == 0 {
				break
			}
			pages++
			size := 0
			for i, r := range page.Records {
				if i < len(page.Records)-1 {
					size += len(r.Body)
				}
				seen = append(seen, r.Step)
			}
			Expect(size).To(BeNumerically("<", 4<<20), "a page ends with the record that reaches 4 MiB")
			after = page.Last
		}
		Expect(pages).To(BeNumerically(">=", 2))
		Expect(seen).To(Equal([]int32{1, 2, 3, 4, 5}))

		By("starting a run from it, which reads and copies it a page at a time")
		again := MakeRun("again", ns).Config(cfg.Name).Obj()
		again.Spec.From = &v1alpha1.RunFrom{Run: "tables", Step: 4}
		create(again)
		ended := waitForEnd(again)
		Expect(ended.Status.TerminationReason).To(Equal(v1alpha1.ReasonMaxStepsExceeded), ended.Status.TerminationMessage)
		Expect(ended.Status.StepCount).To(BeEquivalentTo(5))
	})

	It("ends TranscriptBudgetExceeded once the run's transcript holds its budget", func() {
		run := MakeRun("budget", ns).Config(cfg.Name).Obj()
		run.Spec.Limits = &v1alpha1.LimitOverrides{MaxTranscriptBytes: ptr.To[int64](3 << 20)}
		create(run)
		done := waitForEnd(run)
		Expect(done.Status.TerminationReason).To(Equal(v1alpha1.ReasonTranscriptBudgetExceeded), done.Status.TerminationMessage)
		Expect(done.Status.StepCount).To(BeNumerically("<", 5))
		Expect(done.Status.TerminationMessage).To(MatchRegexp(`^transcript budget: the run's transcript holds \d+ of its 3145728 bytes \(limits.maxTranscriptBytes\); \w+ was not started$`))
	})
})
