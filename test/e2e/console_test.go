package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/baton-dev/baton/test/fakes"
)

// The web console, driven in a real headless Chromium: kubectl baton ui runs as a person (their
// own kubeconfig) and the browser does what they would. Screenshots of every page go to
// bin/e2e/console.
var _ = Describe("kubectl baton ui", Ordered, func() {
	const ns, sod = "console", "console-sod"
	var (
		alice, bob       *consoleUI
		browser          context.Context
		closeBrowser     func()
		screenshotFolder = filepath.Join(root, "bin", "e2e", "console")
	)

	BeforeAll(func() {
		kubectl("apply", "-f", filepath.Join(root, "config", "rbac", "approver_role.yaml"))
		config, _, _ := strings.Cut(readFile(sample("approvals-pipeline.yaml")), "\n---\n")
		// In console, alice may approve and bob may not; in console-sod, the plan gate needs
		// someone other than the run's creator, and both may approve.
		for _, n := range []string{ns, sod} {
			kubectl("create", "namespace", n)
			kubectl("create", "role", "run-user", "-n", n, "--verb=get,list,watch,patch,create", "--resource=agentruns.agents.baton.dev")
			kubectl("create", "role", "config-reader", "-n", n, "--verb=get,list,watch", "--resource=agentconfigs.agents.baton.dev")
			kubectl("create", "rolebinding", "run-users", "-n", n, "--role=run-user", "--user=alice", "--user=bob")
			kubectl("create", "rolebinding", "config-readers", "-n", n, "--role=config-reader", "--user=alice", "--user=bob")
		}
		kubectl("create", "rolebinding", "approvers", "-n", ns, "--clusterrole=approver", "--user=alice")
		kubectl("create", "rolebinding", "approvers", "-n", sod, "--clusterrole=approver", "--user=alice", "--user=bob")
		out, err := kubectlStdin(config, "apply", "-n", ns, "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		separated := strings.Replace(config, "    onTimeout: Reject\n", "    onTimeout: Reject\n    allowSelfApproval: false\n", 1)
		Expect(separated).To(ContainSubstring("allowSelfApproval: false"))
		out, err = kubectlStdin(separated, "apply", "-n", sod, "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)

		alice = startUI(filepath.Join(stateDir, "kubeconfig-alice"), "--namespaces", ns+","+sod)
		bob = startUI(filepath.Join(stateDir, "kubeconfig-bob"), "--namespaces", ns+","+sod)

		chromium := os.Getenv("CHROMIUM_BIN")
		Expect(chromium).NotTo(BeEmpty(), "CHROMIUM_BIN is not set: run 'make test-e2e', which finds or installs Chromium (hack/chromium.sh)")
		Expect(os.MkdirAll(screenshotFolder, 0o755)).To(Succeed())
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
			chromedp.Flag("disable-background-networking", true), chromedp.WindowSize(1280, 900))
		allocator, cancelAllocator := chromedp.NewExecAllocator(context.Background(), opts...)
		browser, closeBrowser = chromedp.NewContext(allocator)
		DeferCleanup(func() { closeBrowser(); cancelAllocator() })
		Expect(chromedp.Do(browser)).To(Succeed(), "starting Chromium")
	})

	// tab is a new browser tab that has opened the console's printed URL.
	// The printed URL works once; the browser that opened it holds the console's cookie, so
	// later tabs open the console's pages directly.
	tab := func(ui *consoleUI) context.Context {
		ctx, cancel := chromedp.NewContext(browser)
		DeferCleanup(cancel)
		// The tab lives as long as the context of its first action: that one has no timeout.
		Expect(chromedp.Do(ctx)).To(Succeed())
		if ui.opened {
			run(ctx, chromedp.Navigate(origin(ui)+"/runs"))
		} else {
			run(ctx, chromedp.Navigate(ui.url))
			ui.opened = true
		}
		Eventually(func() string { return location(ctx) }, 10*time.Second, 100*time.Millisecond).Should(HaveSuffix("/runs"))
		return ctx
	}
	shoot := func(ctx context.Context, name string) {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(screenshotFolder, name+".png"), png, 0o644)).To(Succeed())
	}

	It("starts a run of a config from its input box, and shows it waiting at the plan gate with the plan to judge", func() {
		ctx := tab(alice)
		run(ctx, chromedp.Click(chromedp.CSS(`a[href="/new"]`)), chromedp.WaitVisible(chromedp.CSS(`#input`)))
		shoot(ctx, "new-run")
		run(ctx,
			chromedp.SetValue(chromedp.CSS(`#config`), ns+"/vendor-review"),
			chromedp.SendKeys(chromedp.CSS(`#input`), "Review vendor Acme Corp before the Q4 contract renewal"),
			chromedp.SendKeys(chromedp.CSS(`#name`), "acme"),
			chromedp.Submit(chromedp.CSS(`#input`)))
		Eventually(func() string { return location(ctx) }, 10*time.Second, 100*time.Millisecond).Should(ContainSubstring("/runs/console/acme"), func() string { return pageText(ctx) })
		markPage(ctx)
		// The run reaches its gate while the page is open: the page follows it without a reload.
		waitText(ctx, "Waiting at gate plan")
		Expect(pageText(ctx)).To(ContainSubstring("Plan: 1) gmail: invoice emails from Acme"))
		Expect(samePage(ctx)).To(BeTrue(), "the page reloaded instead of updating in place")
		Expect(jsonpath("agentrun", "acme", ns, "{.spec.input}")).To(Equal("Review vendor Acme Corp before the Q4 contract renewal"))
		shoot(ctx, "run-waiting")
	})

	It("lists the gate in the inbox with the plan; approving it from the keyboard moves the run to the final gate, live", func() {
		ctx := tab(alice)
		run(ctx, chromedp.Navigate(origin(alice)+"/inbox"))
		waitText(ctx, "1 waiting for you")
		text := pageText(ctx)
		Expect(text).To(ContainSubstring("acme"))
		Expect(text).To(ContainSubstring("at gate plan"))
		Expect(text).To(ContainSubstring("Plan: 1) gmail"))
		shoot(ctx, "inbox")

		// Every action is reachable from the keyboard: Tab to the approve button, Enter.
		Expect(tabTo(ctx, "Approve plan")).To(BeTrue(), "the approve button cannot be reached with Tab")
		run(ctx, chromedp.KeyEvent("\r"))
		Eventually(func() string { return location(ctx) }, 10*time.Second, 100*time.Millisecond).Should(ContainSubstring("/inbox?notice="))
		waitText(ctx, "Your approval of gate plan was sent")

		run(ctx, chromedp.Navigate(origin(alice)+"/runs/console/acme"))
		markPage(ctx)
		waitText(ctx, "Waiting at gate final")
		Expect(samePage(ctx)).To(BeTrue())
		text = pageText(ctx)
		Expect(text).To(ContainSubstring("Approved plan by alice"))
		Expect(text).To(ContainSubstring("Risk: medium"))
		Expect(text).To(MatchRegexp(`planner → gmail: 1`))
		Expect(text).To(MatchRegexp(`crm → analysis: 1`))
		shoot(ctx, "run-final-gate")
	})

	It("sends the results back to an agent with feedback, then approves them, and the run succeeds", func() {
		ctx := tab(alice)
		run(ctx, chromedp.Navigate(origin(alice)+"/runs/console/acme"))
		waitText(ctx, "Waiting at gate final")
		judged := gateSince(ctx)
		Expect(judged).NotTo(BeEmpty())
		run(ctx,
			chromedp.SetValue(chromedp.CSS(`form.revise select[name=revise]`), "crm"),
			chromedp.SendKeys(chromedp.CSS(`form.revise textarea[name=feedback]`), "check whether the disputes are resolved"),
			chromedp.Click(chromedp.CSS(`form.revise button`)))
		waitText(ctx, "Gate final was sent back to crm")
		markPage(ctx)
		waitText(ctx, "Rejected final by alice, back to crm: “check whether the disputes are resolved”")
		waitText(ctx, "Risk: low")
		// The timeline follows the transcript, which is written before the status: the page
		// may show the new analysis while the gate it offers is still the one judged. The
		// gate has opened again once the page offers a gate opened at another time.
		Eventually(func() string { return gateSince(ctx) }, time.Minute, 100*time.Millisecond).
			ShouldNot(Or(BeEmpty(), Equal(judged)), func() string { return pageText(ctx) })
		waitText(ctx, "Waiting at gate final")
		Expect(samePage(ctx)).To(BeTrue())
		Expect(pageText(ctx)).To(ContainSubstring("crm → analysis: 2"))
		shoot(ctx, "run-revised")

		run(ctx, chromedp.Click(chromedp.CSS(`form.approve button`)))
		waitText(ctx, "Your approval of gate final was sent")
		waitText(ctx, "Succeeded")
		Expect(jsonpath("agentrun", "acme", ns, `{range .status.approvals[*]}{.decision} {.gate} {.by}{"\n"}{end}`)).
			To(Equal("Approved plan alice\nRejected final alice\nApproved final alice\n"))
		shoot(ctx, "run-succeeded")
	})

	It("shows each step's transcript a click away", func() {
		ctx := tab(alice)
		run(ctx, chromedp.Navigate(origin(alice)+"/runs/console/acme"), chromedp.WaitVisible(chromedp.CSS(`a[aria-label="Step 1 transcript"]`)),
			chromedp.Click(chromedp.CSS(`a[aria-label="Step 1 transcript"]`)))
		waitText(ctx, "Step 1: planner")
		text := pageText(ctx)
		Expect(text).To(ContainSubstring("Review vendor Acme Corp before the Q4 contract renewal"))
		Expect(text).To(ContainSubstring("Plan: 1) gmail"))
		Expect(text).To(ContainSubstring("hand off to gmail"))
		shoot(ctx, "step")
	})

	It("shows someone without the approve verb the API server's refusal, as it gave it", func() {
		kubectl("apply", "-n", ns, "-f", sample("approvals-pipeline.yaml"))
		kubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=AwaitingApproval", "--timeout=60s", "agentrun/vendor-review")
		ctx := tab(bob)
		run(ctx, chromedp.Navigate(origin(bob)+"/runs/console/vendor-review"))
		waitText(ctx, "Waiting at gate plan")
		Expect(pageText(ctx)).To(ContainSubstring("You do not have the approve verb"))
		run(ctx, chromedp.Click(chromedp.CSS(`form.approve button`)))
		waitText(ctx, `user "bob" may not approve gates of AgentRun console/vendor-review: it needs the "approve" verb on agentruns.agents.baton.dev in namespace console`)
		Expect(pageText(ctx)).To(ContainSubstring(`admission webhook "decisions.agents.baton.dev" denied the request`))
		Expect(jsonpath("agentrun", "vendor-review", ns, "{.status.phase}")).To(Equal("AwaitingApproval"))
		shoot(ctx, "refused")

		run(ctx, chromedp.Navigate(origin(bob)+"/inbox"))
		waitText(ctx, "0 waiting for you")
	})

	It("fits a 1280 px screen and a phone's: nothing runs off the side of any page", func() {
		ctx := tab(alice)
		for _, screen := range []struct {
			name          string
			width, height int64
		}{{"desktop", 1280, 900}, {"phone", 390, 844}} {
			run(ctx, chromedp.EmulateViewport(screen.width, screen.height))
			for name, path := range map[string]string{"runs": "/runs", "run": "/runs/console/vendor-review",
				"inbox": "/inbox", "new": "/new", "step": "/runs/console/acme/steps/1", "endpoints": "/endpoints"} {
				run(ctx, chromedp.Navigate(origin(alice)+path), chromedp.WaitReady(chromedp.CSS("body")))
				width, err := chromedp.Run(ctx, chromedp.Evaluate[int64](`document.documentElement.scrollWidth`))
				Expect(err).NotTo(HaveOccurred())
				Expect(width).To(BeNumerically("<=", screen.width), "%s is %d px wide on a %d px screen", path, width, screen.width)
				shoot(ctx, screen.name+"-"+name)
			}
		}
	})

	It("says why the person who started a run may not approve a gate that needs someone else, and lets another approve", func() {
		ctx := tab(alice)
		run(ctx, chromedp.Navigate(origin(alice)+"/new"), chromedp.WaitVisible(chromedp.CSS(`#input`)),
			chromedp.SetValue(chromedp.CSS(`#config`), sod+"/vendor-review"),
			chromedp.SendKeys(chromedp.CSS(`#input`), "Review vendor Initech"),
			chromedp.SendKeys(chromedp.CSS(`#name`), "initech"),
			chromedp.Submit(chromedp.CSS(`#input`)))
		waitText(ctx, "Waiting at gate plan")
		Expect(jsonpath("agentrun", "initech", sod, `{.metadata.annotations.agents\.baton\.dev/created-by}`)).To(Equal("alice"))
		Expect(pageText(ctx)).To(ContainSubstring("You created this run, and gate plan needs an approver other than the run's creator"))

		// Her inbox does not offer it; if she approves anyway, the operator refuses and the page says why.
		run(ctx, chromedp.Navigate(origin(alice)+"/inbox"))
		waitText(ctx, "waiting for you")
		Expect(pageText(ctx)).NotTo(ContainSubstring("initech"))
		run(ctx, chromedp.Navigate(origin(alice)+"/runs/"+sod+"/initech"), chromedp.WaitVisible(chromedp.CSS(`form.approve button`)),
			chromedp.Click(chromedp.CSS(`form.approve button`)))
		waitText(ctx, "Decision refused (SelfApprovalNotAllowed)")
		waitText(ctx, "alice created this run, and gate plan needs an approver other than the run's creator (allowSelfApproval: false)")
		Expect(jsonpath("agentrun", "initech", sod, "{.status.pendingApproval.gate}")).To(Equal("plan"))
		shoot(ctx, "self-approval-refused")

		other := tab(bob)
		run(other, chromedp.Navigate(origin(bob)+"/inbox"))
		waitText(other, "initech")
		run(other, chromedp.Click(chromedp.CSS(`form.approve button`)))
		waitText(other, "Your approval of gate plan was sent")
		// alice's page follows: the gate passed on bob's approval.
		waitText(ctx, "Approved plan by bob")
		waitText(ctx, "Waiting at gate final")
	})

	It("starts a run again from after a step, and cancels a run", func() {
		ctx := tab(alice)
		run(ctx, chromedp.Navigate(origin(alice)+"/runs?phase=Succeeded"))
		waitText(ctx, "1 run")
		Expect(pageText(ctx)).To(ContainSubstring("acme"))

		run(ctx, chromedp.Navigate(origin(alice)+"/runs/console/acme"), chromedp.WaitVisible(chromedp.CSS(`#retry-step`)),
			chromedp.SetValue(chromedp.CSS(`#retry-step`), "2"), chromedp.Click(chromedp.CSS(`#retry-run`)))
		waitText(ctx, "Started from where acme was after step 2.")
		Expect(pageText(ctx)).To(MatchRegexp(`From\s+acme after step 2`))
		// Steps 1 and 2 are not paid for again; the run goes on from accounts-payable.
		waitText(ctx, "Waiting at gate final")
		retried := strings.TrimPrefix(strings.Split(location(ctx), "?")[0], origin(alice)+"/runs/console/")
		Expect(jsonpath("agentrun", retried, ns, "{.spec.from.run} {.spec.from.step}")).To(Equal("acme 2"))
		shoot(ctx, "run-retried")

		run(ctx, chromedp.Navigate(origin(alice)+"/runs/console/vendor-review"), chromedp.WaitVisible(chromedp.CSS(`#cancel-reason`)),
			chromedp.SendKeys(chromedp.CSS(`#cancel-reason`), "wrong vendor"), chromedp.Click(chromedp.CSS(`#cancel-run`)))
		waitText(ctx, "The run was asked to stop")
		// The page follows the run to its end: the phase beside its name, and no cancel form.
		waitText(ctx, "vendor-review Cancelled")
		Expect(jsonpath("agentrun", "vendor-review", ns, "{.status.phase}: {.status.terminationMessage}")).To(ContainSubstring("Cancelled"))
		Expect(pageText(ctx)).NotTo(ContainSubstring("Cancel the run"), "a cancelled run still offers to cancel")
	})

	It("answers only its own pages, from its own address, with its token, which works once", func() {
		fresh := startUI(filepath.Join(stateDir, "kubeconfig-alice"), "--namespaces", ns)
		plain := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := plain.Get(origin(fresh) + "/runs")
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), "without the token's cookie")

		resp, err = plain.Get(fresh.url)
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusSeeOther))
		cookie := resp.Cookies()[0]
		resp, err = plain.Get(fresh.url)
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), "the URL opened a second time")

		// 127.0.0.1 is another host than the console's own loopback address.
		u, _ := url.Parse(fresh.url)
		req, _ := http.NewRequest(http.MethodGet, origin(fresh)+"/runs", nil)
		req.Host = "localhost:" + u.Port()
		req.AddCookie(cookie)
		resp, err = plain.Do(req)
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		if u.Hostname() != "127.0.0.1" {
			Expect(resp.StatusCode).To(Equal(http.StatusMisdirectedRequest), "a request naming another host")
		}

		form := url.Values{"action": {"cancel"}, "reason": {"from another site"}}
		req, _ = http.NewRequest(http.MethodPost, origin(fresh)+"/runs/console/acme/decide", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://evil.example")
		req.AddCookie(cookie)
		resp, err = plain.Do(req)
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusForbidden))
		Expect(resp.Header.Get("Access-Control-Allow-Origin")).To(BeEmpty())
		Expect(jsonpath("agentrun", "acme", ns, "{.metadata.annotations}")).NotTo(ContainSubstring("from another site"), "a cross-site form reached the run")
	})

	It("shows the whole arguments of a tool call held at its gate, on the run's page and in the inbox", func() {
		long, end := holdLongToolCall(ns, "console-filer.yaml")

		ctx := tab(alice)
		whole := "{\n  \"note\": \"" + long + end + "\"\n}"
		for _, path := range []string{"/runs/console/filer", "/inbox"} {
			run(ctx, chromedp.Navigate(origin(alice)+path))
			waitText(ctx, fmt.Sprintf("crm/file (step 1, call 1) with these arguments, whole (%d bytes: the box scrolls):", len(whole)))
			args, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("pre.arguments").textContent`))
			Expect(err).NotTo(HaveOccurred())
			Expect(args).To(Equal(whole), "%s shows other arguments than the call's", path)
			shoot(ctx, "tool-gate-"+strings.Trim(strings.ReplaceAll(path, "/", "-"), "-"))
		}

		run(ctx, chromedp.Navigate(origin(alice)+"/runs/console/filer"), chromedp.WaitVisible(chromedp.CSS(`form.reject button`)),
			chromedp.Click(chromedp.CSS(`form.reject button`)))
		waitText(ctx, "Succeeded")
		Expect(jsonpath("agentrun", "filer", ns, `{range .status.approvals[*]}{.decision} {.gate} {.by}{"\n"}{end}`)).To(Equal("Rejected tool/crm/file alice\n"))
	})

	// A run started again from the step before a gate re-opens that gate, whatever became of
	// the earlier run there, for its own approvers: whoever pressed retry is its creator.
	// waitingAt starts a run of the pipeline as someone (a kubeconfig) and waits until it waits
	// at its plan gate.
	waitingAt := func(who, namespace, name string) {
		out, err := kubectlAs(who, "apply", "-n", namespace, "-f", manifest(namespace+"-"+name+".yaml", fmt.Sprintf(`apiVersion: agents.baton.dev/v1alpha1
kind: AgentRun
metadata: {name: %s}
spec: {configRef: {name: vendor-review}, input: "Review vendor %s"}
`, name, name)))
		Expect(err).NotTo(HaveOccurred(), out)
		kubectl("wait", "-n", namespace, "--for=jsonpath={.status.pendingApproval.gate}=plan", "--timeout=60s", "agentrun/"+name)
	}
	// retryAfterPlan presses retry from after step 1, the planner's, on a run's page, and
	// returns the new run's name once its page is shown.
	retryAfterPlan := func(ctx context.Context, ui *consoleUI, namespace, name string) string {
		run(ctx, chromedp.Navigate(origin(ui)+"/runs/"+namespace+"/"+name), chromedp.WaitVisible(chromedp.CSS(`#retry-step`)),
			chromedp.SetValue(chromedp.CSS(`#retry-step`), "1"), chromedp.Click(chromedp.CSS(`#retry-run`)))
		waitText(ctx, fmt.Sprintf("Started from where %s was after step 1.", name))
		retried := strings.TrimPrefix(strings.Split(location(ctx), "?")[0], origin(ui)+"/runs/"+namespace+"/")
		Expect(retried).To(HavePrefix(name+"-retry-"), location(ctx))
		Expect(jsonpath("agentrun", retried, namespace, "{.spec.from.run} {.spec.from.step}")).To(Equal(name + " 1"))
		Expect(pageText(ctx)).To(MatchRegexp(`From\s+` + name + ` after step 1`))
		return retried
	}
	// heldAtPlan checks that a run waits at its plan gate after the planner's step, with the
	// plan to judge and no approval of it.
	heldAtPlan := func(ctx context.Context, namespace, name string) {
		waitText(ctx, "Waiting at gate plan")
		Expect(pageText(ctx)).To(And(ContainSubstring("0 of 1 approvals"), ContainSubstring("Plan: 1) gmail: invoice emails from Acme")))
		Expect(jsonpath("agentrun", name, namespace, "{.status.phase} {.status.pendingApproval.gate} {.status.stepCount} {.status.approvals}")).
			To(Equal("AwaitingApproval plan 1 "), "the run went past the gate")
	}

	It("starts a run waiting at a gate again from the step before it, and the new run waits at that gate too", func() {
		waitingAt(kubeconfig, ns, "globex")
		ctx := tab(alice)
		retried := retryAfterPlan(ctx, alice, ns, "globex")
		heldAtPlan(ctx, ns, retried)
		shoot(ctx, "retried-waiting")
		Expect(jsonpath("agentrun", "globex", ns, "{.status.phase} {.status.pendingApproval.gate}")).To(Equal("AwaitingApproval plan"),
			"the earlier run is not changed")
	})

	It("starts a run rejected at a gate again from the step before it, and the new run waits at that gate", func() {
		waitingAt(kubeconfig, ns, "hooli")
		ctx := tab(alice)
		run(ctx, chromedp.Navigate(origin(alice)+"/runs/"+ns+"/hooli"), chromedp.WaitVisible(chromedp.CSS(`form.reject button`)),
			chromedp.SendKeys(chromedp.CSS(`form.reject textarea[name=feedback]`), "not this vendor"),
			chromedp.Click(chromedp.CSS(`form.reject button`)))
		waitText(ctx, "Your rejection of gate plan was sent")
		waitText(ctx, "Rejected plan by alice: “not this vendor”")
		waitText(ctx, "hooli Failed")
		Expect(jsonpath("agentrun", "hooli", ns, "{.status.terminationReason}")).To(Equal("Rejected"))

		retried := retryAfterPlan(ctx, alice, ns, "hooli")
		heldAtPlan(ctx, ns, retried)
		shoot(ctx, "retried-rejected")
	})

	It("does not let whoever started a run again approve its re-opened gate that needs someone else, and lets another", func() {
		// bob starts the run, so alice may approve its plan; she starts it again instead, and the
		// new run is hers.
		waitingAt(filepath.Join(stateDir, "kubeconfig-bob"), sod, "umbrella")
		Expect(jsonpath("agentrun", "umbrella", sod, `{.metadata.annotations.agents\.baton\.dev/created-by}`)).To(Equal("bob"))
		ctx := tab(alice)
		run(ctx, chromedp.Navigate(origin(alice)+"/runs/"+sod+"/umbrella"))
		waitText(ctx, "Waiting at gate plan")
		Expect(pageText(ctx)).NotTo(ContainSubstring("You created this run"))

		retried := retryAfterPlan(ctx, alice, sod, "umbrella")
		heldAtPlan(ctx, sod, retried)
		Expect(jsonpath("agentrun", retried, sod, `{.metadata.annotations.agents\.baton\.dev/created-by}`)).To(Equal("alice"))
		Expect(pageText(ctx)).To(ContainSubstring("You created this run, and gate plan needs an approver other than the run's creator (allowSelfApproval: false)."))

		// Her inbox offers bob's run, not hers; if she approves hers anyway, the operator refuses
		// and the page says why.
		inbox := tab(alice)
		run(inbox, chromedp.Navigate(origin(alice)+"/inbox"))
		waitText(inbox, "umbrella")
		Expect(pageText(inbox)).NotTo(ContainSubstring(retried))
		run(ctx, chromedp.Click(chromedp.CSS(`form.approve button`)))
		waitText(ctx, "Decision refused (SelfApprovalNotAllowed)")
		waitText(ctx, "alice created this run, and gate plan needs an approver other than the run's creator (allowSelfApproval: false)")
		Expect(jsonpath("agentrun", retried, sod, "{.status.phase} {.status.pendingApproval.gate} {.status.approvals}")).To(Equal("AwaitingApproval plan "))
		shoot(ctx, "retried-self-approval-refused")

		other := tab(bob)
		run(other, chromedp.Navigate(origin(bob)+"/runs/"+sod+"/"+retried), chromedp.WaitVisible(chromedp.CSS(`form.approve button`)))
		Expect(pageText(other)).NotTo(ContainSubstring("You created this run"))
		run(other, chromedp.Click(chromedp.CSS(`form.approve button`)))
		waitText(other, "Your approval of gate plan was sent")
		// alice's page follows: the gate passed on bob's approval.
		waitText(ctx, "Approved plan by bob")
		waitText(ctx, "Waiting at gate final")
		Expect(jsonpath("agentrun", "umbrella", sod, "{.status.phase} {.status.pendingApproval.gate}")).To(Equal("AwaitingApproval plan"),
			"the earlier run is not changed")
	})

	// A team on a priced model endpoint, on the fake model server: each step's usage is 800
	// prompt tokens, 400 of them cached, and 200 output tokens, at gpt-4o-mini's prices
	// 400×0.15 + 400×0.075 + 200×0.60 = 210 millionths of a dollar. alice reads the namespace
	// through the viewer role Baton ships, bound in the namespace only, so she may list its
	// ModelEndpoints and not the cluster's ClusterModelEndpoints.
	It("shows what a run on a priced endpoint cost, step by step, and the endpoint's limits and use; so does kubectl baton describe", func() {
		const fleet = "console-fleet"
		server := fakes.NewOpenAI()
		DeferCleanup(server.Close)
		server.ReplyTo("triage", fakes.Reply{Content: "to the writer", Tokens: 1000, PromptTokens: 800, CachedTokens: 400,
			ToolCalls: []fakes.ToolCall{{Name: "transfer_to_writer", Args: `{"reason":"write it"}`}}})
		server.ReplyTo("writer", fakes.Reply{Content: "the answer", Tokens: 1000, PromptTokens: 800, CachedTokens: 400})
		kubectl("create", "namespace", fleet)
		kubectl("apply", "-f", filepath.Join(root, "config", "rbac", "agentrun_viewer_role.yaml"))
		kubectl("create", "rolebinding", "viewers", "-n", fleet, "--clusterrole=agentrun-viewer", "--user=alice")
		kubectl("apply", "-n", fleet, "-f", manifest("console-priced.yaml", pricedTeam(server.BaseURL())))
		kubectl("wait", "-n", fleet, "--for=jsonpath={.status.phase}=Succeeded", "--timeout=60s", "agentrun/priced")
		Expect(jsonpath("agentrun", "priced", fleet, "{.status.cost} {.status.currency} {.status.handoffSequence[*].cost}")).
			To(Equal("0.00042 USD 0.00021 0.00021"))

		// kubectl baton describe says the same, a step a line.
		out, err := kubectlAs(filepath.Join(stateDir, "kubeconfig-alice"), "baton", "-n", fleet, "describe", "priced")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("\nCost:         0.00042 USD\n"))
		Expect(out).To(MatchRegexp(`(?m)^  STEP\s+AGENT\s+TO\s+OUTCOME\s+TOKENS\s+COST \(USD\)\s+TIME\s+REASON$`))
		Expect(out).To(MatchRegexp(`(?m)^  1\s+triage\s+writer\s+Handoff\s+1000\s+0\.00021\s+\S+\s+write it$`))
		Expect(out).To(MatchRegexp(`(?m)^  2\s+writer\s+\(end\)\s+\S+\s+1000\s+0\.00021\s+`))
		AddReportEntry("kubectl baton describe of a run on a priced endpoint", out)

		ui := startUI(filepath.Join(stateDir, "kubeconfig-alice"), "--namespaces", fleet)
		ctx := tab(ui)
		waitText(ctx, "priced")
		Expect(tableCell(ctx, `tr:has(a[href="/runs/console-fleet/priced"])`, "Cost")).To(Equal("0.00042 USD"))

		run(ctx, chromedp.Navigate(origin(ui)+"/runs/"+fleet+"/priced"))
		waitText(ctx, "priced Succeeded")
		Expect(pageText(ctx)).To(MatchRegexp(`Cost\s+0\.00042 USD`))
		Expect(tableCell(ctx, `tr:has(a[aria-label="Step 1 transcript"])`, "Cost")).To(Equal("0.00021"))
		Expect(tableCell(ctx, `tr:has(a[aria-label="Step 2 transcript"])`, "Cost")).To(Equal("0.00021"))
		shoot(ctx, "run-priced")

		// The endpoint's status says what its runs used over the last minute, as the operator
		// writes it every few seconds; the page shows what the status says, and follows it.
		run(ctx, chromedp.Click(chromedp.CSS(`a[href="/endpoints"]`)))
		waitText(ctx, "Model endpoints")
		row := `tr[data-endpoint="console-fleet/llm"]`
		Eventually(func(g Gomega) {
			use := jsonpath("modelendpoint", "llm", fleet, "{.status.requestsLastMinute} requests, {.status.tokensLastMinute} tokens")
			g.Expect(use).To(MatchRegexp(`^2 requests, [1-9]\d* tokens$`))
			g.Expect(tableCell(ctx, row, "Last minute")).To(Equal(use))
		}, time.Minute, 200*time.Millisecond).Should(Succeed())
		// The run has ended: nothing is in flight or waits once the operator has written so.
		Eventually(func() string { return tableCell(ctx, row, "Now") }, time.Minute, 200*time.Millisecond).Should(Equal("0 in flight, 0 waiting"))
		Expect(tableCell(ctx, row, "429s")).To(Equal("0"))
		Expect(tableCell(ctx, row, "Limits")).To(Equal("500 requests/min, 200000 tokens/min, 8 at once"))
		Expect(tableCell(ctx, row, "Effective limits")).To(Equal("500 requests/min, 200000 tokens/min, 8 at once"))
		Expect(tableCell(ctx, row, "Prices")).To(ContainSubstring("gpt-4o-mini: 0.15 in, 0.075 cached, 0.60 out"))
		Expect(tableCell(ctx, row, "Conditions")).To(HavePrefix("Ready True"))
		Expect(pageText(ctx)).To(ContainSubstring(`You may not list ClusterModelEndpoints, so they are not shown: clustermodelendpoints.agents.baton.dev is forbidden: User "alice" cannot list resource "clustermodelendpoints"`))
		shoot(ctx, "endpoints")

		run(ctx, chromedp.EmulateViewport(390, 844))
		run(ctx, chromedp.Navigate(origin(ui)+"/endpoints"), chromedp.WaitReady(chromedp.CSS("body")))
		width, err := chromedp.Run(ctx, chromedp.Evaluate[int64](`document.documentElement.scrollWidth`))
		Expect(err).NotTo(HaveOccurred())
		Expect(width).To(BeNumerically("<=", 390), "the endpoints page is %d px wide on a 390 px screen", width)
		shoot(ctx, "phone-endpoints")
	})
})
