package steps

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/agents/providers"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
	. "github.com/baton-dev/baton/test/builders"
)

// TestAStepWaitingOnItsAgentHoldsOneSmallGoroutine checks what a step costs while its agent
// works, as the operator runs it: one goroutine per step, whose stack stays under 16 KiB (what
// it took when every frame between the runner and the provider held a copy of the step's
// request and result, and so for as long as the agent took), and a step given up ends.
func TestAStepWaitingOnItsAgentHoldsOneSmallGoroutine(t *testing.T) {
	cfg := MakeConfig("slow", "ns").Agents(
		MakeAgent("a").Terminator().Script(Says("done").Emits("DONE").Delay(time.Hour)),
	).Signal("DONE", v1alpha1.ActionTerminate).Timeout(2 * time.Hour).AgentTimeout(2 * time.Hour).Obj()
	plan, errs := workflow.NewPlan(cfg.Spec, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	const n = 200
	r := New(Config{Providers: providers.New(agents.Dependencies{Clock: clock.RealClock{}}), Clock: clock.RealClock{}, Log: logr.Discard(), MaxInFlight: n})

	goroutines, stacks := goroutinesAndStacks()
	var keys []types.NamespacedName
	for i := range n {
		run := MakeRun(fmt.Sprintf("r%d", i), "ns").Config("slow").Input("a ticket").Obj()
		run.UID = types.UID(fmt.Sprintf("uid-%d", i))
		p := plan.ForRun(run.Name, run.Namespace, run.Spec.Approvals, "")
		run.Status = workflow.Start(p, run.Status, run.Spec.Input, "slow-1", time.Now()).Status
		step := workflow.Next(p, &run.Status)
		r.Start(run, p, step)
		keys = append(keys, types.NamespacedName{Namespace: run.Namespace, Name: run.Name})
	}
	waitGoroutines(t, goroutines+n)
	_, waiting := goroutinesAndStacks()
	if per := (waiting - stacks) / n; per >= 16<<10 {
		t.Errorf("a step waiting on its agent takes %d bytes of stack, want less than 16 KiB", per)
	}

	for _, key := range keys {
		r.Forget(key)
	}
	waitGoroutines(t, goroutines)
}

// goroutinesAndStacks counts this process's goroutines and the bytes of their stacks.
func goroutinesAndStacks() (int, uint64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return runtime.NumGoroutine(), m.StackInuse
}

// waitGoroutines waits until this process has n goroutines.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, want %d", runtime.NumGoroutine(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
