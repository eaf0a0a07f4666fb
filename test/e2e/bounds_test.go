package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/baton-dev/baton/test/fakes"
)

// Any reader of a run whose model answered megabytes of HTML (a viewer, an approver, a run
// started from it) must not be able to take the operator's memory: the run ends with a reason
// within seconds, and reading it through the transcript API, the console and a from-run at once
// keeps the operator process under 128 MiB above its idle RSS.
var _ = Describe("A run whose model answers 2 MB of HTML a step", Ordered, func() {
	const ns, name = "html", "tables"
	// agents hand off along the chain; the last ends the run.
	agents := []string{"intake", "extract", "normalize", "reconcile", "summarize", "report"}
	const maxOverIdle = 128 << 20
	var idle uint64

	BeforeAll(func() {
		server := fakes.NewOpenAI()
		DeferCleanup(server.Close)
		var config strings.Builder
		fmt.Fprintf(&config, `apiVersion: v1
kind: Secret
metadata: {name: llm, labels: {agents.baton.dev/api-key: "true"}}
stringData: {apiKey: sk-e2e}
---
apiVersion: agents.baton.dev/v1alpha1
kind: AgentConfig
metadata: {name: %s}
spec:
  entrypoint: %s
  agents:
`, name, agents[0])
		for i, a := range agents {
			reply := fakes.Reply{Content: htmlTable(i), Tokens: 20}
			fmt.Fprintf(&config, `  - name: %s
    description: %s the vendor tables
    model: {provider: OpenAI, name: gpt-4o-mini, endpoint: "%s", apiKeySecretRef: {name: llm, key: apiKey}, maxOutputTokens: 200}
`, a, a, server.BaseURL())
			if i < len(agents)-1 {
				fmt.Fprintf(&config, "    handoffs: [%s]\n", agents[i+1])
				reply.ToolCalls = []fakes.ToolCall{{Name: "transfer_to_" + agents[i+1], Args: `{"reason":"tables read"}`}}
			} else {
				config.WriteString("    terminator: true\n")
			}
			// An agent's last reply repeats, so a run started from this one gets the same answers.
			server.ReplyTo(a, reply)
		}
		kubectl("create", "namespace", ns)
		kubectl("apply", "-n", ns, "-f", manifest("html-config.yaml", config.String()))

		// The operator is idle when its RSS stops moving.
		pid := managerProc.Process.Pid
		last := procMemory(pid, "VmRSS")
		Eventually(func() uint64 {
			prev, now := last, procMemory(pid, "VmRSS")
			last = now
			return max(now, prev) - min(now, prev)
		}, time.Minute, time.Second).Should(BeNumerically("<", 1<<20), "the operator's RSS settles")
		idle = last
	})

	It("ends with a reason within seconds, with every step's answer kept", func() {
		pid := managerProc.Process.Pid
		resetPeakRSS(pid)
		start := time.Now()
		kubectl("apply", "-n", ns, "-f", manifest("html-run.yaml", fmt.Sprintf(`apiVersion: agents.baton.dev/v1alpha1
kind: AgentRun
metadata: {name: %s}
spec: {configRef: {name: %s}, input: "Reconcile the vendor tables"}
`, name, name)))
		waitForEnd(ns, name)
		took := time.Since(start)
		peak := procMemory(pid, "VmHWM")
		Expect(jsonpath("agentrun", name, ns, "{.status.phase} {.status.stepCount} {.status.terminationReason}")).
			To(Equal("Succeeded 6 Completed"), jsonpath("agentrun", name, ns, "{.status.terminationMessage}"))
		startTime, completionTime := runTimes(ns, name)
		Expect(completionTime.Sub(startTime)).To(BeNumerically("<", 60*time.Second))
		stored, err := strconv.ParseInt(jsonpath("agentrun", name, ns, "{.status.transcriptBytes}"), 10, 64)
		Expect(err).NotTo(HaveOccurred())
		Expect(stored).To(BeNumerically(">", 5<<20), "each step's record keeps about a megabyte of its answer")
		AddReportEntry("2 MB HTML answers", fmt.Sprintf("%d steps in %s (from apply to its end, %s), %d transcript bytes; the operator's peak RSS meanwhile %.1f MiB, idle %.1f MiB",
			len(agents), completionTime.Sub(startTime), took.Round(100*time.Millisecond), stored, mib(peak), mib(idle)))
	})

	It("is read through the transcript API, the console and a run started from it at once, with the operator under 128 MiB above idle", func() {
		pid := managerProc.Process.Pid
		ended := procMemory(pid, "VmRSS")
		console := startUI(kubeconfig, "--namespaces", ns)
		cookie := consoleCookie(console)
		resetPeakRSS(pid)
		Expect(procMemory(pid, "VmHWM")).To(BeNumerically("<=", procMemory(pid, "VmRSS")+(4<<20)), "the peak RSS count starts again")

		var readers sync.WaitGroup
		read := func(what string, f func()) {
			readers.Add(1)
			go func() {
				defer GinkgoRecover()
				defer readers.Done()
				began := time.Now()
				f()
				GinkgoWriter.Printf("Read %s in %s\n", what, time.Since(began).Round(100*time.Millisecond))
			}()
		}
		for i := range 3 {
			read(fmt.Sprintf("kubectl baton transcript (%d)", i+1), func() {
				out, err := kubectlAs(kubeconfig, "baton", "-n", ns, "transcript", name)
				Expect(err).NotTo(HaveOccurred(), tail(out, 20))
				Expect(out).To(ContainSubstring("=== step 6: report"))
				Expect(strings.Count(out, "<tr><td>row</td>")).To(BeNumerically(">", 6*10000), "the answers are printed whole")
			})
		}
		for _, path := range []string{"/runs/" + ns + "/" + name, "/runs/" + ns + "/" + name, "/runs/" + ns + "/" + name + "/steps/3"} {
			read("the console's "+path, func() {
				body := consoleGet(console, cookie, path)
				if strings.HasSuffix(path, "/steps/3") {
					Expect(body).To(ContainSubstring("&lt;p&gt;2&lt;/p&gt;"), "the step's answer")
				} else {
					Expect(body).To(ContainSubstring(`aria-label="Step 6 transcript"`))
				}
			})
		}
		read("a run started from it after step 4", func() {
			kubectl("apply", "-n", ns, "-f", manifest("html-again.yaml", fmt.Sprintf(`apiVersion: agents.baton.dev/v1alpha1
kind: AgentRun
metadata: {name: again}
spec:
  configRef: {name: %s}
  from: {run: %s, step: 4}
`, name, name)))
			waitForEnd(ns, "again")
			Expect(jsonpath("agentrun", "again", ns, "{.status.phase} {.status.stepCount}")).To(Equal("Succeeded 6"),
				jsonpath("agentrun", "again", ns, "{.status.terminationMessage}"))
		})
		readers.Wait()

		Expect(managerProc.Process.Pid).To(Equal(pid), "the operator was restarted while it was read")
		Expect(managerProc.ProcessState).To(BeNil(), "the operator exited while it was read")
		peak := procMemory(pid, "VmHWM")
		figures := fmt.Sprintf("idle RSS %.1f MiB, after the run %.1f MiB, peak while read %.1f MiB: %.1f MiB over idle (bound %d MiB)",
			mib(idle), mib(ended), mib(peak), mib(peak-min(peak, idle)), maxOverIdle>>20)
		AddReportEntry("operator memory while 3 transcript reads, 3 console pages and a from-run read the run", figures)
		GinkgoWriter.Println("Operator memory: " + figures)
		Expect(peak-min(peak, idle)).To(BeNumerically("<", maxOverIdle), figures)
	})
})

// htmlTable is 2 MB of HTML, numbered to tell answers apart.
func htmlTable(n int) string {
	return fmt.Sprintf("<p>%d</p>", n) + strings.Repeat("<tr><td>row</td><td>&amp; \"quoted\"</td></tr>\n", (2<<20)/48)
}

// waitForEnd waits until a run is in a terminal phase.
func waitForEnd(namespace, run string) {
	EventuallyWithOffset(1, func() string {
		return jsonpath("agentrun", run, namespace, "{.status.phase}")
	}, 2*time.Minute, 200*time.Millisecond).Should(BeElementOf("Succeeded", "Failed", "Cancelled"), "agentrun %s/%s ends", namespace, run)
}

// runTimes are a run's start and completion times.
func runTimes(namespace, run string) (time.Time, time.Time) {
	start, end, _ := strings.Cut(jsonpath("agentrun", run, namespace, "{.status.startTime} {.status.completionTime}"), " ")
	s, err := time.Parse(time.RFC3339, start)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	e, err := time.Parse(time.RFC3339, end)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return s, e
}

// procMemory is a field of a process's /proc status (VmRSS, VmHWM), in bytes.
func procMemory(pid int, field string) uint64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			ExpectWithOffset(1, err).NotTo(HaveOccurred())
			return kb << 10
		}
	}
	Fail(fmt.Sprintf("no %s in /proc/%d/status", field, pid), 1)
	return 0
}

// resetPeakRSS starts a process's peak RSS count (VmHWM) again from its current RSS.
func resetPeakRSS(pid int) {
	ExpectWithOffset(1, os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)).To(Succeed())
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// consoleCookie opens a console's printed URL, as a browser would, and returns the cookie it
// is given for the console's pages.
func consoleCookie(ui *consoleUI) *http.Cookie {
	plain := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := plain.Get(ui.url)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	resp.Body.Close()
	ExpectWithOffset(1, resp.StatusCode).To(Equal(http.StatusSeeOther))
	ExpectWithOffset(1, resp.Cookies()).NotTo(BeEmpty())
	ui.opened = true
	return resp.Cookies()[0]
}

// consoleGet is a console page's body, read with the console's cookie.
func consoleGet(ui *consoleUI, cookie *http.Cookie, path string) string {
	req, err := http.NewRequest(http.MethodGet, origin(ui)+path, nil)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	req.AddCookie(cookie)
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	ExpectWithOffset(1, resp.StatusCode).To(Equal(http.StatusOK), "GET %s: %.2000s", path, body)
	return string(body)
}
