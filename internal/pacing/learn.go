package pacing

import (
	"net/http"
	"time"
)

// learn takes in what the server's answer s says, at now, of a call granted at grantedAt (zero: a
// call made without a grant).
func (e *Endpoint) learn(now time.Time, s Signal, grantedAt time.Time) {
	e.learnLimits(now, s)
	if s.LimitRequests != 0 && s.RemainingRequests >= 0 {
		e.requests.lowerTo(now, 0, s.RemainingRequests)
		if s.RemainingRequests == 0 {
			e.pause(now, s.ResetRequests)
		}
	}
	if s.LimitTokens != 0 && s.RemainingTokens >= 0 {
		e.tokens.lowerTo(now, e.reserved, s.RemainingTokens)
		if s.RemainingTokens == 0 {
			e.pause(now, s.ResetTokens)
		}
	}
	// A call granted by the time of the last 429 was made before the pause began (nothing is
	// granted while paused): its 429 is old news, and neither lengthens the backoff nor (its
	// success) ends it.
	stale := !grantedAt.IsZero() && !grantedAt.After(e.limitedAt)
	switch {
	case s.RateLimited || s.Status == http.StatusTooManyRequests:
		e.rateLimited++
		if !stale {
			e.streak++
			e.limitedAt = now
		}
		wait := s.RetryAfter
		if wait <= 0 {
			wait = exhaustedReset(s)
		}
		if wait <= 0 {
			wait = backoff(e.streak)
		}
		e.pause(now, wait)
	case s.Status >= 200 && s.Status < 300 && !stale:
		e.streak = 0
	}
}

// learnLimits takes the limits the server reports; each replaces the last it reported, so a
// raised limit is followed too, within the configured one.
func (e *Endpoint) learnLimits(now time.Time, s Signal) {
	l := e.learned
	if s.LimitRequests > 0 && s.LimitRequests <= maxCount {
		l.RequestsPerMinute = s.LimitRequests
	}
	if s.LimitTokens > 0 && s.LimitTokens <= maxCount {
		l.TokensPerMinute = s.LimitTokens
	}
	if l != e.learned {
		e.learned = l
		e.applyLimits(now)
	}
}

// applyLimits sets the effective limits: the configured ones, lowered by what the server reports.
func (e *Endpoint) applyLimits(now time.Time) {
	e.eff = Limits{
		RequestsPerMinute: lower(e.configured.RequestsPerMinute, e.learned.RequestsPerMinute),
		TokensPerMinute:   lower(e.configured.TokensPerMinute, e.learned.TokensPerMinute),
		MaxConcurrent:     e.configured.MaxConcurrent,
	}
	e.requests.set(now, e.eff.RequestsPerMinute)
	e.tokens.set(now, e.eff.TokensPerMinute)
}

// lower is the lower of two limits where 0 is none.
func lower(a, b int64) int64 {
	switch {
	case a <= 0:
		return max(b, 0)
	case b <= 0:
		return a
	default:
		return min(a, b)
	}
}

// pause stops every grant for d. What the buckets would refill meanwhile is not kept for the
// pause's end: the server that asked for it frees room from then on at its own pace, and a
// bucket's worth of calls at once would mostly be turned away again. So at the end the requests
// bucket holds one request and the tokens bucket nothing beyond what calls in flight hold.
func (e *Endpoint) pause(now time.Time, d time.Duration) {
	if d <= 0 {
		return
	}
	if until := now.Add(min(d, maxWait)); until.After(e.pausedUntil) {
		e.pausedUntil = until
	}
	end := e.pausedUntil.Sub(now)
	e.requests.capAt(now, end, 0, 1)
	e.tokens.capAt(now, end, e.reserved, 0)
}

// exhaustedReset is the wait until the limits a 429 says are used up are whole again.
func exhaustedReset(s Signal) time.Duration {
	var d time.Duration
	if s.LimitRequests != 0 && s.RemainingRequests == 0 {
		d = max(d, s.ResetRequests)
	}
	if s.LimitTokens != 0 && s.RemainingTokens == 0 {
		d = max(d, s.ResetTokens)
	}
	return d
}

// backoff is 1 s for the first 429 in a row, doubling with each, up to 30 s.
func backoff(streak int) time.Duration {
	if streak > 5 {
		return 30 * time.Second
	}
	return min(30*time.Second, time.Second<<max(streak-1, 0))
}
