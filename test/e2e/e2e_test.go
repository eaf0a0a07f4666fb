package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("A user with kubectl", Ordered, func() {
	It("can install the default deployment: kubectl kustomize config/default | kubectl apply --dry-run=server", func() {
		// config/default needs cert-manager's CRDs; a server-side dry run creates nothing, so the
		// namespace the objects go to must exist.
		crds, err := exec(filepath.Join(root, "hack", "cert-manager-crds.sh"))
		Expect(err).NotTo(HaveOccurred(), crds)
		kubectl("apply", "--server-side", "-f", strings.TrimSpace(crds))
		// The local control plane made the namespace for the local operator's transcript Service.
		kubectl("get", "namespace", "baton-system")
		rendered, err := exec("kubectl", "kustomize", root+"/config/default")
		Expect(err).NotTo(HaveOccurred(), rendered)
		// Every binding grants its role to the ServiceAccount the Deployments run as.
		Expect(rendered).To(ContainSubstring("serviceAccountName: baton-controller-manager"))
		subjects := regexp.MustCompile(`(?m)^subjects:\n- kind: ServiceAccount\n  name: (\S+)\n  namespace: (\S+)$`).FindAllStringSubmatch(rendered, -1)
		var accounts []string
		for _, s := range subjects {
			Expect(s[2]).To(Equal("baton-system"))
			accounts = append(accounts, s[1])
		}
		sort.Strings(accounts)
		Expect(accounts).To(Equal([]string{"baton-controller-manager", "baton-controller-manager", "baton-controller-manager", "baton-webhook"}),
			"the manager, leader election and metrics auth bindings, and the webhook's own narrow role")
		out, err := kubectlStdin(rendered, "apply", "--dry-run=server", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("deployment.apps/baton-controller-manager created (server dry run)"))
		Expect(out).To(ContainSubstring("clusterrole.rbac.authorization.k8s.io/baton-manager-role created (server dry run)"))
		Expect(out).To(ContainSubstring("clusterrole.rbac.authorization.k8s.io/baton-approver created (server dry run)"))
		Expect(out).To(ContainSubstring("certificate.cert-manager.io/baton-serving-cert created (server dry run)"))
		Expect(out).To(ContainSubstring("mutatingwebhookconfiguration.admissionregistration.k8s.io/baton-mutating-webhook-configuration created (server dry run)"))
	})

	It("can add Argo CD's health checks to argocd-cm with the config/argocd component", func() {
		// As Argo CD's own install is customized: its manifests, with the namespace set here.
		dir := filepath.Join(stateDir, "argocd")
		Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
		abs, err := filepath.Abs(filepath.Join(root, "config", "argocd"))
		Expect(err).NotTo(HaveOccurred())
		component, err := filepath.Rel(dir, abs)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(dir, "argocd-cm.yaml"), []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-cm
data:
  timeout.reconciliation: 180s
`), 0o600)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte("namespace: argocd\nresources: [argocd-cm.yaml]\ncomponents: ["+component+"]\n"), 0o600)).To(Succeed())
		rendered, err := exec("kubectl", "kustomize", dir)
		Expect(err).NotTo(HaveOccurred(), rendered)
		out, err := kubectlStdin(rendered, "create", "--dry-run=client", "-o", "jsonpath={.data}", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		var data map[string]string
		Expect(json.Unmarshal([]byte(out), &data)).To(Succeed(), out)
		Expect(data).To(HaveKeyWithValue("timeout.reconciliation", "180s"))
		Expect(data).To(HaveKeyWithValue("resource.customizations.health.agents.baton.dev_AgentRun",
			readFile(filepath.Join(root, "config", "argocd", "agentrun-health.lua"))))
		Expect(data).To(HaveKeyWithValue("resource.customizations.health.agents.baton.dev_AgentConfig",
			readFile(filepath.Join(root, "config", "argocd", "agentconfig-health.lua"))))
	})

	It("applies the helpdesk sample, watches it progress, and waits for it to succeed", func() {
		kubectl("create", "namespace", "helpdesk")
		// The run goes first: it waits Pending for its config, so the watch sees it from the start.
		split := strings.SplitN(readFile(sample("helpdesk.yaml")), "\n---\n", 2)
		Expect(split).To(HaveLen(2))
		kubectl("apply", "-n", "helpdesk", "-f", manifest("ticket.yaml", split[1]))
		kubectl("wait", "-n", "helpdesk", "--for=jsonpath={.status.phase}=Pending", "--timeout=60s", "agentrun/ticket-1234")
		w := watch("get", "agentruns", "-n", "helpdesk", "-w")
		defer w.stop()
		kubectl("apply", "-n", "helpdesk", "-f", manifest("helpdesk-config.yaml", split[0]))
		// kstatus' Ready condition: what kubectl wait, Flux and Argo CD read.
		kubectl("wait", "-n", "helpdesk", "--for=condition=Ready", "--timeout=120s", "agentrun/ticket-1234")
		Expect(jsonpath("agentrun", "ticket-1234", "helpdesk", "{.status.phase}")).To(Equal("Succeeded"))
		Expect(jsonpath("agentrun", "ticket-1234", "helpdesk", "{.status.terminationReason}")).To(Equal("Terminated"))

		// The watch shows the run move: rows with a rising handoff count, then the end.
		final := `^ticket-1234\s+Succeeded\s+ticketing\s+ticketing\s+11\s+1340\s+Terminated\s+\S+$`
		Eventually(w.output, "30s", "100ms").Should(ContainElement(MatchRegexp(final)))
		lines := w.output()
		printed := strings.Join(lines, "\n")
		Expect(lines).To(ContainElement(MatchRegexp(`^NAME\s+PHASE\s+STATE\s+AGENT\s+HANDOFFS\s+TOKENS\s+COST\s+REASON\s+AGE$`)), printed)
		row := regexp.MustCompile(`^ticket-1234\s+(\S+)\s+\S+\s+\S+\s+(\d+)\s`)
		var handoffs []int
		for _, l := range lines {
			if m := row.FindStringSubmatch(l); len(m) > 2 && m[1] == "Running" {
				n, _ := strconv.Atoi(m[2])
				handoffs = append(handoffs, n)
			}
		}
		Expect(len(handoffs)).To(BeNumerically(">=", 3), "rows while Running:\n%s", printed)
		Expect(sort.IntsAreSorted(handoffs)).To(BeTrue(), "handoffs went down:\n%s", printed)
		Expect(handoffs[len(handoffs)-1]).To(BeNumerically(">", handoffs[0]), "no progress shown:\n%s", printed)

		describe := kubectl("describe", "agentrun", "ticket-1234", "-n", "helpdesk")
		Expect(describe).To(ContainSubstring("terminator ticketing emitted TERMINATE_WORKFLOW at step 12"))
	})

	It("cancels a running run with kubectl annotate", func() {
		kubectl("create", "namespace", "cancel")
		kubectl("apply", "-n", "cancel", "-f", manifest("slow.yaml", `
apiVersion: agents.baton.dev/v1alpha1
kind: AgentConfig
metadata:
  name: slow
spec:
  entrypoint: thinker
  agents:
  - name: thinker
    script:
    - output: "still thinking"
      delay: 1h
---
apiVersion: agents.baton.dev/v1alpha1
kind: AgentRun
metadata:
  name: long-job
spec:
  configRef: {name: slow}
  input: "think hard"
`))
		kubectl("wait", "-n", "cancel", "--for=jsonpath={.status.phase}=Running", "--timeout=60s", "agentrun/long-job")
		kubectl("annotate", "-n", "cancel", "agentrun/long-job", "agents.baton.dev/cancel=no longer needed")
		kubectl("wait", "-n", "cancel", "--for=jsonpath={.status.phase}=Cancelled", "--timeout=60s", "agentrun/long-job")
		Expect(jsonpath("agentrun", "long-job", "cancel", "{.status.terminationReason}")).To(Equal("Cancelled"))
		Expect(jsonpath("agentrun", "long-job", "cancel", "{.status.terminationMessage}")).
			To(Equal("cancelled by annotation agents.baton.dev/cancel: no longer needed"))
	})

	It("runs the StateMachine sample to its final state, and is told to write transitions, not on", func() {
		kubectl("create", "namespace", "states")
		kubectl("apply", "-n", "states", "-f", sample("helpdesk-statemachine.yaml"))
		kubectl("wait", "-n", "states", "--for=condition=Ready", "--timeout=120s", "agentrun/ticket-5678")
		Expect(kubectl("get", "agentrun", "ticket-5678", "-n", "states")).To(MatchRegexp(`(?m)^ticket-5678\s+Succeeded\s+TERMINATED\s`))

		// YAML 1.1, which kubectl reads, turns a bare on into true.
		out, err := tryKubectl("apply", "-n", "states", "-f", manifest("old-on.yaml", `
apiVersion: agents.baton.dev/v1alpha1
kind: AgentConfig
metadata:
  name: old-on
spec:
  mode: StateMachine
  entrypoint: a
  agents:
  - name: a
  signals:
  - name: NEXT
  states:
  - name: START
    agent: a
    on: {NEXT: DONE}
  - name: DONE
`))
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring("on was renamed to transitions (YAML reads a bare on key as true)"))
	})

	It("gets a clear refusal from the API server for a config that cannot work", func() {
		out, err := tryKubectl("apply", "-n", "cancel", "-f", manifest("bad.yaml", `
apiVersion: agents.baton.dev/v1alpha1
kind: AgentConfig
metadata:
  name: bad
spec:
  entrypoint: nobody
  agents:
  - name: someone
`))
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring("spec.entrypoint"))
	})

	It("lets an approver approve with kubectl annotate, records who did, and refuses someone who may not", func() {
		ns := "review"
		kubectl("create", "namespace", ns)
		// Both may edit runs; only alice may approve (the shipped approver role).
		kubectl("apply", "-f", filepath.Join(root, "config", "rbac", "approver_role.yaml"))
		kubectl("create", "role", "run-editor", "-n", ns, "--verb=get,list,watch,patch", "--resource=agentruns.agents.baton.dev")
		kubectl("create", "rolebinding", "editors", "-n", ns, "--role=run-editor", "--user=alice", "--user=bob")
		kubectl("create", "rolebinding", "approvers", "-n", ns, "--clusterrole=approver", "--user=alice")
		alice := filepath.Join(stateDir, "kubeconfig-alice")
		bob := filepath.Join(stateDir, "kubeconfig-bob")

		kubectl("apply", "-n", ns, "-f", sample("approvals-pipeline.yaml"))
		kubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=AwaitingApproval", "--timeout=60s", "agentrun/vendor-review")
		Expect(kubectl("get", "events", "-n", ns, "--field-selector", "reason=AwaitingApproval", "-o", "jsonpath={.items[*].message}")).
			To(ContainSubstring("kubectl annotate agentrun vendor-review -n review agents.baton.dev/approve=plan"))

		out, err := kubectlAs(bob, "annotate", "-n", ns, "agentrun/vendor-review", "agents.baton.dev/approve=plan")
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring(`user "bob" may not approve gates of AgentRun review/vendor-review: it needs the "approve" verb on agentruns.agents.baton.dev in namespace review`))

		out, err = kubectlAs(alice, "annotate", "-n", ns, "agentrun/vendor-review", "agents.baton.dev/approve=plan", "agents.baton.dev/feedback=go ahead")
		Expect(err).NotTo(HaveOccurred(), out)
		kubectl("wait", "-n", ns, "--for=jsonpath={.status.pendingApproval.gate}=final", "--timeout=60s", "agentrun/vendor-review")
		out, err = kubectlAs(alice, "annotate", "-n", ns, "agentrun/vendor-review", "agents.baton.dev/reject=final",
			"agents.baton.dev/revise=crm", "agents.baton.dev/feedback=check whether the disputes are resolved")
		Expect(err).NotTo(HaveOccurred(), out)
		kubectl("wait", "-n", ns, "--for=jsonpath={.status.stepCount}=7", "--timeout=60s", "agentrun/vendor-review")
		kubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=AwaitingApproval", "--timeout=60s", "agentrun/vendor-review")
		out, err = kubectlAs(alice, "annotate", "-n", ns, "agentrun/vendor-review", "agents.baton.dev/approve=final")
		Expect(err).NotTo(HaveOccurred(), out)
		kubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=Succeeded", "--timeout=60s", "agentrun/vendor-review")

		Expect(jsonpath("agentrun", "vendor-review", ns, `{range .status.approvals[*]}{.decision} {.gate} {.by}{"\n"}{end}`)).
			To(Equal("Approved plan alice\nRejected final alice\nApproved final alice\n"))
		Expect(jsonpath("agentrun", "vendor-review", ns, "{.status.output}")).To(HavePrefix("Risk: low"))
	})
})
