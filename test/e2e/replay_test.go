package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/baton-dev/baton/test/fakes"
)

// exportSampleRun applies a sample in a namespace of its own, waits for its run to end, and
// exports the run with kubectl baton transcript -o json: the export, and the file it is in.
func exportSampleRun(ns, sampleFile, run string) (exported, file string) {
	kubectl("create", "namespace", ns)
	kubectl("apply", "-n", ns, "-f", sample(sampleFile))
	kubectl("wait", "-n", ns, "--for=condition=Ready", "--timeout=120s", "agentrun/"+run)
	exported = kubectl("baton", "-n", ns, "transcript", run, "-o", "json")
	file = filepath.Join(stateDir, run+".json")
	Expect(os.WriteFile(file, []byte(exported), 0o600)).To(Succeed())
	return exported, file
}

var _ = Describe("Replay with kubectl baton", func() {
	It("exports the research-team sample's run with its branch runs, and replays its fan-out from their transcripts", func() {
		exported, file := exportSampleRun("replay-branches", "research-team.yaml", "research-x")
		var export struct {
			Branches []struct {
				Run     string            `json:"run"`
				Records []json.RawMessage `json:"records"`
			} `json:"branches"`
		}
		Expect(json.Unmarshal([]byte(exported), &export)).To(Succeed(), exported)
		Expect(export.Branches).To(HaveLen(3), "the export holds the three branch runs")
		for _, b := range export.Branches {
			Expect(b.Run).To(HavePrefix("research-x-b1-"))
			Expect(b.Records).NotTo(BeEmpty())
		}

		same := kubectl("baton", "replay", "-f", file)
		Expect(same).To(ContainSubstring("The replay reproduced the run: the same path, tokens and end."), same)
		Expect(same).To(MatchRegexp(`Tokens\s+1550\s+1550`))
		Expect(same).To(ContainSubstring("step 1, branch 3 (critic): research-x-b1-3: reproduced"))

		// A lead allowed two branches only: its fan-out to three fails the step.
		two := strings.Replace(readFile(sample("research-team.yaml")), "      maxBranches: 3\n", "      maxBranches: 2\n", 1)
		Expect(two).To(ContainSubstring("maxBranches: 2"))
		out := kubectl("baton", "replay", "-f", file, "--config", manifest("research-two.yaml", two))
		Expect(out).To(ContainSubstring("The paths part at handoff 1."), out)
		Expect(out).NotTo(ContainSubstring("Branches:"), "no branch was started")
	})

	It("exports the helpdesk sample's run, replays it unchanged in the plugin, and says where a lower maxHandoffs parts the path", func() {
		const ns = "replay"
		// The export: versioned, with the config the run pinned and every record.
		exported, file := exportSampleRun(ns, "helpdesk.yaml", "ticket-1234")
		var export struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Run        string `json:"run"`
			Records    []json.RawMessage
			Config     struct {
				Revision string `json:"revision"`
				Spec     struct {
					Entrypoint string `json:"entrypoint"`
				} `json:"spec"`
			} `json:"config"`
		}
		Expect(json.Unmarshal([]byte(exported), &export)).To(Succeed(), exported)
		Expect(export.APIVersion).To(Equal("agents.baton.dev/transcript-v1"))
		Expect(export.Kind).To(Equal("Transcript"))
		Expect(export.Config.Revision).To(HavePrefix("helpdesk-"))
		Expect(export.Config.Spec.Entrypoint).To(Equal("orchestrator"))
		Expect(len(export.Records)).To(BeNumerically(">=", 11), "a record for each of the run's 11 steps")

		// Unchanged: the replay, from the file alone, is the run.
		same := kubectl("baton", "replay", "-f", file)
		Expect(same).To(ContainSubstring("Replay of agentrun ticket-1234 against its pinned config " + export.Config.Revision))
		Expect(same).To(ContainSubstring("The replay reproduced the run: the same path, tokens and end."), same)
		Expect(same).To(MatchRegexp(`Tokens\s+1340\s+1340`))

		// A lower limit: the path ends at the limit, and the report says where and why.
		changed := strings.Replace(readFile(sample("helpdesk.yaml")), "    maxHandoffs: 20\n", "    maxHandoffs: 3\n", 1)
		Expect(changed).To(ContainSubstring("maxHandoffs: 3"))
		lower := kubectl("baton", "replay", "-f", file, "--config", manifest("helpdesk-lower.yaml", changed))
		Expect(lower).To(ContainSubstring("The paths part at handoff 4."), lower)
		Expect(lower).To(MatchRegexp(`Reason\s+Terminated\s+MaxHandoffsExceeded`))
		Expect(lower).To(ContainSubstring("The replayed run ended: handoff limit: handoff 3 of 3 reached"))

		// For machines: the same report as JSON, and the run named instead of a file.
		var report struct {
			Diverged int `json:"diverged"`
			Replayed struct {
				Reason string `json:"reason"`
			} `json:"replayed"`
		}
		out := kubectl("baton", "-n", ns, "replay", "ticket-1234", "--config", manifest("helpdesk-lower.yaml", changed), "-o", "json")
		Expect(json.Unmarshal([]byte(out), &report)).To(Succeed(), out)
		Expect(report.Diverged).To(Equal(4))
		Expect(report.Replayed.Reason).To(Equal("MaxHandoffsExceeded"))
	})

	// A run of the priced team on the fake model server, replayed against a team in which the
	// writer no longer ends the run: control returns to triage, whose next turn nothing
	// recorded, and an editor, new, ends it. --live asks the model for those turns, with the
	// endpoint and key read from the cluster as the user, through the replay's egress policy.
	It("answers the turns nothing recorded by calling the model with --live, through the egress policy", func() {
		const ns = "replay-live"
		server := fakes.NewOpenAI()
		DeferCleanup(server.Close)
		server.ReplyTo("triage", fakes.Reply{Content: "to the writer", Tokens: 1000, PromptTokens: 800, CachedTokens: 400,
			ToolCalls: []fakes.ToolCall{{Name: "transfer_to_writer", Args: `{"reason":"write it"}`}}})
		server.ReplyTo("writer", fakes.Reply{Content: "the answer", Tokens: 1000, PromptTokens: 800, CachedTokens: 400})
		kubectl("create", "namespace", ns)
		kubectl("apply", "-n", ns, "-f", manifest("replay-live.yaml", pricedTeam(server.BaseURL())))
		kubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=Succeeded", "--timeout=60s", "agentrun/priced")
		file := filepath.Join(stateDir, "priced.json")
		Expect(os.WriteFile(file, []byte(kubectl("baton", "-n", ns, "transcript", "priced", "-o", "json")), 0o600)).To(Succeed())
		recorded := len(server.Requests())

		edited := strings.Replace(pricedTeam(server.BaseURL()), "handoffs: [writer]", "handoffs: [writer, editor]", 1)
		edited = strings.Replace(edited, "  - name: writer\n    description: writer work\n    model: {endpointRef: {name: llm}, name: gpt-4o-mini, maxOutputTokens: 200}\n    terminator: true\n",
			"  - name: writer\n    description: writer work\n    model: {endpointRef: {name: llm}, name: gpt-4o-mini, maxOutputTokens: 200}\n\n"+
				"  - name: editor\n    description: editor work\n    model: {endpointRef: {name: llm}, name: gpt-4o-mini, maxOutputTokens: 200}\n    terminator: true\n", 1)
		Expect(edited).To(ContainSubstring("name: editor"))
		config := manifest("replay-live-edited.yaml", edited)

		By("without --live the replay stops where nothing is recorded")
		out := kubectl("baton", "-n", ns, "replay", "-f", file, "--config", config)
		Expect(out).To(ContainSubstring("The replay stopped: step 3 is triage's, and the recording holds no more turns of triage."), out)

		By("with --live and the default egress policy, the loopback model server is refused and nothing is sent")
		out = kubectl("baton", "-n", ns, "replay", "-f", file, "--config", config, "--live")
		Expect(out).To(ContainSubstring("The replay stopped: step 3 is triage's, answered live: the replay's egress policy refuses 127.0.0.1 (loopback); allow it with --egress-allow."), out)
		Expect(server.Requests()).To(HaveLen(recorded))

		By("with --live and loopback allowed, triage and the new editor answer live, on the endpoint's prices")
		server.ReplyTo("triage", fakes.Reply{Content: "to the editor", Tokens: 1000, PromptTokens: 800, CachedTokens: 400,
			ToolCalls: []fakes.ToolCall{{Name: "transfer_to_editor", Args: `{"reason":"polish it"}`}}})
		server.ReplyTo("editor", fakes.Reply{Content: "the edited answer", Tokens: 1000, PromptTokens: 800, CachedTokens: 400})
		out = kubectl("baton", "-n", ns, "replay", "-f", file, "--config", config, "--live", "--egress-allow", "127.0.0.1", "-o", "json")
		var report struct {
			Diverged int     `json:"diverged"`
			Live     []int32 `json:"live"`
			Stopped  string  `json:"stopped"`
			Replayed struct {
				Reason string `json:"reason"`
				Output string `json:"output"`
				Cost   string `json:"cost"`
				Path   []struct {
					From, To, Outcome string
				} `json:"path"`
			} `json:"replayed"`
		}
		Expect(json.Unmarshal([]byte(out), &report)).To(Succeed(), out)
		Expect(report.Stopped).To(BeEmpty())
		Expect(report.Live).To(Equal([]int32{3, 4}))
		Expect(report.Diverged).To(Equal(2), "the writer's answer now returns control to triage")
		Expect(report.Replayed.Reason).To(Equal("Completed"))
		Expect(report.Replayed.Output).To(Equal("the edited answer"))
		Expect(report.Replayed.Cost).To(Equal("0.00084"), "four steps at 0.00021")
		var path []string
		for _, h := range report.Replayed.Path {
			path = append(path, h.From+">"+h.To+":"+h.Outcome)
		}
		Expect(path).To(Equal([]string{"triage>writer:Handoff", "writer>triage:Returned", "triage>editor:Handoff", "editor>:Final"}))
		live := server.Requests()[recorded:]
		Expect(live).To(HaveLen(2))
		for _, r := range live {
			Expect(r.Header.Get("Authorization")).To(Equal("Bearer sk-e2e"), "the key of the endpoint's Secret, read as the user")
		}
		Expect(live[0].Agent()).To(Equal("triage"))
		Expect(live[1].Agent()).To(Equal("editor"))
	})
})
