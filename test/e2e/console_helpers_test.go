package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// What the console's specs share: kubectl baton ui run as a person, and the browser's view of
// its pages.

// consoleUI is a running kubectl baton ui.
type consoleUI struct {
	cmd    *osexec.Cmd
	url    string
	opened bool
}

// startUI runs kubectl baton ui with a person's kubeconfig and reads the URL it prints.
func startUI(config string, args ...string) *consoleUI {
	cmd := osexec.Command("kubectl", append([]string{"baton", "ui", "--port", "0"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+config)
	stdout, err := cmd.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	logFile, err := os.Create(filepath.Join(stateDir, "ui-"+filepath.Base(config)+".log"))
	Expect(err).NotTo(HaveOccurred())
	cmd.Stderr = logFile
	Expect(cmd.Start()).To(Succeed())
	DeferCleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := regexp.MustCompile(`(http://127\.\d+\.\d+\.\d+:\d+/\?token=\S+)`).FindString(sc.Text()); m != "" {
				found <- m
			}
		}
	}()
	select {
	case u := <-found:
		return &consoleUI{cmd: cmd, url: u}
	case <-time.After(30 * time.Second):
		Fail("kubectl baton ui printed no URL; its log: " + readFile(logFile.Name()))
	}
	return nil
}

func origin(ui *consoleUI) string {
	u, _ := url.Parse(ui.url)
	return "http://" + u.Host
}

func run(ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ExpectWithOffset(1, chromedp.Do(c, actions...)).To(Succeed())
}

func location(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	return loc
}

func pageText(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	return text
}

// gateSince is when the gate the page offers to decide opened, as its approve form says, or
// "" when the page offers none.
func gateSince(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	since, _ := chromedp.Run(ctx, chromedp.Evaluate[string](
		`(document.querySelector("form.approve input[name=since]") || {value: ""}).value`))
	return since
}

// waitText waits until the page shows text; the page is not reloaded for it.
func waitText(ctx context.Context, text string) {
	EventuallyWithOffset(1, func() string { return pageText(ctx) }, time.Minute, 100*time.Millisecond).Should(ContainSubstring(text))
}

// markPage marks the page in the browser; samePage says whether the mark is still there, i.e.
// whether the page changed in place rather than by a reload.
func markPage(ctx context.Context) {
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.consoleTestMark = true`))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
}

func samePage(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	marked, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.consoleTestMark === true`))
	return marked
}

// tabTo presses Tab until the focused element's text is label, at most 100 times.
func tabTo(ctx context.Context, label string) bool {
	for range 100 {
		run(ctx, chromedp.KeyEvent("\t"))
		focused, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement ? document.activeElement.innerText || "" : ""`))
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		if strings.TrimSpace(focused) == label {
			return true
		}
	}
	return false
}

// tableCell is the text of the cell labelled label (its data-label) in the table row that
// selector finds, or "" when there is none.
func tableCell(ctx context.Context, row, label string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cell := fmt.Sprintf("td[data-label=%q]", label)
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(
		`(function () { var tr = document.querySelector(%q); var td = tr && tr.querySelector(%q); return td ? td.innerText.trim() : ""; })()`, row, cell)))
	return text
}

// pricedTeam is a team on the ModelEndpoint llm at url, priced for gpt-4o-mini, with its key's
// Secret, and a run of it: triage hands the work to writer, whose answer ends the run.
func pricedTeam(url string) string {
	agent := func(name, then string) string {
		return fmt.Sprintf(`  - name: %s
    description: %s work
    model: {endpointRef: {name: llm}, name: gpt-4o-mini, maxOutputTokens: 200}
    %s
`, name, name, then)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: llm, labels: {agents.baton.dev/api-key: "true"}}
stringData: {apiKey: sk-e2e}
---
apiVersion: agents.baton.dev/v1alpha1
kind: ModelEndpoint
metadata: {name: llm}
spec:
  provider: OpenAI
  url: "%s"
  apiKeySecretRef: {name: llm, key: apiKey}
  limits: {requestsPerMinute: 500, tokensPerMinute: 200000, maxConcurrent: 8}
  prices: [{model: gpt-4o-mini, input: "0.15", cachedInput: "0.075", output: "0.60"}]
---
apiVersion: agents.baton.dev/v1alpha1
kind: AgentConfig
metadata: {name: priced}
spec:
  entrypoint: triage
  agents:
%s%s---
apiVersion: agents.baton.dev/v1alpha1
kind: AgentRun
metadata: {name: priced}
spec: {configRef: {name: priced}, input: "an invoice"}
`, url, agent("triage", "handoffs: [writer]"), agent("writer", "terminator: true"))
}
