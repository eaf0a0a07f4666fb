package agentquota

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/ledger"
	"github.com/baton-dev/baton/internal/quota"
)

// Bytes reads what a namespace's transcripts take: the transcript store.
type Bytes interface {
	NamespaceBytes(ctx context.Context, namespace string) (int64, error)
}

// Usage reads what a namespace uses against its quotas: its runs from the cache, what its calls
// spent from the ledger, what its transcripts take from the store. Each is read only when a
// quota caps it.
type Usage struct {
	Reader client.Reader
	Ledger *ledger.Ledger
	Bytes  Bytes
}

// Of is what the namespace uses now, with the runs quotas count and the line of runs waiting;
// admitted names runs this operator let start whose status does not say so yet. Spend is read
// when any quota of the namespace asks for it (all, for a quota's status: all true).
func (u *Usage) Of(ctx context.Context, namespace string, quotas []v1alpha1.AgentQuota, admitted func(string) bool, all bool, now time.Time) (quota.Use, []v1alpha1.AgentRun, []quota.Waiting, error) {
	runs, line, err := Counted(ctx, u.Reader, namespace, now)
	if err != nil {
		return quota.Use{}, nil, nil, err
	}
	use := quota.Count(runs, admitted)
	caps := quota.CapsOf(quotas)
	if all || caps.Spends() || anyPeriodCap(quotas) {
		if use.Spent, err = u.Ledger.Spent(ctx, namespace, caps.Currency, now); err != nil {
			return quota.Use{}, nil, nil, err
		}
	}
	if all || caps.TranscriptBytes.Set {
		if use.TranscriptBytes, err = u.Bytes.NamespaceBytes(ctx, namespace); err != nil {
			return quota.Use{}, nil, nil, fmt.Errorf("reading what the namespace's transcripts take: %w", err)
		}
	}
	return use, runs, line, nil
}

// anyPeriodCap reports whether a quota caps a period's cost or tokens.
func anyPeriodCap(quotas []v1alpha1.AgentQuota) bool {
	for i := range quotas {
		s := &quotas[i].Spec
		if s.MaxCostPerDay != nil || s.MaxCostPerMonth != nil || s.MaxTokensPerDay != nil || s.MaxTokensPerMonth != nil {
			return true
		}
	}
	return false
}
