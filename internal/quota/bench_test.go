package quota

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// BenchmarkDecideInALine is what deciding one queued run costs in a namespace whose line holds
// n runs: the line is ordered again for every decision, and each queued run is decided again
// every few seconds until it starts.
func BenchmarkDecideInALine(b *testing.B) {
	quotas := []v1alpha1.AgentQuota{quotaOf("team-a", v1alpha1.AgentQuotaSpec{
		MaxRunningRuns: ptr.To[int32](20), MaxCostPerDay: ptr.To("50"), MaxTokensPerDay: ptr.To[int64](1_000_000)})}
	use := Use{Running: 20}
	for _, n := range []int{100, 1000, 10000} {
		line := make([]Waiting, n)
		for i := range line {
			line[i] = Waiting{Name: fmt.Sprintf("run-%05d", i), Priority: int32(i % 3), Created: now.Add(-time.Duration(n-i) * time.Second)}
		}
		last := line[n-1]
		b.Run(fmt.Sprintf("%d runs", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if v := Decide(quotas, use, line, last, now); v.Admit {
					b.Fatal("a run was admitted into a full namespace")
				}
			}
		})
	}
}
