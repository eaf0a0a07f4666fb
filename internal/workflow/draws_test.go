package workflow

import (
	"time"

	"pgregory.net/rapid"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// uniform draws an integer in [lo, hi] with every value equally likely. rapid's own integer
// draws lean towards small values, which would make most generated runs end at their first
// step; bits drawn as Bools are uniform, and shrink towards lo.
func uniform(t *rapid.T, lo, hi int, label string) int {
	span := hi - lo + 1
	v := 0
	for bit := 1; bit < span; bit <<= 1 {
		v <<= 1
		if rapid.Bool().Draw(t, label) {
			v |= 1
		}
	}
	return lo + v%span
}

// chance is true with probability percent/100.
func chance(t *rapid.T, percent int, label string) bool { return uniform(t, 0, 99, label) < percent }

func pick[T any](t *rapid.T, from []T, label string) T {
	return from[uniform(t, 0, len(from)-1, label)]
}

// Uniform, Chance and Pick are the draws above, for the property tests of package
// workflow_test, which drive runs through the Scripted provider (a package that imports this one).
func Uniform(t *rapid.T, lo, hi int, label string) int { return uniform(t, lo, hi, label) }

// Chance is chance, for package workflow_test.
func Chance(t *rapid.T, percent int, label string) bool { return chance(t, percent, label) }

// Pick is pick, for package workflow_test.
func Pick[T any](t *rapid.T, from []T, label string) T { return pick(t, from, label) }

// FirstTrip is the first guard of the chain that trips before the run's next step, for package
// workflow_test.
func FirstTrip(p *Plan, st *v1alpha1.AgentRunStatus, now time.Time) (Trip, bool) {
	return check(p, st, now)
}

// MaxStoredHandoffs is how many handoff records status holds, for package workflow_test.
const MaxStoredHandoffs = maxStoredHandoffs
