package e2e

import (
	"encoding/xml"
	"errors"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// junitXML is what CI reads of a JUnit report.
type junitXML struct {
	Tests    int `xml:"tests,attr"`
	Failures int `xml:"failures,attr"`
	Errors   int `xml:"errors,attr"`
	Suites   []struct {
		Name  string `xml:"name,attr"`
		Cases []struct {
			Name    string `xml:"name,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func readJUnit(path string) junitXML {
	var j junitXML
	ExpectWithOffset(1, xml.Unmarshal([]byte(readFile(path)), &j)).To(Succeed())
	ExpectWithOffset(1, j.Suites).To(HaveLen(1))
	return j
}

var _ = Describe("Replay tests with kubectl baton test", func() {
	It("passes the helpdesk's recorded runs on the sample config, fails the one a lower maxHandoffs cuts, and passes a run recorded now", func() {
		tests := sample(filepath.Join("replay-tests", "helpdesk"))

		By("the sample config: every case passes, exit 0, and the JUnit XML says so")
		junit := filepath.Join(stateDir, "replay-tests.xml")
		out := kubectl("baton", "test", tests, "--config", sample("helpdesk.yaml"), "--junit", junit)
		Expect(out).To(ContainSubstring("PASS   ticket-1234\n"), out)
		Expect(out).To(ContainSubstring("PASS   ticket-1235\n"), out)
		Expect(out).To(ContainSubstring("2 cases: 2 passed, 0 failed\n"), out)
		j := readJUnit(junit)
		Expect([]int{j.Tests, j.Failures, j.Errors}).To(Equal([]int{2, 0, 0}))
		Expect(j.Suites[0].Name).To(Equal("helpdesk"))
		Expect(j.Suites[0].Cases).To(HaveLen(2))
		for _, c := range j.Suites[0].Cases {
			Expect(c.Failure).To(BeNil(), c.Name)
		}

		By("a lower maxHandoffs: the case it cuts fails, exit 1, and the JUnit XML names it")
		changed := strings.Replace(readFile(sample("helpdesk.yaml")), "    maxHandoffs: 20\n", "    maxHandoffs: 3\n", 1)
		Expect(changed).To(ContainSubstring("maxHandoffs: 3"))
		lower := manifest("helpdesk-lower-tests.yaml", changed)
		out, err := tryKubectl("baton", "test", tests, "--config", lower, "--junit", junit)
		var exit *osexec.ExitError
		Expect(errors.As(err, &exit)).To(BeTrue(), "kubectl baton test fails: %v\n%s", err, out)
		Expect(exit.ExitCode()).To(Equal(1))
		Expect(out).To(ContainSubstring("FAIL   ticket-1234\n       reason: the replayed run ended MaxHandoffsExceeded, want Terminated\n"), out)
		Expect(out).To(ContainSubstring("path: the replayed path ends after 3 handoffs, want handoff 4 ticketing -> orchestrator"))
		Expect(out).To(ContainSubstring("PASS   ticket-1235\n"), "its own limits hold it to 3 handoffs whatever the config says")
		Expect(out).To(ContainSubstring("error: 1 of 2 cases failed"))
		j = readJUnit(junit)
		Expect([]int{j.Tests, j.Failures, j.Errors}).To(Equal([]int{2, 1, 0}))
		failed := j.Suites[0].Cases[0]
		Expect(failed.Name).To(Equal("ticket-1234"))
		Expect(failed.Failure).NotTo(BeNil())
		Expect(failed.Failure.Message).To(Equal("reason: the replayed run ended MaxHandoffsExceeded, want Terminated"))
		Expect(failed.Failure.Text).To(ContainSubstring("want handoff 4 ticketing -> orchestrator"))
		Expect(j.Suites[0].Cases[1].Failure).To(BeNil())

		By("a case whose recording cannot be read: exit 2, apart from a case that fails")
		broken := filepath.Join(stateDir, "broken-tests")
		Expect(os.MkdirAll(filepath.Join(broken, "torn"), 0o700)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(broken, "torn", "run.json"), []byte(`{"apiVersion": "agents.baton.dev/transcript-v1", "kind": "Transcript", "records": [`), 0o600)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(broken, "torn", "expect.yaml"), []byte("reason: Completed\n"), 0o600)).To(Succeed())
		out, err = tryKubectl("baton", "test", broken)
		Expect(errors.As(err, &exit)).To(BeTrue(), "kubectl baton test fails: %v\n%s", err, out)
		Expect(exit.ExitCode()).To(Equal(2), out)
		Expect(out).To(ContainSubstring("0 of 1 cases failed and 1 could not be replayed"))

		By("a run recorded now, exported as the docs say, passes the sample's expectations against the AgentConfig on the cluster")
		const ns = "replay-tests"
		kubectl("create", "namespace", ns)
		kubectl("apply", "-n", ns, "-f", sample("helpdesk.yaml"))
		kubectl("wait", "-n", ns, "--for=condition=Ready", "--timeout=120s", "agentrun/ticket-1234")
		fresh := filepath.Join(stateDir, "fresh-tests", "ticket-1234")
		Expect(os.MkdirAll(fresh, 0o700)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(fresh, "run.json"), []byte(kubectl("baton", "-n", ns, "transcript", "ticket-1234", "-o", "json")), 0o600)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(fresh, "expect.yaml"), []byte(readFile(filepath.Join(tests, "ticket-1234", "expect.yaml"))), 0o600)).To(Succeed())
		out = kubectl("baton", "-n", ns, "test", filepath.Dir(fresh), "--config", "helpdesk")
		Expect(out).To(ContainSubstring("against config helpdesk of namespace " + ns))
		Expect(out).To(ContainSubstring("1 case: 1 passed, 0 failed\n"), out)
	})
})
