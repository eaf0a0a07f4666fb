package e2e

import (
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("A gate with allowSelfApproval: false", func() {
	It("refuses the approval of the person who created the run, and takes another approver's", func() {
		ns := "duties"
		kubectl("create", "namespace", ns)
		// alice starts runs; both may approve (the shipped approver role).
		kubectl("apply", "-f", filepath.Join(root, "config", "rbac", "approver_role.yaml"))
		kubectl("create", "role", "run-starter", "-n", ns, "--verb=get,list,watch,patch,create", "--resource=agentruns.agents.baton.dev")
		kubectl("create", "rolebinding", "starters", "-n", ns, "--role=run-starter", "--user=alice")
		kubectl("create", "rolebinding", "approvers", "-n", ns, "--clusterrole=approver", "--user=alice", "--user=bob")
		alice := filepath.Join(stateDir, "kubeconfig-alice")
		bob := filepath.Join(stateDir, "kubeconfig-bob")

		kubectl("apply", "-n", ns, "-f", manifest("duties-config.yaml", `apiVersion: agents.baton.dev/v1alpha1
kind: AgentConfig
metadata: {name: payment}
spec:
  entrypoint: planner
  agents:
  - {name: planner, handoffs: [payer], script: [{output: "Plan: pay Acme's 3 overdue invoices", handoff: payer}]}
  - {name: payer, terminator: true, script: [{output: "Paid 3 invoices"}]}
  approvals:
  - {name: plan, after: planner, allowSelfApproval: false}
`))
		out, err := kubectlAs(alice, "apply", "-n", ns, "-f", manifest("duties-run.yaml", `apiVersion: agents.baton.dev/v1alpha1
kind: AgentRun
metadata:
  name: pay-acme
  annotations: {agents.baton.dev/created-by: bob}
spec: {configRef: {name: payment}}
`))
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(jsonpath("agentrun", "pay-acme", ns, `{.metadata.annotations.agents\.baton\.dev/created-by}`)).
			To(Equal("alice"), "the creator is who created the run, whatever the manifest says")
		kubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=AwaitingApproval", "--timeout=60s", "agentrun/pay-acme")

		out, err = kubectlAs(alice, "annotate", "-n", ns, "agentrun/pay-acme", "agents.baton.dev/approve=plan")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() string {
			return jsonpath("agentrun", "pay-acme", ns, `{.status.conditions[?(@.type=="Decision")].message}`)
		}, time.Minute, 200*time.Millisecond).Should(Equal(
			"approve=plan by alice changed nothing: alice created this run, and gate plan needs an approver other than the run's creator (allowSelfApproval: false)"))
		Expect(jsonpath("agentrun", "pay-acme", ns, `{.status.conditions[?(@.type=="Decision")].reason} {.status.phase}`)).
			To(Equal("SelfApprovalNotAllowed AwaitingApproval"))

		out, err = kubectlAs(alice, "annotate", "--overwrite", "-n", ns, "agentrun/pay-acme", "agents.baton.dev/created-by=bob")
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring("the annotation agents.baton.dev/created-by is written only by Baton"))

		out, err = kubectlAs(bob, "annotate", "-n", ns, "agentrun/pay-acme", "agents.baton.dev/approve=plan")
		Expect(err).NotTo(HaveOccurred(), out)
		kubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=Succeeded", "--timeout=60s", "agentrun/pay-acme")
		Expect(jsonpath("agentrun", "pay-acme", ns, `{range .status.approvals[*]}{.decision} {.gate} {.by}{"\n"}{end}`)).
			To(Equal("Approved plan bob\n"))
		Expect(jsonpath("agentrun", "pay-acme", ns, `{.metadata.annotations.agents\.baton\.dev/created-by}`)).To(Equal("alice"))
	})
})
