package v1alpha1

import "testing"

func TestTurnNumber(t *testing.T) {
	for value, want := range map[string]int64{"1": 1, "42": 42, "": 0, "0": 0, "-3": 0, "x": 0, "99999999999": 0} {
		r := &AgentRun{}
		r.Annotations = map[string]string{AnnotationTurn: value}
		if got := TurnNumber(r); got != want {
			t.Errorf("TurnNumber of %q = %d; want %d", value, got, want)
		}
	}
	if got := TurnNumber(&AgentRun{}); got != 0 {
		t.Errorf("TurnNumber without the annotation = %d; want 0", got)
	}
}
