package workflow

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// bytesIn hands out a fuzz input a byte at a time, zero once it runs out.
type bytesIn struct {
	data []byte
	i    int
}

func (b *bytesIn) next() int {
	if b.i >= len(b.data) {
		return 0
	}
	b.i++
	return int(b.data[b.i-1])
}

func (b *bytesIn) upTo(n int) int { return b.next() % n }

// FuzzApply builds a config and a sequence of step results from arbitrary bytes and plays the
// run: Apply and Check must never panic, and the run's invariants must hold.
func FuzzApply(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 1, 2, 0, 5, 9, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add([]byte("the quick brown fox hands off to the lazy dog, who terminates"))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &bytesIn{data: data}
		n := 1 + in.upTo(5)
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("a%d", i)
		}
		spec := v1alpha1.AgentConfigSpec{
			Entrypoint: names[0],
			Signals: []v1alpha1.Signal{{Name: "END", Action: v1alpha1.ActionTerminate},
				{Name: "DONE", Action: v1alpha1.ActionComplete}, {Name: "GO", Action: v1alpha1.ActionNone}},
			Limits: v1alpha1.Limits{
				MaxHandoffs: ptr.To(int32(1 + in.upTo(30))), MaxSteps: ptr.To(int32(1 + in.upTo(40))),
				MaxTokens: ptr.To(int64(1 + in.next()*50)), MaxErrors: ptr.To(int32(1 + in.upTo(6))),
				Timeout: v1alpha1.NewDuration(time.Duration(1+in.next()) * time.Second),
			},
		}
		for _, name := range names {
			a := v1alpha1.Agent{Name: name, Terminator: in.upTo(4) == 0}
			for _, h := range names {
				if in.upTo(2) == 0 {
					a.Handoffs = append(a.Handoffs, h)
				}
			}
			spec.Agents = append(spec.Agents, a)
		}
		if in.upTo(2) == 0 {
			spec.Mode = v1alpha1.ModeStateMachine
			for i := range 1 + in.upTo(4) {
				s := v1alpha1.State{Name: fmt.Sprintf("S%d", i), Transitions: map[string]string{}}
				if i == 0 || in.upTo(4) != 0 {
					s.Agent = names[in.upTo(n)]
				}
				spec.States = append(spec.States, s)
			}
			for i := range spec.States {
				for _, sig := range []string{"END", "DONE", "GO"} {
					if in.upTo(2) == 0 {
						spec.States[i].Transitions[sig] = spec.States[in.upTo(len(spec.States))].Name
					}
				}
			}
		}
		plan, errs := NewPlan(spec, nil)
		if len(errs) > 0 {
			t.Fatalf("generated an invalid config: %v", errs)
		}
		now := t0
		st := Start(plan, v1alpha1.AgentRunStatus{}, "task", "rev", now).Status
		signals := []string{"", "END", "DONE", "GO", "NOISE"}
		for steps := 0; !st.Phase.Terminal(); steps++ {
			if steps > int(plan.Limits.MaxSteps) {
				t.Fatalf("no end after %d steps", steps)
			}
			now = now.Add(time.Duration(in.upTo(4)) * time.Second)
			if d, ok := Check(plan, st, now); ok {
				st = d.Status
				break
			}
			res := StepResult{Agent: st.CurrentAgent, Input: st.Input, Result: Result{
				Output: fmt.Sprintf("out %d", in.upTo(3)),
				Tokens: int64(in.next()),
				Signal: signals[in.upTo(len(signals))],
			}}
			switch in.upTo(8) {
			case 0:
				res.Error, res.TimedOut = "failed", in.upTo(2) == 0
			case 1:
				res.FinishReason = v1alpha1.FinishLength
			case 2, 3, 4:
				res.Handoff = append(names, "x", "")[in.upTo(n+2)]
			}
			st = Apply(plan, st, res, now).Status
		}
		l := plan.Limits
		if st.TerminationReason == "" || st.StepCount > l.MaxSteps || st.HandoffCount > l.MaxHandoffs || st.ErrorCount > l.MaxErrors {
			t.Fatalf("invariant broken: %+v", st)
		}
		if len(st.HandoffSequence) > maxSequence || len([]rune(st.TerminationMessage)) > maxMessage {
			t.Fatalf("status not bounded: %d records, message of %d", len(st.HandoffSequence), len(st.TerminationMessage))
		}
	})
}
