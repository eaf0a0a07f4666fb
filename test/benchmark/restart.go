package benchmark

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// A restart at scale: the operator binary (MANAGER_BIN), on a control plane of its own, holds
// many live runs whose one step waits on a slow agent (--max-steps-in-flight of them mid-step,
// the rest waiting for a slot); it is killed as a node failure would kill it (SIGKILL) and
// started again on the same transcript store. The figures are how long the new process takes
// until every run progresses again (its step started again, in flight or in line for a slot,
// and the work queue empty: the live workload's own test of a run held), and both processes'
// peak RSS.

// restartFigures are one restart's.
type restartFigures struct {
	runs int
	// pickup is the first process's time from the first create until it held every run;
	// restart the second's from its start until it did.
	pickup, restart time.Duration
	// peakBefore and peakAfter are the processes' peak RSS, each read once it held every run.
	peakBefore, peakAfter uint64
	// applied counts the steps the second process applied from the transcript.
	applied float64
}

// operatorProcess is the operator binary running, and where its metrics are served.
type operatorProcess struct {
	cmd     *exec.Cmd
	metrics string
}

// measureRestart runs the restart with n runs whose one step takes wait.
func measureRestart(ctx context.Context, n int, wait time.Duration) (restartFigures, error) {
	f := restartFigures{runs: n}
	bin := os.Getenv("MANAGER_BIN")
	if bin == "" {
		return f, fmt.Errorf("MANAGER_BIN is not set: make bench builds the operator")
	}
	te, cfg, scheme, err := controlPlane()
	if err != nil {
		return f, err
	}
	defer func() { _ = te.Stop() }()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return f, err
	}
	dir, err := os.MkdirTemp("", "baton-restart-")
	if err != nil {
		return f, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	args, err := operatorArgs(te, dir)
	if err != nil {
		return f, err
	}
	ns, err := newNamespace(ctx, c, "baton-restart")
	if err != nil {
		return f, err
	}
	if err := c.Create(ctx, liveConfig(ns, wait)); err != nil {
		return f, err
	}

	first, err := startOperator(bin, dir, "first", args)
	if err != nil {
		return f, err
	}
	began := time.Now()
	if err := createRuns(ctx, c, baton{}, ns, workload{name: "restart", runs: n, steps: 1}); err != nil {
		return f, first.kill()
	}
	if f.pickup, err = first.waitHeld(ctx, n, began, wait*4/5); err != nil {
		return f, kill(err, first)
	}
	if f.peakBefore, err = peakRSSOf(strconv.Itoa(first.cmd.Process.Pid)); err != nil {
		return f, kill(err, first)
	}
	if err := first.kill(); err != nil {
		return f, err
	}

	began = time.Now()
	second, err := startOperator(bin, dir, "second", args)
	if err != nil {
		return f, err
	}
	if f.restart, err = second.waitHeld(ctx, n, began, wait*4/5); err != nil {
		return f, kill(err, second)
	}
	if f.peakAfter, err = peakRSSOf(strconv.Itoa(second.cmd.Process.Pid)); err != nil {
		return f, kill(err, second)
	}
	m, err := second.scrape(ctx)
	if err != nil {
		return f, kill(err, second)
	}
	f.applied = m.total("baton_steps_applied_from_transcript_total", nil)
	return f, second.kill()
}

// operatorArgs are the operator's flags for the control plane: a kubeconfig of an admin user,
// its transcript in dir, its metrics on a loopback port chosen at start, no webhook.
func operatorArgs(te *envtest.Environment, dir string) ([]string, error) {
	user, err := te.AddUser(envtest.User{Name: "baton-operator", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return nil, err
	}
	return []string{"--kubeconfig", path, "--transcript-store", filepath.Join(dir, "transcript.db"),
		"--enable-webhooks=false", "--trust-decision-queue=false", "--metrics-secure=false",
		"--health-probe-bind-address=0", "--transcript-bind-address=0", "--operator-namespace", corev1.NamespaceDefault,
		"--max-concurrent-reconciles", strconv.Itoa(reconcileWorkers)}, nil
}

// startOperator starts the operator binary with args, its metrics on a free loopback port and
// its log in dir, and waits until it serves its metrics.
func startOperator(bin, dir, name string, args []string) (*operatorProcess, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	_ = l.Close()
	logFile, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, append(args, "--metrics-bind-address", addr)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &operatorProcess{cmd: cmd, metrics: "http://" + addr + "/metrics"}
	for deadline := time.Now().Add(time.Minute); ; {
		if _, err := p.scrape(context.Background()); err == nil {
			return p, nil
		}
		if time.Now().After(deadline) {
			return nil, kill(fmt.Errorf("the operator does not serve its metrics after a minute (log: %s)", logFile.Name()), p)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// scrape reads the process's metrics.
func (p *operatorProcess) scrape(ctx context.Context) (metricSet, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.metrics, nil)
	if err != nil {
		return nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = res.Body.Close() }()
	return parseMetrics(res.Body, []string{"baton_agent_steps_in_flight", "workqueue_depth", "baton_steps_applied_from_transcript_total"})
}

// waitHeld waits until the process has every one of n runs' steps started (in flight or in line
// for a slot) and its work queue has stayed empty for liveQuiet; it returns the time from began
// until then.
func (p *operatorProcess) waitHeld(ctx context.Context, n int, began time.Time, limit time.Duration) (time.Duration, error) {
	return quietFor(ctx, began, limit, func() (bool, string, error) {
		m, err := p.scrape(ctx)
		if err != nil {
			return false, "", err
		}
		inFlight := m.total("baton_agent_steps_in_flight", nil)
		depth := m.total("workqueue_depth", labelsMatch{"name": "agentrun"})
		return inFlight >= float64(n) && depth == 0, fmt.Sprintf("%.0f of %d steps in flight, %.0f runs queued", inFlight, n, depth), nil
	})
}

// kill kills the process (SIGKILL: no shutdown) and waits for it.
func (p *operatorProcess) kill() error {
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	_ = p.cmd.Wait()
	return nil
}

// kill kills p and returns err.
func kill(err error, p *operatorProcess) error {
	_ = p.kill()
	return err
}

// restartReport prints the restart's figures.
func restartReport(f restartFigures) string {
	return fmt.Sprintf("\n### restart: the operator binary killed and started again while it holds %d live runs (Baton only)\n\n"+
		"| runs | first pickup s | progressing again after restart s | peak RSS before MB | peak RSS after MB | after/before | steps applied from the transcript |\n"+
		"|---|---|---|---|---|---|---|\n"+
		"| %d | %.1f | %.1f | %.0f | %.0f | %.2fx | %.0f |\n",
		f.runs, f.runs, f.pickup.Seconds(), f.restart.Seconds(), float64(f.peakBefore)/(1<<20), float64(f.peakAfter)/(1<<20),
		float64(f.peakAfter)/float64(max(f.peakBefore, 1)), f.applied)
}
