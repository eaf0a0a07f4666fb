package sessions

import (
	"testing"

	"github.com/shopspring/decimal"
	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/quota"
)

func TestATurnGetsAtMostWhatIsLeft(t *testing.T) {
	limits := &v1alpha1.SessionLimits{MaxTokens: ptr.To[int64](1000), MaxCost: ptr.To("1.00")}
	for name, tc := range map[string]struct {
		bounds     quota.RunBounds
		limits     *v1alpha1.SessionLimits
		tokens     int64
		spent      string
		wantTokens quota.Tokens
		wantCost   string
		costBy     string
	}{
		"a session without limits leaves the namespace's bounds": {
			bounds: quota.RunBounds{MaxTokens: quota.Tokens{Limit: 50, Quota: "team", Set: true}},
			spent:  "0", wantTokens: quota.Tokens{Limit: 50, Quota: "team", Set: true},
		},
		"a session without limits of its own has the namespace's, for all its turns": {
			bounds: quota.RunBounds{MaxTokens: quota.Tokens{Limit: 50, Quota: "team", Set: true}},
			tokens: 20, spent: "0", wantTokens: quota.Tokens{Limit: 30, Quota: "AgentSession/s", Set: true},
		},
		"what is left of the session's": {
			limits: limits, tokens: 300, spent: "0.25",
			wantTokens: quota.Tokens{Limit: 700, Quota: "AgentSession/s", Set: true}, wantCost: "0.75", costBy: "AgentSession/s",
		},
		"a quota's runLimits bound the session as a whole, not each turn": {
			bounds: quota.RunBounds{MaxTokens: quota.Tokens{Limit: 200, Quota: "team", Set: true},
				MaxCost: quota.Money{Limit: decimal.RequireFromString("0.10"), Quota: "team", Set: true}},
			limits: limits, tokens: 150, spent: "0.04",
			wantTokens: quota.Tokens{Limit: 50, Quota: "AgentSession/s", Set: true}, wantCost: "0.06", costBy: "AgentSession/s",
		},
		"a quota's runLimits bound the session's own": {
			bounds: quota.RunBounds{MaxTokens: quota.Tokens{Limit: 500, Quota: "team", Set: true}},
			limits: limits, tokens: 300, spent: "0",
			wantTokens: quota.Tokens{Limit: 200, Quota: "AgentSession/s", Set: true}, wantCost: "1", costBy: "AgentSession/s",
		},
		"nothing left: one token, and no money": {
			limits: limits, tokens: 5000, spent: "3",
			wantTokens: quota.Tokens{Limit: 1, Quota: "AgentSession/s", Set: true}, wantCost: "0", costBy: "AgentSession/s",
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := TurnBounds(tc.bounds, "s", tc.limits, tc.tokens, decimal.RequireFromString(tc.spent))
			if b.MaxTokens != tc.wantTokens {
				t.Errorf("maxTokens %+v, want %+v", b.MaxTokens, tc.wantTokens)
			}
			if tc.wantCost == "" {
				if b.MaxCost.Set {
					t.Errorf("maxCost %+v, want none", b.MaxCost)
				}
				return
			}
			if !b.MaxCost.Set || !b.MaxCost.Limit.Equal(decimal.RequireFromString(tc.wantCost)) || b.MaxCost.Quota != tc.costBy {
				t.Errorf("maxCost %s by %s, want %s by %s", b.MaxCost.Limit, b.MaxCost.Quota, tc.wantCost, tc.costBy)
			}
		})
	}
}
