package quota

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/cost"
)

// DefaultCurrency is the cost caps' currency when no quota names one, as it is the endpoints'
// prices' default.
const DefaultCurrency = "USD"

// Tokens is a cap on tokens (or bytes) and the quota that sets it; Set is false when no quota
// does.
type Tokens struct {
	Limit int64
	Quota string
	Set   bool
}

// Money is a cap on cost and the quota that sets it.
type Money struct {
	Limit decimal.Decimal
	Quota string
	Set   bool
}

// Caps are what all the AgentQuotas of a namespace allow together: the lowest of each cap,
// with the quota that sets it (the first by name among equals).
type Caps struct {
	// Currency is the cost caps' currency.
	Currency                     string
	CostPerDay, CostPerMonth     Money
	TokensPerDay, TokensPerMonth Tokens
	// TranscriptBytes bounds the namespace's transcripts together.
	TranscriptBytes Tokens
	// Runs bounds each run's limits.
	Runs RunBounds
	// Kueue is set when a quota makes Kueue admit every run; KueueBy names it.
	Kueue   bool
	KueueBy string
	// DefaultQueue and PriorityClasses are the quotas' (they must agree).
	DefaultQueue    string
	PriorityClasses []string
	// Conflict says how the quotas disagree, naming them; empty when they agree.
	Conflict string
}

// RunBounds are the most one run may have: each the lowest of the quotas' runLimits.
type RunBounds struct {
	MaxCost                                 Money
	MaxSteps, MaxTokens, MaxTranscriptBytes Tokens
	MaxBranches, MaxDepth                   Tokens
	Timeout                                 time.Duration
	TimeoutBy                               string
}

// Spends reports whether any cap bounds what calls spend or use.
func (c *Caps) Spends() bool {
	return c.CostPerDay.Set || c.CostPerMonth.Set || c.TokensPerDay.Set || c.TokensPerMonth.Set
}

// Costs reports whether a cost cap applies.
func (c *Caps) Costs() bool { return c.CostPerDay.Set || c.CostPerMonth.Set }

// CapsOf combines a namespace's quotas. Quotas are taken in order of name, so the same quotas
// always give the same caps and name the same quota.
func CapsOf(quotas []v1alpha1.AgentQuota) Caps {
	qs := slices.Clone(quotas)
	slices.SortFunc(qs, func(a, b v1alpha1.AgentQuota) int { return strings.Compare(a.Name, b.Name) })
	c := Caps{Currency: DefaultCurrency}
	var currencyBy, queueBy, classesBy string
	var conflicts []string
	for i := range qs {
		q, s := qs[i].Name, &qs[i].Spec
		lowerMoney(&c.CostPerDay, s.MaxCostPerDay, q)
		lowerMoney(&c.CostPerMonth, s.MaxCostPerMonth, q)
		lowerTokens(&c.TokensPerDay, s.MaxTokensPerDay, q)
		lowerTokens(&c.TokensPerMonth, s.MaxTokensPerMonth, q)
		lowerTokens(&c.TranscriptBytes, s.MaxTranscriptBytes, q)
		c.Runs.lower(s.RunLimits, q)
		if s.Admission == v1alpha1.AdmissionKueue && !c.Kueue {
			c.Kueue, c.KueueBy = true, q
		}
		if s.Currency != nil {
			if agree(&c.Currency, &currencyBy, *s.Currency, q) != "" {
				conflicts = append(conflicts, fmt.Sprintf("currency: %s says %s, %s says %s", currencyBy, c.Currency, q, *s.Currency))
			}
		}
		if s.DefaultQueue != nil {
			if agree(&c.DefaultQueue, &queueBy, *s.DefaultQueue, q) != "" {
				conflicts = append(conflicts, fmt.Sprintf("defaultQueue: %s says %s, %s says %s", queueBy, c.DefaultQueue, q, *s.DefaultQueue))
			}
		}
		if len(s.PriorityClasses) > 0 {
			if classesBy == "" {
				c.PriorityClasses, classesBy = slices.Clone(s.PriorityClasses), q
			} else if !slices.Equal(c.PriorityClasses, s.PriorityClasses) {
				conflicts = append(conflicts, fmt.Sprintf("priorityClasses: %s says [%s], %s says [%s]", classesBy,
					strings.Join(c.PriorityClasses, ", "), q, strings.Join(s.PriorityClasses, ", ")))
			}
		}
	}
	c.Conflict = strings.Join(conflicts, "; ")
	return c
}

// agree takes v, set by quota q, as the value of a setting all quotas must agree on: the first
// quota to set it sets it; a later one that says otherwise is a conflict (returned, not taken).
func agree(value, by *string, v, q string) string {
	if *by == "" {
		*value, *by = v, q
		return ""
	}
	if *value != v {
		return v
	}
	return ""
}

func lowerMoney(m *Money, raw *string, quota string) {
	if raw == nil {
		return
	}
	limit, err := cost.Parse(*raw)
	if err != nil {
		// The API server refuses such a value; one stored before that rule caps at nothing,
		// which is the safe reading of a cap nobody can read.
		limit = decimal.Zero
	}
	if !m.Set || limit.LessThan(m.Limit) {
		*m = Money{Limit: limit, Quota: quota, Set: true}
	}
}

func lowerTokens[T int32 | int64](t *Tokens, v *T, quota string) {
	if v == nil {
		return
	}
	if n := int64(*v); !t.Set || n < t.Limit {
		*t = Tokens{Limit: n, Quota: quota, Set: true}
	}
}

// lower takes the lower of each run limit and a quota's runLimits.
func (b *RunBounds) lower(l *v1alpha1.QuotaRunLimits, quota string) {
	if l == nil {
		return
	}
	lowerMoney(&b.MaxCost, l.MaxCost, quota)
	lowerTokens(&b.MaxSteps, l.MaxSteps, quota)
	lowerTokens(&b.MaxTokens, l.MaxTokens, quota)
	lowerTokens(&b.MaxTranscriptBytes, l.MaxTranscriptBytes, quota)
	lowerTokens(&b.MaxBranches, l.MaxBranches, quota)
	lowerTokens(&b.MaxDepth, l.MaxDepth, quota)
	if d, err := l.Timeout.Get(); err == nil && d > 0 && (b.TimeoutBy == "" || d < b.Timeout) {
		b.Timeout, b.TimeoutBy = d, quota
	}
}
