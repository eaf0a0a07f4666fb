package v1alpha1

import (
	"fmt"
	"time"
)

// MaxDuration is the longest duration the API takes: a year.
const MaxDuration = 8760 * time.Hour

// Duration is a length of time as Go writes it: "90s", "1h30m", "500ms". It is a string in the
// API, not a metav1.Duration, so that every stored value decodes: the API server refuses a
// value that Go cannot read or that is longer than a year, and a value stored before those
// rules only makes its own object invalid, never the operator's watch of every object of the
// kind.
// +kubebuilder:validation:Type=string
// +kubebuilder:validation:MaxLength=32
// +kubebuilder:validation:Pattern=`^([0-9]{1,9}(\.[0-9]{1,9})?(ns|us|µs|ms|s|m|h)){1,4}$`
// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('8760h')",message="must be at most 8760h (a year)"
type Duration string

// NewDuration returns d as an API Duration.
func NewDuration(d time.Duration) *Duration {
	s := Duration(d.String())
	return &s
}

// Get reads the duration: zero when unset, an error naming the value when Go cannot read it or
// it is negative or longer than MaxDuration.
func (d *Duration) Get() (time.Duration, error) {
	if d == nil || *d == "" {
		return 0, nil
	}
	v, err := time.ParseDuration(string(*d))
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 90s or 1h30m", string(*d))
	}
	if v < 0 || v > MaxDuration {
		return 0, fmt.Errorf("%s is not between 0s and 8760h (a year)", string(*d))
	}
	return v, nil
}

// OrZero is the duration, or zero when it is unset or unreadable.
func (d *Duration) OrZero() time.Duration {
	v, _ := d.Get()
	return v
}
