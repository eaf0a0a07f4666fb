package cost

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
	"unicode"

	"github.com/shopspring/decimal"

	"github.com/baton-dev/baton/internal/textbound"
)

// Pattern is a regular expression (for +kubebuilder:validation:Pattern) that accepts exactly
// the strings Parse accepts: digits, and a point followed by more digits, with no sign, exponent
// or space.
const Pattern = `^[0-9]{1,12}(\.[0-9]{1,12})?$`

// PricePattern is a regular expression that accepts exactly the strings ParsePrice accepts.
const PricePattern = `^[0-9]{1,6}(\.[0-9]{1,6})?$`

// The digits an amount and a price may have on each side of the point.
const (
	amountDigits = 12
	priceDigits  = 6
)

// quotedBytes bounds the text an error quotes, so that a long value does not make a long
// message.
const quotedBytes = 40

// Amount reads an amount Baton keeps (a run's status.cost, a step's cost): "" and anything that
// does not parse are zero, so a status edited by hand cannot stop a run.
func Amount(s string) decimal.Decimal {
	if s == "" {
		return decimal.Zero
	}
	d, err := Parse(s)
	if err != nil {
		return decimal.Zero
	}
	return d
}

// Parse reads an amount as the API keeps it: a non-negative decimal string of 1 to 12 digits,
// optionally followed by a point and 1 to 12 more ("0", "2.50", "0.000000075"). Leading and
// trailing zeros are allowed and count as digits. Signs, exponents, spaces, commas, "NaN" and
// the empty string are refused with an error that says what is wrong.
func Parse(s string) (decimal.Decimal, error) {
	return parse(s, amountDigits)
}

// ParsePrice reads a price per million tokens: like Parse, but with at most 6 digits on each
// side of the point, so that one token's price is a whole number of 10^-12 and every cost an
// amount (see the package comment).
func ParsePrice(s string) (decimal.Decimal, error) {
	return parse(s, priceDigits)
}

func parse(s string, digits int) (decimal.Decimal, error) {
	if s == "" {
		return decimal.Zero, errors.New(`an amount is required, such as "2.50"`)
	}
	q := quote(s)
	whole, frac, point := 0, 0, false
	for i, r := range s {
		switch {
		case r >= '0' && r <= '9':
			if point {
				frac++
			} else {
				whole++
			}
		case r == '.':
			if point {
				return decimal.Zero, fmt.Errorf("%s has more than one point", q)
			}
			point = true
		case i == 0 && (r == '-' || r == '+'):
			return decimal.Zero, fmt.Errorf(`%s has a sign: write the digits alone, such as "2.50"`, q)
		case (r == 'e' || r == 'E') && i > 0 && (s[i-1] >= '0' && s[i-1] <= '9' || s[i-1] == '.'):
			return decimal.Zero, fmt.Errorf("%s has an exponent: write every digit", q)
		case unicode.IsSpace(r):
			return decimal.Zero, fmt.Errorf("%s has a space: write the digits alone", q)
		case r == ',':
			return decimal.Zero, fmt.Errorf(`%s has a comma: the decimal separator is a point ("2.50") and thousands are not separated ("1000")`, q)
		default:
			return decimal.Zero, fmt.Errorf(`%s is not a decimal number: %q is not a digit or a point (write digits such as "2.50")`, q, r)
		}
	}
	switch {
	case whole == 0:
		return decimal.Zero, fmt.Errorf(`%s has no digit before the point: write a 0 there, such as "0.5"`, q)
	case point && frac == 0:
		return decimal.Zero, fmt.Errorf("%s has no digit after the point: write one or drop the point", q)
	case whole > digits:
		return decimal.Zero, fmt.Errorf("%s has %d digits before the point, at most %d", q, whole, digits)
	case frac > digits:
		return decimal.Zero, fmt.Errorf("%s has %d digits after the point, at most %d", q, frac, digits)
	}
	d, err := decimal.NewFromString(s)
	if err != nil {
		return decimal.Zero, fmt.Errorf("%s: %w", q, err)
	}
	return d, nil
}

// quote is s quoted for an error message, cut when long.
func quote(s string) string {
	return fmt.Sprintf("%q", textbound.BytesMarked(s, quotedBytes))
}

// Format writes d as the API keeps it: every digit, no exponent, no trailing zeros after the
// point and no point when nothing follows it ("0", "12.5", "0.0123"). It is exact, and Parse
// reads it back to an equal amount for every amount Parse accepts and every sum of call costs
// below 10^12 (see the package comment). A negative d is written with a sign, which Parse
// refuses: no amount the package computes is negative.
//
// It does not use decimal's String, whose output depends on package-wide settings (scientific
// notation, trailing zeros) that any other package may change.
func Format(d decimal.Decimal) string {
	coef, exp := d.Coefficient(), d.Exponent()
	neg := coef.Sign() < 0
	digits := new(big.Int).Abs(coef).String()
	var whole, frac string
	switch {
	case digits == "0":
		whole = "0"
	case exp >= 0:
		whole = digits + strings.Repeat("0", int(exp))
	default:
		n := int(-exp)
		if len(digits) <= n {
			digits = strings.Repeat("0", n-len(digits)+1) + digits
		}
		whole, frac = digits[:len(digits)-n], strings.TrimRight(digits[len(digits)-n:], "0")
	}
	s := whole
	if frac != "" {
		s += "." + frac
	}
	if neg {
		s = "-" + s
	}
	return s
}
