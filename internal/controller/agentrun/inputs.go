package agentrun

import (
	"context"
	"encoding/json"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// The next agent's input can be as long as an agent's answer. Status holds its beginning and a
// digest of the whole (workflow.StoreInput), so that no status write grows with what agents
// say; the operator keeps the whole input in memory from its write to the step that uses it,
// and after a restart finds it again in the transcript: an input is always the run's own
// input, the last step's input or output, or what a person's decision made of it, recorded
// with the decision.

// input is a run's whole input, for the status whose inputDigest is digest.
type input struct {
	digest, text string
}

// keepInput remembers the whole input of the run's status as written.
func (t *runTable) keepInput(run *v1alpha1.AgentRun, digest, text string) {
	t.with(run, func(s *runState) {
		s.input = input{}
		if digest != "" {
			s.input = input{digest: digest, text: text}
		}
	})
}

// input is the whole input remembered for the run's status, if any.
func (t *runTable) input(key types.NamespacedName, uid types.UID, digest string) (string, bool) {
	text, ok := "", false
	t.existing(key, uid, func(s *runState) {
		if s.input.digest == digest {
			text, ok = s.input.text, true
		}
	})
	return text, ok
}

// wholeInput puts the whole input back into a status that holds only its beginning: from
// memory, or from the transcript. An input found nowhere stays cut (and is no longer said to be
// longer), with an error in the log: the agent gets its beginning.
func (r *Reconciler) wholeInput(ctx context.Context, run *v1alpha1.AgentRun) error {
	st := &run.Status
	if st.InputDigest == "" {
		return nil
	}
	if text, ok := r.runs.input(client.ObjectKeyFromObject(run), run.UID, st.InputDigest); ok {
		st.Input = text
		return nil
	}
	text, found, err := r.findInput(ctx, run)
	if err != nil {
		return err
	}
	if !found {
		log.FromContext(ctx).Error(nil, "The whole input of the next step is not in the transcript; the agent gets its beginning",
			"agentRun", klog.KObj(run), "step", st.StepCount+1, "inputDigest", st.InputDigest)
		st.InputDigest = ""
		return nil
	}
	r.runs.keepInput(run, st.InputDigest, text)
	st.Input = text
	return nil
}

// findInput looks for the run's whole input in the transcript.
func (r *Reconciler) findInput(ctx context.Context, run *v1alpha1.AgentRun) (string, bool, error) {
	st := &run.Status
	var candidates []string
	if st.LastDecision > 0 || run.Spec.From != nil {
		// A run started from an earlier one recorded its input when it started.
		rec, ok, err := r.Transcript.Get(ctx, string(run.UID), records.DecisionKey(st))
		if err != nil {
			return "", false, err
		}
		var body records.DecisionBody
		if ok && json.Unmarshal(rec.Body, &body) == nil {
			candidates = append(candidates, body.Input)
		}
	}
	if st.StepCount > 0 {
		rec, ok, err := r.Transcript.Get(ctx, string(run.UID), transcript.Key{Kind: transcript.KindStep, Step: st.StepCount})
		if err != nil {
			return "", false, err
		}
		var body records.StepBody
		if ok && json.Unmarshal(rec.Body, &body) == nil {
			candidates = append(candidates, body.Output, body.Input)
		}
	}
	candidates = append(candidates, run.Spec.Input)
	for _, c := range candidates {
		if workflow.IsInput(st, c) {
			return c, true, nil
		}
	}
	return "", false, nil
}
