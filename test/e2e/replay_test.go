package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("Replay with kubectl baton", func() {
	It("exports the helpdesk sample's run, replays it unchanged in the plugin, and says where a lower maxHandoffs parts the path", func() {
		const ns = "replay"
		kubectl("create", "namespace", ns)
		kubectl("apply", "-n", ns, "-f", sample("helpdesk.yaml"))
		kubectl("wait", "-n", ns, "--for=condition=Ready", "--timeout=120s", "agentrun/ticket-1234")

		// The export: versioned, with the config the run pinned and every record.
		exported := kubectl("baton", "-n", ns, "transcript", "ticket-1234", "-o", "json")
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
		file := filepath.Join(stateDir, "ticket-1234.json")
		Expect(os.WriteFile(file, []byte(exported), 0o600)).To(Succeed())

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
})
