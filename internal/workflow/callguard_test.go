package workflow

import (
	"testing"

	"pgregory.net/rapid"

	. "github.com/baton-dev/baton/test/builders"
)

// Property: calls that went through the guards when an agent asked for them (as the
// operator's toolbox puts them, GuardCall) go through them again from their records, on the
// same plan, to the same verdicts: no replay of a run on the config it ran stops or trips at
// one of its recorded calls (the call a guard stopped the run at is in no record: the step's
// result says it), and it counts the calls the run made.
func TestPropertyRecordedCallsReplayToTheVerdictsTheyHad(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		agentLimit := int32(uniform(t, 0, 5, "agent maxToolCalls"))
		cfg := MakeConfig("c", "ns").HTTPTool("crm", "http://crm.example").HTTPTool("memory", "http://memory.example").
			MaxToolCalls(int32(uniform(t, 0, 15, "maxToolCalls"))).MaxRepeatedToolCalls(int32(uniform(t, 1, 4, "maxRepeatedToolCalls"))).
			Agents(MakeAgent("a").Tools(Uses("crm").Allow("lookup")).MaxToolCalls(agentLimit))
		p, errs := NewPlan(cfg.Obj().Spec, nil)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		live := &ToolUses{}
		var runMade int32
		var steps [][]RecordedCall
	run:
		for step := range uniform(t, 1, 6, "steps") {
			var calls []RecordedCall
			var stepMade int32
			for range uniform(t, 0, 8, "calls") {
				use := ToolUse{
					Server:    pick(t, []string{"crm", "memory"}, "server"),
					Tool:      pick(t, []string{"lookup", "delete"}, "tool"),
					Digest:    pick(t, []string{"d1", "d2"}, "digest"),
					Malformed: rapid.Float64Range(0, 1).Draw(t, "malformed") < 0.1,
					Step:      int32(step + 1),
				}
				v := GuardCall(p, "a", stepMade, runMade+stepMade, live, use)
				if v.Trip != nil {
					steps = append(steps, calls)
					break run
				}
				calls = append(calls, RecordedCall{Server: use.Server, Tool: use.Tool, Digest: use.Digest, Malformed: use.Malformed,
					Refused: v.Refusal != "", Refusal: v.Refusal})
				if v.Refusal == "" {
					stepMade++
				}
			}
			steps = append(steps, calls)
			runMade += stepMade
		}
		// The calls made, as the records say.
		runMade = 0
		for _, calls := range steps {
			for _, c := range calls {
				if !c.Refused {
					runMade++
				}
			}
		}
		replayed := &ToolUses{}
		var made int32
		for step, calls := range steps {
			got, err := p.GuardRecordedCalls(int32(step+1), "a", made, replayed, calls)
			if err != nil {
				t.Fatalf("step %d: %v", step+1, err)
			}
			if got.Trip != nil {
				t.Fatalf("step %d: a recorded call tripped %s", step+1, got.Trip.Message)
			}
			if got.ToolCalls > max(agentLimit, 0) {
				t.Fatalf("step %d made %d calls, past the agent's %d", step+1, got.ToolCalls, agentLimit)
			}
			made += got.ToolCalls
		}
		if made != runMade || made > p.Limits.MaxToolCalls {
			t.Fatalf("%d calls counted, %d made, limits.maxToolCalls %d", made, runMade, p.Limits.MaxToolCalls)
		}
	})
}
