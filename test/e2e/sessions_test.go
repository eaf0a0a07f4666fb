package e2e

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("A session with kubectl baton chat", Ordered, func() {
	const ns = "sessions"
	BeforeAll(func() {
		kubectl("create", "namespace", ns)
		kubectl("apply", "-n", ns, "-f", manifest("desk.yaml", `apiVersion: agents.baton.dev/v1alpha1
kind: AgentConfig
metadata: {name: desk}
spec:
  entrypoint: desk
  agents:
  - {name: desk, terminator: true, script: [{output: "noted"}]}
`))
	})

	It("starts a session, sends each line as a turn in order, and gives the second turn the first", func() {
		out, err := kubectlStdin("first question\nsecond question\n", "baton", "-n", ns, "chat", "ticket", "--new", "desk")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("agentsession.agents.baton.dev/ticket created"))
		Expect(out).To(MatchRegexp(`(?s)agentrun.agents.baton.dev/ticket-t1 created\n.*turn ticket-t1 ended Succeeded \(Completed\)\n  noted\n` +
			`agentrun.agents.baton.dev/ticket-t2 created\n.*given 1 earlier turns; \S+ asks: second question\n.*turn ticket-t2 ended Succeeded`))
		Eventually(func() string {
			return jsonpath("agentsession", "ticket", ns, "{.status.phase} {.status.turns} {.status.lastRun}")
		}, "60s").Should(Equal("Idle 2 ticket-t2"))
		Expect(kubectl("get", "agentsessions", "-n", ns)).To(MatchRegexp(`NAME\s+PHASE\s+TURNS\s+LAST RUN\s+TOKENS\s+COST\s+REASON\s+AGE\nticket\s+Idle\s+2\s+ticket-t2`))
		Expect(kubectl("baton", "-n", ns, "transcript", "ticket-t2")).To(MatchRegexp(
			`ticket-t1: \S+ asked:\n  first question\nthe team answered:\n  noted\n`))

		Expect(kubectl("baton", "-n", ns, "describe", "agentsession/ticket")).To(MatchRegexp(
			`(?s)Session:\s+sessions/ticket\nConfig:\s+desk\nPhase:\s+Idle\n.*Turns:\n\s+TURN\s+RUN.*\n\s+1\s+ticket-t1\s+Succeeded.*first question\n\s+2\s+ticket-t2\s+Succeeded.*second question\nLast answer \(ticket-t2\):\n  noted\n`))

		By("going on with the session: without --new, chat takes the next turn")
		out, err = kubectlStdin("third\n", "baton", "-n", ns, "chat", "ticket")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("given 2 earlier turns"))
		Expect(out).To(ContainSubstring("turn ticket-t3 ended Succeeded"))
	})

	It("ends a session by hand: a turn created after fails SessionEnded", func() {
		kubectl("annotate", "-n", ns, "agentsession/ticket", "agents.baton.dev/end=the customer left")
		Eventually(func() string {
			return jsonpath("agentsession", "ticket", ns, "{.status.phase} {.status.endReason} {.status.endMessage}")
		}, "60s").Should(Equal("Ended Ended the customer left"))
		out, err := kubectlStdin("anyone there?\n", "baton", "-n", ns, "chat", "ticket")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("turn ticket-t4 ended Failed (SessionEnded)"))
	})

	It("goes on after the operator is killed mid-turn: the turn resumes, and the next has it in its history once", func() {
		kubectl("apply", "-n", ns, "-f", manifest("support.yaml", `apiVersion: agents.baton.dev/v1alpha1
kind: AgentConfig
metadata: {name: slowdesk}
spec:
  entrypoint: triage
  agents:
  - {name: triage, handoffs: [desk], script: [{output: "for the desk", handoff: desk, delay: 1500ms}]}
  - {name: desk, terminator: true, script: [{output: "fixed", delay: 4s}]}
---
apiVersion: agents.baton.dev/v1alpha1
kind: AgentSession
metadata: {name: support}
spec: {configRef: {name: slowdesk}}
---
apiVersion: agents.baton.dev/v1alpha1
kind: AgentRun
metadata: {name: support-t1}
spec: {session: {name: support}, input: "the printer is jammed"}
`))
		By("killing the operator with SIGKILL while the first turn's second step is in flight")
		Eventually(func() string {
			return jsonpath("agentrun", "support-t1", ns, "{.status.stepCount}")
		}, "60s", "100ms").Should(Equal("1"))
		killManager()
		kubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=Succeeded", "--timeout=90s", "agentrun/support-t1")
		Expect(jsonpath("agentrun", "support-t1", ns, "{.status.stepCount} {range .status.handoffSequence[*]}{.step},{end}")).
			To(Equal("2 1,2,"), "each step taken once")

		By("the next turn is given the first once")
		out, err := kubectlStdin("it jams again\n", "baton", "-n", ns, "chat", "support")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("turn support-t2 ended Succeeded"))
		transcript := kubectl("baton", "-n", ns, "transcript", "support-t2")
		Expect(transcript).To(ContainSubstring("given 1 earlier turns"))
		Expect(strings.Count(transcript, "support-t1: ")).To(Equal(1), transcript)
		Expect(transcript).To(MatchRegexp(`support-t1: \S+ asked:\n  the printer is jammed\nthe team answered:\n  fixed\n`))
		Eventually(func() string {
			return jsonpath("agentsession", "support", ns, "{.status.phase} {.status.turns}")
		}, "60s").Should(Equal("Idle 2"))
	})
})
