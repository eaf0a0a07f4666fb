package workflow

import (
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// TestTheStoredHistoryIsKnownAfterTheAPIServerKeptIt checks that the operator recognises the
// records it wrote once the API server has them: to the second, through JSON.
func TestTheStoredHistoryIsKnownAfterTheAPIServerKeptIt(t *testing.T) {
	var whole []v1alpha1.HandoffRecord
	at := time.Date(2026, 11, 23, 10, 0, 0, 123456789, time.UTC)
	for i := range 14 {
		whole = append(whole, v1alpha1.HandoffRecord{Step: int32(i + 1), From: "a", To: "b", Time: metav1.NewTime(at.Add(time.Duration(i) * 700 * time.Millisecond)),
			InputDigest: "in", OutputDigest: "out"})
	}
	s := v1alpha1.AgentRunStatus{HandoffSequence: whole}
	StoreHistory(&s)
	data, _ := json.Marshal(s)
	var kept v1alpha1.AgentRunStatus
	if err := json.Unmarshal(data, &kept); err != nil {
		t.Fatal(err)
	}
	if !IsStoredHistory(kept.HandoffSequence, whole) {
		t.Fatalf("the records the API server kept are not recognised")
	}
	if len(kept.HandoffSequence) != maxStoredHandoffs || kept.HandoffSequence[0].Step != 5 || kept.HandoffSequence[0].InputDigest != "" {
		t.Fatalf("status holds %+v", kept.HandoffSequence)
	}
	if IsStoredHistory(kept.HandoffSequence, whole[:13]) {
		t.Fatalf("another run's history was taken for this one")
	}
}
