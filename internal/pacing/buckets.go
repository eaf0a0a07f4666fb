package pacing

import (
	"math"
	"time"

	"golang.org/x/time/rate"
)

const (
	// burstSeconds is how many seconds' worth of a per-minute limit a bucket holds: small, so a
	// server counting over windows shorter than a minute is not overrun by a minute's worth at once.
	burstSeconds = 10
	// slack absorbs the rounding of a bucket's float count, so a timer set for the moment enough
	// has refilled does not find a hair too little.
	slack = 1e-9
	// maxWait bounds every wait the package sets: a timer, a pause, a reset.
	maxWait = 24 * time.Hour
)

// bucket is one per-minute limit as a rate.Limiter, or none (nil) when there is no limit. The
// limiter counts what was used; what calls in flight hold is the caller's to count (held), since
// a reservation that may be given back is not a rate.Reservation: those can only be cancelled
// whole, and only before they are due.
type bucket struct {
	lim    *rate.Limiter
	perMin int64
	burst  int64
}

// burstOf is the bucket size of a per-minute limit: about ten seconds' worth, at least 1.
func burstOf(perMin int64) int64 {
	return max(1, (perMin*burstSeconds+59)/60)
}

// set makes perMin the limit (0: none). A new limiter starts full; a changed one keeps its count.
func (b *bucket) set(now time.Time, perMin int64) {
	if perMin <= 0 {
		*b = bucket{}
		return
	}
	if b.lim != nil && b.perMin == perMin {
		return
	}
	b.perMin, b.burst = perMin, burstOf(perMin)
	r := rate.Limit(float64(perMin) / 60)
	if b.lim == nil {
		b.lim = rate.NewLimiter(r, int(b.burst))
		return
	}
	b.lim.SetLimitAt(now, r)
	b.lim.SetBurstAt(now, int(b.burst))
}

// wait is how long until need more than held is in the bucket: 0 when it is now, -1 when refilling
// alone never gets there (the bucket is too small beside what calls in flight hold, so one of them
// must end first). A need above the bucket's size counts as its size, so a large ask waits for a
// full bucket and is never stuck.
func (b *bucket) wait(now time.Time, held, need int64) time.Duration {
	if b.lim == nil {
		return 0
	}
	need = min(need, b.burst)
	have := b.lim.TokensAt(now) - float64(held)
	if have >= float64(need)-slack {
		return 0
	}
	if float64(b.burst-held) < float64(need)-slack {
		return -1
	}
	seconds := (float64(need) - have) * 60 / float64(b.perMin)
	if seconds >= maxWait.Seconds() {
		return maxWait
	}
	return max(time.Millisecond, time.Duration(math.Ceil(seconds*1000))*time.Millisecond)
}

// take counts n as used at now. More than the bucket holds makes it negative: a debt the refill
// pays before anyone else goes.
func (b *bucket) take(now time.Time, n int64) {
	if b.lim == nil || n <= 0 {
		return
	}
	if n <= b.burst {
		b.lim.ReserveN(now, int(n))
		return
	}
	// ReserveN refuses more than the burst at once; widening the burst for one reservation takes
	// it whole (SetBurstAt only caps a count above the burst, never raises a negative one).
	b.lim.SetBurstAt(now, int(n))
	b.lim.ReserveN(now, int(n))
	b.lim.SetBurstAt(now, int(b.burst))
}

// lowerTo makes what is in the bucket beyond held at most left; it never raises it.
func (b *bucket) lowerTo(now time.Time, held, left int64) {
	if b.lim == nil {
		return
	}
	over := b.lim.TokensAt(now) - float64(held) - float64(left)
	if over > slack {
		b.take(now, int64(math.Ceil(over)))
	}
}

// capAt lowers the bucket so that d from now it holds at most most beyond held: what it would
// refill by then is spent ahead. It never raises it, and a second call for the same moment
// changes nothing.
func (b *bucket) capAt(now time.Time, d time.Duration, held, most int64) {
	if b.lim == nil {
		return
	}
	refill := d.Seconds() * float64(b.perMin) / 60
	if over := b.lim.TokensAt(now) + refill - float64(held) - float64(most); over >= 1 {
		b.take(now, int64(math.Floor(over)))
	}
}

// window counts the requests and tokens of the calls begun in each of the last 60 seconds: bounded
// memory whatever the rate. Each slot knows its second, so a stale one reads as empty.
type window struct {
	slots [60]slot
}

type slot struct {
	sec, requests, tokens int64
}

func (w *window) slot(sec int64) *slot {
	return &w.slots[((sec%60)+60)%60]
}

// add counts a call begun at now with tokens reserved.
func (w *window) add(now time.Time, tokens int64) {
	sec := now.Unix()
	s := w.slot(sec)
	if s.sec != sec {
		*s = slot{sec: sec}
	}
	s.requests++
	s.tokens += tokens
}

// settle moves the tokens of a call begun at began by delta (used less reserved), if its second
// is still counted.
func (w *window) settle(began time.Time, delta int64) {
	sec := began.Unix()
	if s := w.slot(sec); s.sec == sec {
		s.tokens += delta
	}
}

// sum is the requests and tokens of the calls begun in the minute up to now.
func (w *window) sum(now time.Time) (requests, tokens int64) {
	sec := now.Unix()
	for i := range w.slots {
		if s := &w.slots[i]; s.sec > sec-60 && s.sec <= sec {
			requests += s.requests
			tokens += s.tokens
		}
	}
	return requests, max(tokens, 0)
}
