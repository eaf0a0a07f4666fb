package e2e

import (
	"fmt"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// A run started from an earlier one with kubectl apply passes no gate nobody approved.
var _ = Describe("A run from an earlier one, started with kubectl apply", Ordered, func() {
	const ns = "from-gates"
	var alice, bob string
	fromRun := func(name, earlier string, step int) string {
		return manifest(name+".yaml", fmt.Sprintf(`apiVersion: agents.baton.dev/v1alpha1
kind: AgentRun
metadata: {name: %s}
spec:
  configRef: {name: payment}
  from: {run: %s, step: %d}
`, name, earlier, step))
	}
	applyAs := func(who, file string) {
		out, err := kubectlAs(who, "apply", "-n", ns, "-f", file)
		Expect(err).NotTo(HaveOccurred(), out)
	}
	waitFor := func(run, phase string) {
		kubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}="+phase, "--timeout=60s", "agentrun/"+run)
	}

	BeforeAll(func() {
		kubectl("create", "namespace", ns)
		kubectl("apply", "-f", filepath.Join(root, "config", "rbac", "approver_role.yaml"))
		kubectl("create", "role", "run-starter", "-n", ns, "--verb=get,list,watch,patch,create", "--resource=agentruns.agents.baton.dev")
		kubectl("create", "rolebinding", "starters", "-n", ns, "--role=run-starter", "--user=alice", "--user=bob")
		kubectl("create", "rolebinding", "approvers", "-n", ns, "--clusterrole=approver", "--user=alice", "--user=bob")
		alice = filepath.Join(stateDir, "kubeconfig-alice")
		bob = filepath.Join(stateDir, "kubeconfig-bob")
		kubectl("apply", "-n", ns, "-f", manifest("from-gates-config.yaml", `apiVersion: agents.baton.dev/v1alpha1
kind: AgentConfig
metadata: {name: payment}
spec:
  entrypoint: planner
  agents:
  - {name: planner, handoffs: [payer], script: [{output: "Plan: pay Acme's 3 overdue invoices", handoff: payer}]}
  - {name: payer, handoffs: [reporter], script: [{output: "Paid 3 invoices", handoff: reporter}]}
  - {name: reporter, terminator: true, script: [{output: "Report: 3 paid"}]}
  approvals:
  - {name: plan, after: planner, allowSelfApproval: false}
`))
		applyAs(alice, manifest("waiting.yaml", `apiVersion: agents.baton.dev/v1alpha1
kind: AgentRun
metadata: {name: waiting}
spec: {configRef: {name: payment}}
`))
		waitFor("waiting", "AwaitingApproval")
	})

	It("waits again at the gate its earlier run waits at, and its creator may not approve it", func() {
		applyAs(alice, fromRun("retry-waiting", "waiting", 1))
		waitFor("retry-waiting", "AwaitingApproval")
		Expect(jsonpath("agentrun", "retry-waiting", ns, "{.status.pendingApproval.gate} {.status.stepCount}")).To(Equal("plan 1"))

		out, err := kubectlAs(alice, "annotate", "-n", ns, "agentrun/retry-waiting", "agents.baton.dev/approve=plan")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() string {
			return jsonpath("agentrun", "retry-waiting", ns, `{.status.conditions[?(@.type=="Decision")].reason}`)
		}, time.Minute, 200*time.Millisecond).Should(Equal("SelfApprovalNotAllowed"))
		Expect(jsonpath("agentrun", "retry-waiting", ns, "{.status.phase}")).To(Equal("AwaitingApproval"))

		out, err = kubectlAs(bob, "annotate", "-n", ns, "agentrun/retry-waiting", "agents.baton.dev/approve=plan")
		Expect(err).NotTo(HaveOccurred(), out)
		waitFor("retry-waiting", "Succeeded")
		Expect(jsonpath("agentrun", "waiting", ns, "{.status.phase}")).To(Equal("AwaitingApproval"), "the earlier run is not changed")
	})

	It("waits again at a gate its earlier run was rejected at", func() {
		applyAs(alice, manifest("rejected.yaml", `apiVersion: agents.baton.dev/v1alpha1
kind: AgentRun
metadata: {name: rejected}
spec: {configRef: {name: payment}}
`))
		waitFor("rejected", "AwaitingApproval")
		out, err := kubectlAs(bob, "annotate", "-n", ns, "agentrun/rejected", "agents.baton.dev/reject=plan", "agents.baton.dev/feedback=not this month")
		Expect(err).NotTo(HaveOccurred(), out)
		waitFor("rejected", "Failed")

		applyAs(alice, fromRun("retry-rejected", "rejected", 1))
		waitFor("retry-rejected", "AwaitingApproval")
		Expect(jsonpath("agentrun", "retry-rejected", ns, "{.status.pendingApproval.gate} {.status.stepCount}")).To(Equal("plan 1"))
	})

	It("does not carry its creator's own approval past a gate that needs someone else", func() {
		// bob starts a run and alice approves its plan, which she may: she did not create it.
		applyAs(bob, manifest("bobs.yaml", `apiVersion: agents.baton.dev/v1alpha1
kind: AgentRun
metadata: {name: bobs}
spec: {configRef: {name: payment}}
`))
		waitFor("bobs", "AwaitingApproval")
		out, err := kubectlAs(alice, "annotate", "-n", ns, "agentrun/bobs", "agents.baton.dev/approve=plan")
		Expect(err).NotTo(HaveOccurred(), out)
		waitFor("bobs", "Succeeded")

		applyAs(alice, fromRun("alices", "bobs", 2))
		waitFor("alices", "Failed")
		Expect(jsonpath("agentrun", "alices", ns, "{.status.terminationReason}: {.status.terminationMessage}")).To(And(
			HavePrefix("ConfigInvalid: "),
			ContainSubstring("waited at gate plan, and its transcript records no approval of it that counts under the current config"),
			ContainSubstring("alice created this run")))

		applyAs(bob, fromRun("bobs-again", "bobs", 2))
		waitFor("bobs-again", "Succeeded")
		Expect(jsonpath("agentrun", "bobs-again", ns, "{.status.stepCount}")).To(Equal("3"))
	})
})
