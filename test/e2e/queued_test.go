package e2e

import (
	"cmp"
	"fmt"
	"path/filepath"
	"regexp"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("An AgentQuota applied with kubectl", func() {
	It("holds the run past maxRunningRuns Queued, says so in kubectl get, wait, describe and events, and starts it when the first run ends", func() {
		const ns = "queued"
		kubectl("create", "namespace", ns)
		kubectl("wait", "--for", "condition=established", "--timeout=60s", "crd/agentquotas.agents.baton.dev")
		// alice approves (the shipped approver role).
		kubectl("apply", "-f", filepath.Join(root, "config", "rbac", "approver_role.yaml"))
		kubectl("create", "rolebinding", "approvers", "-n", ns, "--clusterrole=approver", "--user=alice")
		alice := filepath.Join(stateDir, "kubeconfig-alice")
		approve := func(run string) {
			out, err := kubectlAs(alice, "annotate", "-n", ns, "agentrun/"+run, "agents.baton.dev/approve=review")
			ExpectWithOffset(1, err).NotTo(HaveOccurred(), out)
		}
		waitFor := func(run, phase string) {
			kubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}="+phase, "--timeout=60s", "agentrun/"+run)
		}
		// use is what the quota's status says; a count of zero is left out of it.
		use := func() string {
			n := func(s string) string { return cmp.Or(s, "0") }
			return fmt.Sprintf("running %s, queued %s, Ready %s", n(jsonpath("agentquota", "team-a", ns, "{.status.running}")),
				n(jsonpath("agentquota", "team-a", ns, "{.status.queued}")),
				jsonpath("agentquota", "team-a", ns, `{.status.conditions[?(@.type=="Ready")].reason}`))
		}
		run := func(name string) string {
			return fmt.Sprintf("apiVersion: agents.baton.dev/v1alpha1\nkind: AgentRun\nmetadata: {name: %s}\nspec: {configRef: {name: gated}, input: \"write the release notes\"}\n", name)
		}

		By("applying a quota of one running run, and a config whose runs wait at a gate")
		out, err := kubectlStdin(`apiVersion: agents.baton.dev/v1alpha1
kind: AgentQuota
metadata: {name: team-a}
spec:
  maxRunningRuns: 1
---
apiVersion: agents.baton.dev/v1alpha1
kind: AgentConfig
metadata: {name: gated}
spec:
  entrypoint: writer
  agents:
  - {name: writer, handoffs: [publisher], script: [{output: "draft", handoff: publisher}]}
  - {name: publisher, terminator: true, script: [{output: "published"}]}
  approvals:
  - {name: review, after: writer}
`, "apply", "-n", ns, "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("agentquota.agents.baton.dev/team-a created"))

		By("starting a first run, which holds the one place while it waits for approval")
		out, err = kubectlStdin(run("first"), "apply", "-n", ns, "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		waitFor("first", "AwaitingApproval")
		w := watch("get", "agentruns", "-n", ns, "-w")
		defer w.stop()

		By("starting a second run, which waits Queued")
		out, err = kubectlStdin(run("second"), "apply", "-n", ns, "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		waitFor("second", "Queued")
		kubectl("wait", "-n", ns, `--for=jsonpath={.status.conditions[?(@.type=="Progressing")].reason}=QuotaExceeded`, "--timeout=60s", "agentrun/second")
		const why = `quota "team-a": 1 of 1 runs running; place 1 of 1 in line`
		Expect(jsonpath("agentrun", "second", ns, `{.status.conditions[?(@.type=="Progressing")].message}`)).To(Equal(why))
		Expect(jsonpath("agentrun", "second", ns, "{.status.stepCount}{.status.startTime}")).To(BeEmpty(), "a queued run has not started")
		Expect(kubectl("get", "agentruns", "-n", ns)).To(SatisfyAll(
			MatchRegexp(`(?m)^NAME\s+PHASE\s+STATE\s+AGENT\s+HANDOFFS\s+TOKENS\s+COST\s+REASON\s+AGE$`),
			MatchRegexp(`(?m)^first\s+AwaitingApproval\s`),
			MatchRegexp(`(?m)^second\s+Queued\s`)))
		Eventually(w.output, "30s", "100ms").Should(ContainElement(MatchRegexp(`^second\s+Queued\s`)))

		By("reading the quota's use with kubectl get agentquotas")
		Eventually(use, time.Minute, 200*time.Millisecond).Should(Equal("running 1, queued 1, Ready QuotaExceeded"))
		Expect(kubectl("get", "agentquotas", "-n", ns)).To(SatisfyAll(
			MatchRegexp(`(?m)^NAME\s+RUNNING\s+MAX RUNNING\s+QUEUED\s+HELD\s+COST TODAY\s+MAX COST\s+TOKENS TODAY\s+AGE$`),
			MatchRegexp(`(?m)^team-a\s+1\s+1\s+1\s`)))

		By("finding the Queued Event in kubectl get events and kubectl describe")
		Eventually(func() string {
			return kubectl("get", "events", "-n", ns, "--field-selector", "reason=Queued,involvedObject.name=second", "-o", "jsonpath={.items[*].message}")
		}, time.Minute, 200*time.Millisecond).Should(Equal(why))
		Expect(kubectl("describe", "agentrun", "second", "-n", ns)).To(MatchRegexp(`(?m)^\s+Normal\s+Queued\s+.*\s` + regexp.QuoteMeta(why) + `$`))
		Expect(kubectl("baton", "-n", ns, "describe", "second")).To(ContainSubstring("Phase:        Queued\nQueued:       QuotaExceeded: " + why + "\n"))

		By("approving the first run: it ends, and the queued run starts")
		approve("first")
		waitFor("first", "Succeeded")
		waitFor("second", "AwaitingApproval")
		Expect(jsonpath("agentrun", "second", ns, "{.status.pendingApproval.gate} {.status.stepCount}")).To(Equal("review 1"))
		approve("second")
		waitFor("second", "Succeeded")
		Expect(jsonpath("agentrun", "second", ns, "{.status.terminationReason} {.status.output}")).To(Equal("Completed published"))
		Eventually(w.output, "30s", "100ms").Should(ContainElement(MatchRegexp(`^second\s+Succeeded\s`)))
		Eventually(use, time.Minute, 200*time.Millisecond).Should(Equal("running 0, queued 0, Ready HasRoom"))
	})
})
