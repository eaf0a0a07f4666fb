package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// What docs/parallel.md tells a user, done with kubectl against the operator binary: a lead
// fans out to branch runs, which kubectl lists by their parent's label, and the writer joins
// their outputs as join.mode says; each branch is a run with its own guards, gates and share of
// the budget; a cancelled run takes its branches with it.
var _ = Describe("Parallel branches with kubectl", func() {
	It("joins All: the writer gets both outputs in order, and kubectl lists the branches with their PARENT", func() {
		const ns = "branches-all"
		kubectl("create", "namespace", ns)
		apply(ns, researchTeam("join: {mode: All, agent: writer}", `
      - {agent: researcher, input: "sources on X"}
      - {agent: critic, input: "weak points of X"}`,
			`{name: researcher, handoffs: [lead], script: [{output: "three sources", tokens: 30}]}`,
			`{name: critic, handoffs: [lead], script: [{output: "two weak points", tokens: 20}]}`)+runOf("report"))
		waitFor(ns, "report", "{.status.phase}", "Succeeded")

		Expect(jsonpath("agentrun", "report", ns, "{.status.terminationReason} {.status.output}")).To(Equal("Completed the report"))
		Expect(branchRows(ns, "report")).To(Equal("report-b1-1 Succeeded Completed researcher\nreport-b1-2 Succeeded Completed critic\n"))
		Expect(kubectl("get", "agentruns", "-n", ns, "-l", "agents.baton.dev/parent=report", "-o", "wide")).To(SatisfyAll(
			MatchRegexp(`(?m)^NAME\s+PHASE\s+.*\sPARENT\s+CONFIG\s`),
			MatchRegexp(`(?m)^report-b1-1\s+Succeeded\s+.*\sreport\s+research\s`),
			MatchRegexp(`(?m)^report-b1-2\s+Succeeded\s+.*\sreport\s+research\s`),
			Not(MatchRegexp(`(?m)^report\s`))))
		Expect(jsonpath("agentrun", "report-b1-1", ns, `{.metadata.ownerReferences[?(@.controller==true)].name} {.spec.input}`)).
			To(Equal("report sources on X"), "the parent controls its branch, which has the input the lead gave it")
		Expect(jsonpath("agentrun", "report", ns, `{range .status.branches[*]}{.name} {.agent} {.phase} {.reason} {.tokensUsed}{"\n"}{end}`)).
			To(Equal("report-b1-1 researcher Succeeded Completed 30\nreport-b1-2 critic Succeeded Completed 20\n"))
		Expect(outcomes(ns, "report")).To(Equal("FanOut researcher,critic; Joined writer; Final ; "))
		Expect(joinedInput(ns, "report")).To(Equal("writer: " +
			"## Branch 1: researcher (Completed)\n\nthree sources\n\n## Branch 2: critic (Completed)\n\ntwo weak points"))
		Expect(jsonpath("agentrun", "report", ns, "{.status.tokensUsed} {.status.stepCount} {.status.branchSteps}")).
			To(Equal("550 2 2"), "the lead's 100, the branches' 30 and 20, the writer's 400; two steps of its own, one in each branch")
	})

	It("joins a Quorum of 2 of 3 without waiting for the slow branch, which is cancelled", func() {
		const ns = "branches-quorum"
		kubectl("create", "namespace", ns)
		apply(ns, researchTeam("join: {mode: Quorum, quorum: 2, agent: writer}", `
      - {agent: researcher, input: "prior work"}
      - {agent: researcher, input: "current practice"}
      - {agent: critic, input: "weak points"}`,
			`{name: researcher, handoffs: [lead], script: [{when: "prior", output: "three surveys", tokens: 30}, {when: "practice", output: "two vendors", tokens: 30}]}`,
			`{name: critic, handoffs: [lead], script: [{output: "too late", delay: 1h}]}`)+runOf("survey"))
		waitFor(ns, "survey", "{.status.phase}", "Succeeded")

		waitFor(ns, "survey-b1-3", "{.status.phase}", "Cancelled")
		Expect(branchRows(ns, "survey")).To(Equal(
			"survey-b1-1 Succeeded Completed researcher\nsurvey-b1-2 Succeeded Completed researcher\nsurvey-b1-3 Cancelled Cancelled critic\n"))
		Expect(jsonpath("agentrun", "survey-b1-3", ns, "{.status.terminationMessage}")).
			To(Equal("cancelled by annotation agents.baton.dev/cancel: the run joined without it"))
		Expect(jsonpath("agentrun", "survey", ns, `{.status.handoffSequence[?(@.outcome=="Joined")].reason}`)).
			To(Equal("joined 2 of 3 branches (Quorum)"))
		Expect(joinedInput(ns, "survey")).To(Equal("writer: ## Branch 1: researcher (Completed)\n\nthree surveys\n\n" +
			"## Branch 2: researcher (Completed)\n\ntwo vendors\n\n## Branch 3: critic (cancelled: not needed for the join)\n\nNo output."))
	})

	It("joins the First answer and cancels the other branches", func() {
		const ns = "branches-first"
		kubectl("create", "namespace", ns)
		apply(ns, researchTeam("join: {mode: First, agent: writer}", `
      - {agent: researcher, input: "prior work"}
      - {agent: researcher, input: "current practice"}
      - {agent: critic, input: "weak points"}`,
			`{name: researcher, handoffs: [lead], script: [{output: "still reading", delay: 1h}]}`,
			`{name: critic, handoffs: [lead], script: [{output: "two weak points", tokens: 20}]}`)+runOf("quick"))
		waitFor(ns, "quick", "{.status.phase}", "Succeeded")

		waitFor(ns, "quick-b1-1", "{.status.phase}", "Cancelled")
		waitFor(ns, "quick-b1-2", "{.status.phase}", "Cancelled")
		Expect(branchRows(ns, "quick")).To(Equal(
			"quick-b1-1 Cancelled Cancelled researcher\nquick-b1-2 Cancelled Cancelled researcher\nquick-b1-3 Succeeded Completed critic\n"))
		Expect(jsonpath("agentrun", "quick", ns, `{.status.handoffSequence[?(@.outcome=="Joined")].reason}`)).
			To(Equal("joined 1 of 3 branches (First)"))
		Expect(joinedInput(ns, "quick")).To(HaveSuffix("## Branch 3: critic (Completed)\n\ntwo weak points"))
		Expect(jsonpath("agentrun", "quick", ns, "{.status.output} {.status.tokensUsed}")).To(Equal("the report 520"),
			"the cancelled branches used nothing")
	})

	// budgetTeam's lead has 9 steps: after the fan-out, 4 for each branch; ping and pong go back
	// and forth, a cycle the config allows, and run out of their share.
	budgetTeam := func(onFailure string) string {
		return researchTeam("join: {onFailure: "+onFailure+", agent: writer}", `
      - {agent: ping, input: "settle the figures"}
      - {agent: critic, input: "weak points"}`,
			`{name: ping, handoffs: [pong], script: [{output: "ping 1", handoff: pong}, {output: "ping 2", handoff: pong}, {output: "ping 3", handoff: pong}]}`,
			`{name: pong, handoffs: [ping], script: [{output: "pong 1", handoff: ping}, {output: "pong 2", handoff: ping}, {output: "pong 3", handoff: ping}]}`,
			`{name: critic, handoffs: [lead], script: [{output: "two weak points", tokens: 20}]}`) + `
  limits: {maxSteps: 9}
  loopDetection: {allow: [{cycle: [ping, pong], maxRepeats: 10}]}
`
	}
	const outOfSteps = "MaxStepsExceeded: step limit: 4 of 4 steps taken; ping was not started"

	It("splits the run's steps between the branches, and fails the run with onFailure Fail when one runs out of its share", func() {
		const ns = "branches-budget-fail"
		kubectl("create", "namespace", ns)
		apply(ns, budgetTeam("Fail")+runOf("figures"))
		waitFor(ns, "figures", "{.status.phase}", "Failed")

		Expect(jsonpath("agentrun", "figures-b1-1", ns, "{.spec.limits.maxSteps} {.status.stepCount}")).To(Equal("4 4"))
		Expect(jsonpath("agentrun", "figures-b1-1", ns, "{.status.terminationReason}: {.status.terminationMessage}")).To(Equal(outOfSteps))
		Expect(jsonpath("agentrun", "figures", ns, "{.status.terminationReason}: {.status.terminationMessage}")).
			To(Equal("BranchFailed: branch figures-b1-1 (agent ping) ended " + outOfSteps))
	})

	It("passes a branch that ran out of its share on to the writer, with its reason, with onFailure Continue", func() {
		const ns = "branches-budget-continue"
		kubectl("create", "namespace", ns)
		apply(ns, budgetTeam("Continue")+runOf("figures"))
		waitFor(ns, "figures", "{.status.phase}", "Succeeded")

		Expect(jsonpath("agentrun", "figures-b1-1", ns, "{.spec.limits.maxSteps} {.status.terminationReason}")).To(Equal("4 MaxStepsExceeded"))
		Expect(joinedInput(ns, "figures")).To(Equal("writer: ## Branch 1: ping (MaxStepsExceeded)\n\n" +
			"No output: step limit: 4 of 4 steps taken; ping was not started\n\n## Branch 2: critic (Completed)\n\ntwo weak points"))
		Expect(jsonpath("agentrun", "figures", ns, "{.status.output} {.status.stepCount} {.status.branchSteps}")).To(Equal("the report 2 5"))
	})

	It("ends a branch that loops LoopDetected by its own detector, with the evidence in its status", func() {
		const ns = "branches-loop"
		kubectl("create", "namespace", ns)
		apply(ns, researchTeam("join: {agent: writer}", `
      - {agent: ping, input: "settle the figures"}
      - {agent: critic, input: "weak points"}`,
			`{name: ping, handoffs: [pong], script: [{output: "ping 1", handoff: pong}, {output: "ping 2", handoff: pong}, {output: "ping 3", handoff: pong}]}`,
			`{name: pong, handoffs: [ping], script: [{output: "pong 1", handoff: ping}, {output: "pong 2", handoff: ping}, {output: "pong 3", handoff: ping}]}`,
			`{name: critic, handoffs: [lead], script: [{output: "two weak points", tokens: 20}]}`)+runOf("figures"))
		waitFor(ns, "figures", "{.status.phase}", "Failed")

		Expect(jsonpath("agentrun", "figures-b1-1", ns, "{.spec.limits.maxSteps} {.status.terminationReason}")).
			To(Equal("12 LoopDetected"), "half of the 24 steps left after the fan-out, far from spent")
		Expect(jsonpath("agentrun", "figures-b1-1", ns, `{.status.loop.detector} {.status.loop.pattern} {.status.loop.steps}`)).
			To(Equal(`Cycle ["ping","pong"] [1,2,3,4,5,6]`))
		message := jsonpath("agentrun", "figures-b1-1", ns, "{.status.terminationMessage}")
		Expect(message).To(HavePrefix("loop detected (Cycle): "))
		Expect(jsonpath("agentrun", "figures", ns, "{.status.terminationReason}: {.status.terminationMessage}")).
			To(Equal("BranchFailed: branch figures-b1-1 (agent ping) ended LoopDetected: " + message))
	})

	It("waits at a gate inside a branch, shown in the parent's status, until someone other than the run's creator approves the branch", func() {
		const ns = "branches-gate"
		kubectl("create", "namespace", ns)
		// alice starts runs; both may approve (the shipped approver role).
		kubectl("apply", "-f", filepath.Join(root, "config", "rbac", "approver_role.yaml"))
		kubectl("create", "role", "run-starter", "-n", ns, "--verb=get,list,watch,patch,create", "--resource=agentruns.agents.baton.dev")
		kubectl("create", "rolebinding", "starters", "-n", ns, "--role=run-starter", "--user=alice")
		kubectl("create", "rolebinding", "approvers", "-n", ns, "--clusterrole=approver", "--user=alice", "--user=bob")
		alice := filepath.Join(stateDir, "kubeconfig-alice")
		bob := filepath.Join(stateDir, "kubeconfig-bob")
		apply(ns, researchTeam("join: {agent: writer}", `
      - {agent: researcher, input: "sources on X"}
      - {agent: critic, input: "weak points of X"}`,
			`{name: researcher, handoffs: [lead], script: [{output: "three sources", tokens: 30}]}`,
			`{name: critic, handoffs: [lead], script: [{output: "two weak points", tokens: 20}]}`)+`
  approvals:
  - {name: sources, after: researcher, allowSelfApproval: false}
`)
		out, err := kubectlStdinAs(alice, runOf("report"), "apply", "-n", ns, "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)

		waitFor(ns, "report-b1-1", "{.status.pendingApproval.gate}", "sources")
		Expect(jsonpath("agentrun", "report-b1-1", ns, "{.status.phase}")).To(Equal("AwaitingApproval"))
		waitFor(ns, "report", "{.status.branches[0].phase}", "AwaitingApproval")
		waitFor(ns, "report", "{.status.branches[1].phase}", "Succeeded")
		Expect(jsonpath("agentrun", "report", ns, `{.status.phase} {.status.conditions[?(@.type=="Progressing")].reason}`)).
			To(Equal("Running Branching"), "the parent waits for its branches, and no gate of its own")

		out, err = kubectlAs(alice, "annotate", "-n", ns, "agentrun/report-b1-1", "agents.baton.dev/approve=sources")
		Expect(err).NotTo(HaveOccurred(), out)
		waitFor(ns, "report-b1-1", `{.status.conditions[?(@.type=="Decision")].reason}`, "SelfApprovalNotAllowed")
		Expect(jsonpath("agentrun", "report-b1-1", ns, "{.status.phase}")).To(Equal("AwaitingApproval"),
			"alice created the branch's root run, so she may not approve it")

		out, err = kubectlAs(bob, "annotate", "-n", ns, "agentrun/report-b1-1", "agents.baton.dev/approve=sources")
		Expect(err).NotTo(HaveOccurred(), out)
		waitFor(ns, "report", "{.status.phase}", "Succeeded")
		Expect(jsonpath("agentrun", "report-b1-1", ns, `{range .status.approvals[*]}{.decision} {.gate} {.by}{"\n"}{end}`)).
			To(Equal("Approved sources bob\n"))
		Expect(jsonpath("agentrun", "report", ns, "{.status.output} {.status.approvals}")).To(Equal("the report "),
			"the gate was the branch's, decided on the branch")
		Expect(joinedInput(ns, "report")).To(HavePrefix("writer: ## Branch 1: researcher (Completed)\n\nthree sources"))
	})

	It("cancels every running branch with the run cancelled by kubectl annotate", func() {
		const ns = "branches-cancel"
		kubectl("create", "namespace", ns)
		apply(ns, researchTeam("join: {agent: writer}", `
      - {agent: researcher, input: "prior work"}
      - {agent: researcher, input: "current practice"}`,
			`{name: researcher, handoffs: [lead], script: [{output: "still reading", delay: 1h}]}`)+runOf("long"))
		waitFor(ns, "long-b1-1", "{.status.phase}", "Running")
		waitFor(ns, "long-b1-2", "{.status.phase}", "Running")

		kubectl("annotate", "-n", ns, "agentrun/long", "agents.baton.dev/cancel=no longer needed")
		waitFor(ns, "long", "{.status.phase}", "Cancelled")
		waitFor(ns, "long-b1-1", "{.status.phase}", "Cancelled")
		waitFor(ns, "long-b1-2", "{.status.phase}", "Cancelled")
		Expect(branchRows(ns, "long")).To(Equal("long-b1-1 Cancelled Cancelled researcher\nlong-b1-2 Cancelled Cancelled researcher\n"))
		Expect(jsonpath("agentrun", "long-b1-2", ns, "{.status.terminationMessage}")).
			To(Equal("cancelled by annotation agents.baton.dev/cancel: its parent run ended"))
	})

	It("makes each branch once, and counts its tokens once, across a kill -9 during a fan-out", func() {
		const ns, runs = "branches-kill-fanout", 10
		kubectl("create", "namespace", ns)
		// Each run's lead answers 30 ms after the one before, from a second on: the kill comes
		// as the first run's fan-out is written, and finds the others just before, at or just
		// after theirs. The branches take two seconds, so that the kill finds them running.
		var leads, applied strings.Builder
		for i := 1; i <= runs; i++ {
			fmt.Fprintf(&leads, `
    - when: "question %02[1]d"
      output: "three angles"
      tokens: 100
      delay: %[2]dms
      parallel:
      - {agent: researcher, input: "prior work"}
      - {agent: researcher, input: "current practice"}
      - {agent: critic, input: "weak points"}`, i, 1000+30*(i-1))
			fmt.Fprintf(&applied, `---
apiVersion: agents.baton.dev/v1alpha1
kind: AgentRun
metadata: {name: fan-%02[1]d}
spec: {configRef: {name: research}, input: "question %02[1]d"}
`, i)
		}
		apply(ns, `apiVersion: agents.baton.dev/v1alpha1
kind: AgentConfig
metadata: {name: research}
spec:
  entrypoint: lead
  agents:
  - name: lead
    handoffs: [researcher, critic, writer]
    parallel: {join: {agent: writer}}
    script:`+leads.String()+`
  - {name: researcher, handoffs: [lead], script: [{when: "prior", output: "three surveys", tokens: 30, delay: 2s}, {when: "practice", output: "two vendors", tokens: 20, delay: 2s}]}
  - {name: critic, handoffs: [lead], script: [{output: "two weak points", tokens: 10, delay: 2s}]}
  - {name: writer, terminator: true, script: [{output: "the report", tokens: 400}]}
`+applied.String())
		w := watch("get", "agentruns", "-n", ns, "-w", "-o", "custom-columns=NAME:.metadata.name,UID:.metadata.uid,PARENT:.spec.branch.parent")
		defer w.stop()

		waitFor(ns, "fan-01", `{.status.conditions[?(@.type=="Progressing")].reason}`, "Branching")
		killManager()
		// The restarted operator takes seconds to start: what the API server has now is what the
		// killed one left.
		AddReportEntry("when the operator was killed", fanOutState(ns))

		for i := 1; i <= runs; i++ {
			run := fmt.Sprintf("fan-%02d", i)
			waitFor(ns, run, "{.status.phase}", "Succeeded")
			Expect(branchRows(ns, run)).To(Equal(fmt.Sprintf("%[1]s-b1-1 Succeeded Completed researcher\n"+
				"%[1]s-b1-2 Succeeded Completed researcher\n%[1]s-b1-3 Succeeded Completed critic\n", run)), "exactly one run for each branch")
			Expect(kubectl("get", "agentruns", "-n", ns, "-l", "agents.baton.dev/parent="+run, "-o",
				`jsonpath={range .items[*]}{.status.tokensUsed} {.status.stepCount},{end}`)).To(Equal("30 1,20 1,10 1,"))
			Expect(jsonpath("agentrun", run, ns, "{.status.tokensUsed} {.status.stepCount} {.status.branchSteps}")).To(Equal("560 2 3"),
				"the lead's 100 and the writer's 400, and the branches' 30, 20 and 10 once each")
			Expect(outcomes(ns, run)).To(Equal("FanOut researcher,researcher,critic; Joined writer; Final ; "))
		}
		// Every branch run that ever existed, as the watch saw it: one name and one UID each.
		Eventually(func() []string { return watchedBranches(w) }, 30*time.Second, 100*time.Millisecond).Should(HaveLen(3 * runs))
		Consistently(func() []string { return watchedBranches(w) }, time.Second, 100*time.Millisecond).Should(HaveLen(3 * runs))
	})

	It("joins once, with the same output and counts, across a kill -9 during the join agent's step", func() {
		const ns = "branches-kill-join"
		kubectl("create", "namespace", ns)
		apply(ns, withWriterDelay(researchTeam("join: {agent: writer}", `
      - {agent: researcher, input: "sources on X"}
      - {agent: critic, input: "weak points of X"}`,
			`{name: researcher, handoffs: [lead], script: [{output: "three sources", tokens: 30}]}`,
			`{name: critic, handoffs: [lead], script: [{output: "two weak points", tokens: 20}]}`), "3s")+runOf("report"))
		waitFor(ns, "report", "{.status.currentAgent}", "writer")
		Expect(outcomes(ns, "report")).To(Equal("FanOut researcher,critic; Joined writer; "), "the join is written, the writer's step is under way")
		killManager()

		waitFor(ns, "report", "{.status.phase}", "Succeeded")
		Expect(jsonpath("agentrun", "report", ns, "{.status.terminationReason} {.status.output}")).To(Equal("Completed the report"))
		Expect(jsonpath("agentrun", "report", ns, "{.status.tokensUsed} {.status.stepCount} {.status.branchSteps}")).To(Equal("550 2 2"),
			"the same counts as a run that was not killed")
		Expect(outcomes(ns, "report")).To(Equal("FanOut researcher,critic; Joined writer; Final ; "))
		Expect(branchRows(ns, "report")).To(Equal("report-b1-1 Succeeded Completed researcher\nreport-b1-2 Succeeded Completed critic\n"))
		Expect(joinedInput(ns, "report")).To(Equal("writer: " +
			"## Branch 1: researcher (Completed)\n\nthree sources\n\n## Branch 2: critic (Completed)\n\ntwo weak points"))
	})
})

// researchTeam is an AgentConfig named research: a lead that says "two angles on X" (100
// tokens) and fans out to fanOut's branches ({agent, input} lines), joined as join says by a
// writer that answers "the report" (400 tokens). agents are the branches' agents, one YAML
// flow mapping each; the lead may hand off to every one of them.
func researchTeam(join, fanOut string, agents ...string) string {
	var names []string
	for _, a := range agents {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "{name: "), ",")
		names = append(names, name)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: agents.baton.dev/v1alpha1
kind: AgentConfig
metadata: {name: research}
spec:
  entrypoint: lead
  agents:
  - name: lead
    handoffs: [%s, writer]
    parallel:
      %s
    script:
    - output: "two angles on X"
      tokens: 100
      parallel:%s
  - {name: writer, terminator: true, script: [{output: "the report", tokens: 400}]}
`, strings.Join(names, ", "), join, fanOut)
	for _, a := range agents {
		fmt.Fprintf(&b, "  - %s\n", a)
	}
	return b.String()
}

// withWriterDelay gives researchTeam's writer a delay before it answers.
func withWriterDelay(config, delay string) string {
	return strings.Replace(config, "tokens: 400}", "tokens: 400, delay: "+delay+"}", 1)
}

// runOf is a run of the research config, after a YAML document separator.
func runOf(name string) string {
	return fmt.Sprintf(`---
apiVersion: agents.baton.dev/v1alpha1
kind: AgentRun
metadata: {name: %s}
spec: {configRef: {name: research}, input: "a report on X"}
`, name)
}

// apply is kubectl apply -f - in the namespace.
func apply(ns, yaml string) {
	out, err := kubectlStdin(yaml, "apply", "-n", ns, "-f", "-")
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), out)
}

// kubectlStdinAs runs kubectl with stdin as the user of a kubeconfig.
func kubectlStdinAs(config, stdin string, args ...string) (string, error) {
	cmd := osexec.Command("kubectl", args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+config)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// waitFor is kubectl wait until the run's jsonpath expression has the value.
func waitFor(ns, run, expr, value string) {
	kubectl("wait", "-n", ns, "--for=jsonpath="+expr+"="+value, "--timeout=90s", "agentrun/"+run)
}

// branchRows is kubectl get agentruns -l agents.baton.dev/parent=<run>: a line per branch, with
// its phase, reason and agent.
func branchRows(ns, run string) string {
	return kubectl("get", "agentruns", "-n", ns, "-l", "agents.baton.dev/parent="+run, "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.status.terminationReason} {.spec.branch.agent}{"\n"}{end}`)
}

// outcomes are the run's handoff records, as outcome and to.
func outcomes(ns, run string) string {
	return jsonpath("agentrun", run, ns, `{range .status.handoffSequence[*]}{.outcome} {.to}; {end}`)
}

// fanOutState says how far the runs in the namespace had fanned out: the runs whose status
// names branches, the branch runs made, and the runs with some of their branches not made yet.
func fanOutState(ns string) string {
	out := kubectl("get", "agentruns", "-n", ns, "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.spec.branch.parent} {.status.branches[*].name}{"\n"}{end}`)
	made := map[string]bool{}
	listed := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case strings.Contains(f[0], "-b"):
			made[f[0]] = true
		default:
			listed[f[0]] = f[1:]
		}
	}
	fannedOut, partly := 0, 0
	for _, names := range listed {
		if len(names) > 0 {
			fannedOut++
		}
		for _, n := range names {
			if !made[n] {
				partly++
				break
			}
		}
	}
	return fmt.Sprintf("%d of %d runs had fanned out; %d branch runs made; %d runs named branches not made yet",
		fannedOut, len(listed), len(made), partly)
}

// watchedBranches are the branch runs a watch of agentruns with custom columns NAME, UID and
// PARENT printed, as "name uid", each once.
func watchedBranches(w *watcher) []string {
	seen := map[string]bool{}
	var out []string
	for _, line := range w.output() {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] == "NAME" || f[2] == "<none>" || seen[f[0]+" "+f[1]] {
			continue
		}
		seen[f[0]+" "+f[1]] = true
		out = append(out, f[0]+" "+f[1])
	}
	return out
}

// joinedInput is the agent and the whole input of the step a run's branches were joined into,
// as kubectl baton transcript prints them: its second, after its lead's fan-out.
func joinedInput(ns, run string) string {
	const step = 2
	out := kubectl("baton", "-n", ns, "transcript", run, "--step", itoa(step), "-o", "json")
	var page struct {
		Records []struct {
			Kind string
			Body struct{ Agent, Input string }
		}
	}
	ExpectWithOffset(1, json.Unmarshal([]byte(out), &page)).To(Succeed(), out)
	for _, r := range page.Records {
		if r.Kind == "step" {
			return r.Body.Agent + ": " + r.Body.Input
		}
	}
	Fail(fmt.Sprintf("no record of step %d of %s/%s:\n%s", step, ns, run, out))
	return ""
}
