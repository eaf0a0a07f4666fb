package workflow

import (
	"slices"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// The loop detectors look at the latest maxSequence steps, with digests of what each agent was
// given and answered. Status holds less: the latest maxStoredHandoffs records, without digests,
// so that a status write costs the API server about what a minimal controller's does, however
// long the run. The operator keeps the whole sequence between writes, and after a restart puts
// it together again from the transcript (RestoreHistory): each step's record carries the record
// of the step before it as the run had it, and the digests of a step follow from its result.

// maxStoredHandoffs is how many handoff records status holds.
const maxStoredHandoffs = 10

// HistoryLength is how many of the latest steps the loop detectors look at.
const HistoryLength = maxSequence

// StoreHistory makes the status's handoff sequence what the API server keeps: the latest
// maxStoredHandoffs records, without digests. It returns the whole sequence. s must hold the
// whole sequence.
func StoreHistory(s *v1alpha1.AgentRunStatus) []v1alpha1.HandoffRecord {
	whole := slices.Clone(s.HandoffSequence)
	kept := whole[max(0, len(whole)-maxStoredHandoffs):]
	if len(kept) == 0 {
		s.HandoffSequence = nil
		return whole
	}
	s.HandoffSequence = make([]v1alpha1.HandoffRecord, len(kept))
	for i, r := range kept {
		r.InputDigest, r.OutputDigest = "", ""
		s.HandoffSequence[i] = r
	}
	return whole
}

// IsStoredHistory reports whether a sequence is what StoreHistory keeps of whole.
func IsStoredHistory(stored, whole []v1alpha1.HandoffRecord) bool {
	return slices.EqualFunc(whole[max(0, len(whole)-maxStoredHandoffs):], stored, sameRecord)
}

// StoreStatus makes s what the API server keeps: the beginning of a long input
// (StoreInput), the latest handoff records (StoreHistory), within the status budget
// (FitStatus). It returns the whole input and history, which the caller keeps. s must hold
// them whole.
func StoreStatus(s *v1alpha1.AgentRunStatus) (input string, history []v1alpha1.HandoffRecord) {
	input = StoreInput(s)
	history = StoreHistory(s)
	FitStatus(s)
	return input, history
}

// sameRecord reports whether two records are of the same step, taken at the same time: to the
// second, as the API server keeps it.
func sameRecord(a, b v1alpha1.HandoffRecord) bool {
	return a.Step == b.Step && a.Time.Unix() == b.Time.Unix()
}

// StepDigests are the digests a step's handoff record carries: of its input always, of its
// answer when it answered. The loop detectors compare them.
func StepDigests(res StepResult) (input, output string) {
	input = digest(res.Input)
	if res.Trip == nil && res.Error == "" {
		output = digest(res.Output)
	}
	return input, output
}

// RestoreHistory puts the whole handoff sequence together again from what status holds (the
// latest records, without digests), the records later steps were started with (complete:
// each step's transcript record carries the one before it), and the results of the steps
// status holds. A record whose step started no later step gets its digests from its result.
func RestoreHistory(stored, seen []v1alpha1.HandoffRecord, results map[int32]StepResult) []v1alpha1.HandoffRecord {
	if len(stored) == 0 {
		return nil
	}
	bySteps := map[recordKey]v1alpha1.HandoffRecord{}
	for _, r := range seen {
		bySteps[keyOf(r)] = r
	}
	var out []v1alpha1.HandoffRecord
	for _, r := range seen {
		if keyOf(r).before(keyOf(stored[0])) && (len(out) == 0 || keyOf(out[len(out)-1]).before(keyOf(r))) {
			out = append(out, r)
		}
	}
	for _, r := range stored {
		if full, ok := bySteps[keyOf(r)]; ok && sameRecord(full, r) {
			out = append(out, full)
			continue
		}
		if res, ok := results[r.Step]; ok {
			r.InputDigest, r.OutputDigest = StepDigests(res)
		}
		out = append(out, r)
	}
	return out[max(0, len(out)-maxSequence):]
}

// recordKey orders a run's handoff records: by step, and a fan-out's join after the fan-out,
// whose step it shares (a join is no step).
type recordKey struct {
	step   int32
	joined bool
}

func keyOf(r v1alpha1.HandoffRecord) recordKey {
	return recordKey{step: r.Step, joined: r.Outcome == v1alpha1.OutcomeJoined}
}

func (k recordKey) before(o recordKey) bool {
	return k.step < o.step || (k.step == o.step && !k.joined && o.joined)
}

// RecordAfter reports whether handoff record h comes after record last in a run's sequence: a
// later step, or the join of last's fan-out.
func RecordAfter(h, last v1alpha1.HandoffRecord) bool { return keyOf(last).before(keyOf(h)) }
