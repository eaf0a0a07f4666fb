package benchmark

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/transcript"
)

// handoffGaps reads, from the transcript, Baton's own time between one step's answer and the
// next step's call in each run of namespace ns: what a handoff costs a run beyond its agents'
// latency (the transcript write, the reconcile, the decision, the next step's start).
func handoffGaps(ctx context.Context, c client.Client, store transcript.Store, ns string) ([]time.Duration, error) {
	runs := &v1alpha1.AgentRunList{}
	if err := c.List(ctx, runs, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var gaps []time.Duration
	for _, run := range runs.Items {
		recs, err := store.List(ctx, transcript.Query{RunUID: string(run.UID), Kinds: []transcript.Kind{transcript.KindStep}})
		if err != nil {
			return nil, err
		}
		sort.Slice(recs, func(i, j int) bool { return recs[i].Step < recs[j].Step })
		for i := 1; i < len(recs); i++ {
			var next struct {
				Started time.Time `json:"started"`
			}
			if err := json.Unmarshal(recs[i].Body, &next); err != nil {
				return nil, fmt.Errorf("step %d of %s: %w", recs[i].Step, run.Name, err)
			}
			gaps = append(gaps, next.Started.Sub(recs[i-1].Time))
		}
	}
	return gaps, nil
}

// percentile is the q-th quantile (0..1) of ds, nearest rank; 0 for none.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
