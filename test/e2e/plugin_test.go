package e2e

import (
	"encoding/json"
	"path/filepath"
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

	It("answers someone who may not get the run as the API server would", func() {
		out, err := baton(carol, "transcript", "vendor-review")
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring(`the transcript API answered 403: agentruns.agents.baton.dev "vendor-review" is forbidden: User "bob" cannot get resource "agentruns"`))
	})

	It("retries a run as a new run of the same spec, and cancels one", func() {
		out, err := baton(alice, "retry", "slow")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(MatchRegexp(`agentrun.agents.baton.dev/slow-retry-\w+ created`))
		name := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(out), "agentrun.agents.baton.dev/"), " created")
		out, err = baton(alice, "cancel", name, "--reason", "enough")
		Expect(err).NotTo(HaveOccurred(), out)
		kubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=Cancelled", "--timeout=60s", "agentrun/"+name)

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

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
