// Package e2e does what a user does: it starts the local control plane the quickstart uses,
// runs the operator binary as a process, and drives it with the real kubectl.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var (
	root       = filepath.Join("..", "..")
	stateDir   string
	kubeconfig string
	processes  []*osexec.Cmd
	// traceFile is where the collector writes the spans it receives, as OTLP JSON lines.
	traceFile string
	// metricsAddr is where the operator serves its metrics (HTTPS, authorized through the API
	// server, as in a cluster).
	metricsAddr string
	// managerProc is the operator's process, started with managerArgs.
	managerProc *osexec.Cmd
	managerArgs []string
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "e2e suite (local control plane, operator binary, kubectl)")
}

var _ = BeforeSuite(func() {
	Expect(os.Getenv("KUBEBUILDER_ASSETS")).NotTo(BeEmpty(), "KUBEBUILDER_ASSETS is not set: run 'make test-e2e'")
	plugin := os.Getenv("PLUGIN_BIN")
	Expect(plugin).NotTo(BeEmpty(), "PLUGIN_BIN is not set: run 'make test-e2e', which builds the kubectl plugin")
	// kubectl finds plugins on the PATH, as it would for a user who ran make install-plugin.
	Expect(os.Setenv("PATH", filepath.Dir(plugin)+string(os.PathListSeparator)+os.Getenv("PATH"))).To(Succeed())
	manager := os.Getenv("MANAGER_BIN")
	Expect(manager).NotTo(BeEmpty(), "MANAGER_BIN is not set: run 'make test-e2e', which builds the operator")
	_, err := osexec.LookPath("kubectl")
	Expect(err).NotTo(HaveOccurred(), "kubectl must be on the PATH")

	stateDir = GinkgoT().TempDir()
	kubeconfig = filepath.Join(stateDir, "kubeconfig")
	localcluster := filepath.Join(stateDir, "localcluster")
	build := osexec.Command("go", "build", "-o", localcluster, "./hack/localcluster")
	build.Dir = root
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))

	By("starting the local control plane, with the admission webhook pointed at a local operator")
	cp := start("controlplane", localcluster, "--dir", stateDir, "--webhooks", filepath.Join(root, "config", "webhook"),
		"--user", "alice", "--user", "bob")
	Eventually(func() string { return logOf("controlplane") }, 2*time.Minute, 200*time.Millisecond).
		Should(ContainSubstring("Control plane ready"), "control plane log")
	Expect(cp.ProcessState).To(BeNil())

	By("installing the CRDs with kubectl")
	kubectl("apply", "--server-side", "-k", filepath.Join(root, "config", "crd"))
	kubectl("wait", "--for", "condition=established", "--timeout=60s",
		"crd/agentconfigs.agents.baton.dev", "crd/agentruns.agents.baton.dev")

	By("starting an OpenTelemetry Collector, the operator's trace receiver")
	otelcol := os.Getenv("OTELCOL_BIN")
	Expect(otelcol).NotTo(BeEmpty(), "OTELCOL_BIN is not set: run 'make test-e2e', which builds the collector (hack/tool.sh otelcol)")
	traceFile = filepath.Join(stateDir, "traces.jsonl")
	receiver := freeAddress()
	Expect(os.WriteFile(filepath.Join(stateDir, "otelcol.yaml"), []byte(fmt.Sprintf(`receivers:
  otlp:
    protocols:
      http: {endpoint: "%s"}
exporters:
  file: {path: "%s", flush_interval: 100ms}
service:
  pipelines:
    traces: {receivers: [otlp], exporters: [file]}
  telemetry:
    metrics: {level: none}
    logs: {level: warn}
`, receiver, traceFile)), 0o600)).To(Succeed())
	start("otelcol", otelcol, "--config", filepath.Join(stateDir, "otelcol.yaml"))
	Eventually(func() error {
		c, err := net.Dial("tcp", receiver)
		if err == nil {
			_ = c.Close()
		}
		return err
	}, time.Minute, 100*time.Millisecond).Should(Succeed(), "the collector listens")
	// The operator (and its restarts) export to it, as OTEL_EXPORTER_OTLP_ENDPOINT says.
	Expect(os.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+receiver)).To(Succeed())
	Expect(os.Setenv("OTEL_BSP_SCHEDULE_DELAY", "200")).To(Succeed())

	By("starting the operator binary, as its own user")
	webhookFlags := strings.Fields(readFile(filepath.Join(stateDir, "webhook.flags")))
	metricsAddr = freeAddress()
	// The suite's model servers and tools are fakes on loopback, which the egress policy
	// refuses unless the admin allows it.
	managerArgs = append([]string{"--health-probe-bind-address=127.0.0.1:0", "--metrics-bind-address=" + metricsAddr,
		"--egress-allow=127.0.0.1,::1",
		"--kubeconfig", filepath.Join(stateDir, "kubeconfig-operator"),
		"--transcript-store", filepath.Join(stateDir, "transcript.db")}, webhookFlags...)
	managerProc = start("manager", manager, managerArgs...)
})

// freeAddress is a loopback address with a port nothing listens on now.
func freeAddress() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().String()
}

// killManager kills the operator as a node failure or an OOM kill would (SIGKILL: no shutdown),
// and starts it again with the same flags and store.
func killManager() {
	Expect(managerProc.Process.Signal(syscall.SIGKILL)).To(Succeed())
	_ = managerProc.Wait()
	managerProc = start("manager", os.Getenv("MANAGER_BIN"), managerArgs...)
}

var _ = AfterSuite(func() {
	for i := len(processes) - 1; i >= 0; i-- {
		p := processes[i]
		if p.Process != nil {
			_ = p.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = p.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = p.Process.Kill()
			}
		}
	}
})

var _ = ReportAfterEach(func(r SpecReport) {
	if r.Failed() {
		AddReportEntry("manager log (tail)", tail(logOf("manager"), 60))
	}
})

// start runs a binary in the background, its output in <stateDir>/<name>.log.
func start(name, bin string, args ...string) *osexec.Cmd {
	logFile, err := os.OpenFile(filepath.Join(stateDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	Expect(err).NotTo(HaveOccurred())
	cmd := osexec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	Expect(cmd.Start()).To(Succeed())
	processes = append(processes, cmd)
	return cmd
}

func logOf(name string) string {
	data, _ := os.ReadFile(filepath.Join(stateDir, name+".log"))
	return string(data)
}

// kubectl runs kubectl against the local control plane and returns its output; it fails the
// spec when kubectl fails.
func kubectl(args ...string) string {
	out, err := tryKubectl(args...)
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), "kubectl %s\n%s", strings.Join(args, " "), out)
	return out
}

func tryKubectl(args ...string) (string, error) {
	return kubectlAs(kubeconfig, args...)
}

func kubectlAs(config string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := osexec.CommandContext(ctx, "kubectl", args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+config)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// watcher is a kubectl watch running in the background.
type watcher struct {
	cmd    *osexec.Cmd
	cancel context.CancelFunc
	mu     sync.Mutex
	lines  []string
}

// watch starts kubectl with a watch and returns once kubectl has listed what exists, so that
// every later change shows up in its output.
func watch(args ...string) *watcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{cmd: osexec.CommandContext(ctx, "kubectl", args...), cancel: cancel}
	w.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	pr, pw := io.Pipe()
	w.cmd.Stdout, w.cmd.Stderr = pw, pw
	Expect(w.cmd.Start()).To(Succeed())
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			w.mu.Lock()
			w.lines = append(w.lines, sc.Text())
			w.mu.Unlock()
		}
	}()
	go func() { _ = w.cmd.Wait(); _ = pw.Close() }()
	Eventually(w.output, 30*time.Second, 50*time.Millisecond).ShouldNot(BeEmpty(), "kubectl %v printed nothing", args)
	return w
}

// output is what the watch printed so far, line by line.
func (w *watcher) output() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.lines...)
}

func (w *watcher) stop() { w.cancel() }

// exec runs a command and returns its combined output.
func exec(name string, args ...string) (string, error) {
	out, err := osexec.Command(name, args...).CombinedOutput()
	return string(out), err
}

// kubectlStdin runs kubectl with stdin.
func kubectlStdin(stdin string, args ...string) (string, error) {
	cmd := osexec.Command("kubectl", args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func readFile(path string) string {
	data, err := os.ReadFile(path)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return string(data)
}

// sample is the path of a file in config/samples.
func sample(name string) string { return filepath.Join(root, "config", "samples", name) }

// manifest writes a manifest to a file and returns its path.
func manifest(name, content string) string {
	path := filepath.Join(stateDir, name)
	Expect(os.WriteFile(path, []byte(content), 0o600)).To(Succeed())
	return path
}

// holdLongToolCall starts run filer in ns, whose agent calls a tool with arguments of about
// 6 KB, past what status keeps of them, and waits until the call is held at its gate. It
// returns the arguments' long beginning and their end, which status leaves out. file names the
// manifest written for it.
func holdLongToolCall(ns, file string) (long, end string) {
	long, end = strings.Repeat("lorem ipsum ", 500), "and wire the refund to account 99-000-1234"
	kubectl("apply", "-n", ns, "-f", manifest(file, fmt.Sprintf(`apiVersion: agents.baton.dev/v1alpha1
kind: AgentConfig
metadata: {name: filer}
spec:
  entrypoint: clerk
  toolServers:
  - {name: crm, http: {url: "http://127.0.0.1:9/file", tool: file}}
  agents:
  - name: clerk
    terminator: true
    tools: [{server: crm, approval: Required}]
    script: [{toolCalls: [{server: crm, tool: file, arguments: {note: "%s%s"}}], output: "filed"}]
---
apiVersion: agents.baton.dev/v1alpha1
kind: AgentRun
metadata: {name: filer}
spec: {configRef: {name: filer}, input: "file the refund"}
`, long, end)))
	kubectl("wait", "-n", ns, "--for=jsonpath={.status.pendingApproval.gate}=tool/crm/file", "--timeout=60s", "agentrun/filer")
	ExpectWithOffset(1, jsonpath("agentrun", "filer", ns, "{.status.pendingApproval.toolCall.arguments}")).NotTo(ContainSubstring(end),
		"status keeps the arguments' beginning only")
	return long, end
}

func jsonpath(kind, name, namespace, expr string) string {
	return kubectl("get", kind, name, "-n", namespace, "-o", fmt.Sprintf("jsonpath=%s", expr))
}
