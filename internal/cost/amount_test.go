package cost_test

import (
	"math/big"
	"regexp"
	"strings"
	"testing"

	"github.com/shopspring/decimal"
	"pgregory.net/rapid"

	"github.com/baton-dev/baton/internal/cost"
)

func TestParseReadsAmounts(t *testing.T) {
	for name, tc := range map[string]struct {
		in, want string
	}{
		"zero":                       {in: "0", want: "0"},
		"zero with a fraction":       {in: "0.000", want: "0"},
		"whole":                      {in: "50", want: "50"},
		"cents":                      {in: "2.50", want: "2.5"},
		"a per-token price":          {in: "0.000000075", want: "0.000000075"},
		"leading zeros":              {in: "007.10", want: "7.1"},
		"twelve digits each side":    {in: "999999999999.999999999999", want: "999999999999.999999999999"},
		"the smallest amount":        {in: "0.000000000001", want: "0.000000000001"},
		"twelve zeros each side":     {in: "000000000000.000000000000", want: "0"},
		"a round trillion minus one": {in: "999999999999", want: "999999999999"},
	} {
		t.Run(name, func(t *testing.T) {
			d, err := cost.Parse(tc.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.in, err)
			}
			if got := cost.Format(d); got != tc.want {
				t.Errorf("Format(Parse(%q)) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseSaysWhatIsWrong(t *testing.T) {
	for name, tc := range map[string]struct {
		in, want string
	}{
		"empty":                  {in: "", want: "an amount is required"},
		"negative":               {in: "-1", want: `"-1" has a sign`},
		"negative zero":          {in: "-0", want: "has a sign"},
		"plus":                   {in: "+2.50", want: "has a sign"},
		"exponent":               {in: "1e3", want: `"1e3" has an exponent`},
		"capital exponent":       {in: "2.5E-3", want: "has an exponent"},
		"leading space":          {in: " 1", want: "has a space"},
		"trailing newline":       {in: "1\n", want: "has a space"},
		"comma as the point":     {in: "2,50", want: "the decimal separator is a point"},
		"thousands":              {in: "1,000", want: "thousands are not separated"},
		"not a number":           {in: "NaN", want: `'N' is not a digit`},
		"infinity":               {in: "Inf", want: `'I' is not a digit`},
		"hex":                    {in: "0x10", want: `'x' is not a digit`},
		"underscore":             {in: "1_000", want: `'_' is not a digit`},
		"currency sign":          {in: "$2", want: `'$' is not a digit`},
		"other digits":           {in: "١٢", want: `'١' is not a digit`},
		"only a point":           {in: ".", want: "no digit before the point"},
		"no whole part":          {in: ".5", want: "no digit before the point"},
		"no fraction":            {in: "5.", want: "no digit after the point"},
		"two points":             {in: "1.2.3", want: "more than one point"},
		"thirteen digits before": {in: "1000000000000", want: "13 digits before the point, at most 12"},
		"thirteen digits after":  {in: "0.0000000000001", want: "13 digits after the point, at most 12"},
		"a long value is cut":    {in: strings.Repeat("9", 500), want: "…\" has 500 digits before the point"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := cost.Parse(tc.in)
			if err == nil {
				t.Fatalf("Parse(%q) accepted it", tc.in)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse(%q) = %q, want it to say %q", tc.in, err, tc.want)
			}
			if len(err.Error()) > 200 {
				t.Errorf("Parse(%q) error is %d bytes long", tc.in, len(err.Error()))
			}
		})
	}
}

func TestParsePriceHasSixDigitsEachSide(t *testing.T) {
	for in, ok := range map[string]bool{
		"0.15":           true,
		"999999.999999":  true,
		"1000000":        false,
		"0.0000001":      false,
		"0.000001":       true,
		"0.000000075000": false,
	} {
		if _, err := cost.ParsePrice(in); (err == nil) != ok {
			t.Errorf("ParsePrice(%q) = %v, want accepted %t", in, err, ok)
		}
	}
}

func TestFormatWritesEveryDigit(t *testing.T) {
	for name, tc := range map[string]struct {
		in   decimal.Decimal
		want string
	}{
		"zero":                           {in: decimal.Zero, want: "0"},
		"zero with an exponent":          {in: decimal.New(0, -7), want: "0"},
		"trailing zeros":                 {in: decimal.New(12500, -3), want: "12.5"},
		"small":                          {in: decimal.New(123, -4), want: "0.0123"},
		"whole with a negative exponent": {in: decimal.New(1000, -3), want: "1"},
		"positive exponent":              {in: decimal.New(12, 20), want: "1200000000000000000000"},
		"more digits than an amount":     {in: decimal.New(1, -30), want: "0.000000000000000000000000000001"},
		"negative":                       {in: decimal.New(-5, -1), want: "-0.5"},
		"large coefficient":              {in: decimal.NewFromBigInt(new(big.Int).Lsh(big.NewInt(1), 100), -2), want: "12676506002282294014967032053.76"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := cost.Format(tc.in); got != tc.want {
				t.Errorf("Format = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestFormatIgnoresDecimalsSettings sets the settings another package could set, and checks the
// API's amounts do not change with them.
func TestFormatIgnoresDecimalsSettings(t *testing.T) {
	sci, trim := decimal.UseScientificNotation, decimal.TrimTrailingZeros
	t.Cleanup(func() { decimal.UseScientificNotation, decimal.TrimTrailingZeros = sci, trim })
	decimal.UseScientificNotation, decimal.TrimTrailingZeros = true, false
	if got := cost.Format(decimal.New(25, 3)); got != "25000" {
		t.Errorf("Format = %q, want 25000", got)
	}
	if got := cost.Format(decimal.New(2500, -3)); got != "2.5" {
		t.Errorf("Format = %q, want 2.5", got)
	}
}

// formatted is what Format writes of an amount: no leading zeros, no trailing zeros after the
// point, no point with nothing after it, no exponent.
var formatted = regexp.MustCompile(`^(0|[1-9][0-9]*)(\.[0-9]*[1-9])?$`)

// amount draws an amount as Parse accepts it, as a count of 10^-12.
func amount() *rapid.Generator[decimal.Decimal] {
	return rapid.Custom(func(t *rapid.T) decimal.Decimal {
		whole := rapid.Int64Range(0, 999_999_999_999).Draw(t, "whole")
		frac := rapid.Int64Range(0, 999_999_999_999).Draw(t, "frac")
		return decimal.New(whole, 0).Add(decimal.New(frac, -12))
	})
}

func TestPropertyFormatRoundTrips(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		x := amount().Draw(t, "x")
		back, err := cost.Parse(cost.Format(x))
		if err != nil {
			t.Fatalf("Parse(Format(%s)): %v", x, err)
		}
		if !back.Equal(x) {
			t.Fatalf("Parse(Format(%s)) = %s", x, back)
		}
	})
}

func TestPropertyFormatRoundTripsWhatParseRead(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.StringMatching(cost.Pattern).Draw(t, "s")
		x, err := cost.Parse(s)
		if err != nil {
			t.Fatalf("Parse(%q), which matches Pattern: %v", s, err)
		}
		f := cost.Format(x)
		if back, err := cost.Parse(f); err != nil || !back.Equal(x) {
			t.Fatalf("Parse(Format(Parse(%q))) = Parse(%q) = %s, %v", s, f, back, err)
		}
		if !formatted.MatchString(f) {
			t.Fatalf("Format(Parse(%q)) = %q", s, f)
		}
	})
}

func TestPropertyFormatHasNoExponent(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		coef := rapid.Int64().Draw(t, "coef")
		exp := rapid.Int32Range(-40, 40).Draw(t, "exp")
		d := decimal.New(coef, exp)
		s := cost.Format(d)
		if !formatted.MatchString(strings.TrimPrefix(s, "-")) {
			t.Fatalf("Format(%de%d) = %q", coef, exp, s)
		}
		back, err := decimal.NewFromString(s)
		if err != nil || !back.Equal(d) {
			t.Fatalf("Format(%de%d) = %q reads back as %s, %v", coef, exp, s, back, err)
		}
	})
}

// patternEdges are the strings where a pattern and a parser most likely disagree.
var patternEdges = []string{
	"", "0", "00", ".", "0.", ".0", "0.0", "1.2.3", "-0", "+1", "-", "1e3", "1E3", "1e", "e1",
	"NaN", "nan", "Inf", "-Inf", "0x1", "1_000", "1,5", " 1", "1 ", "1\n", "\n1", "1\t",
	"١", "０", "1\u00a0", "\u0661.5",
	"999999", "9999999", "0.999999", "0.9999999", "999999.999999", "999999.9999999",
	"999999999999", "9999999999999", "0.999999999999", "0.9999999999999",
	"999999999999.999999999999", "9999999999999.999999999999", "999999999999.9999999999999",
}

// patternRunes are characters a pattern might treat differently from the parser, digits most.
var patternRunes = []rune("0123456789012345678901234567890123456789..-+eE ,x_N\n\u0661\uff10")

func checkPatternAgrees(t *testing.T, pattern string, parse func(string) (decimal.Decimal, error)) {
	re := regexp.MustCompile(pattern)
	agree := func(t interface{ Errorf(string, ...any) }, s string) {
		_, err := parse(s)
		if match := re.MatchString(s); match != (err == nil) {
			t.Errorf("%q: pattern matches %t, parse says %v", s, match, err)
		}
	}
	t.Run("edges", func(t *testing.T) {
		for _, s := range patternEdges {
			agree(t, s)
		}
	})
	t.Run("random", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			agree(t, rapid.StringOfN(rapid.RuneFrom(patternRunes), 0, 30, -1).Draw(t, "s"))
		})
	})
}

func TestPatternAgreesWithParse(t *testing.T) {
	checkPatternAgrees(t, cost.Pattern, cost.Parse)
}

func TestPricePatternAgreesWithParsePrice(t *testing.T) {
	checkPatternAgrees(t, cost.PricePattern, cost.ParsePrice)
}

func FuzzParse(f *testing.F) {
	for _, s := range patternEdges {
		f.Add(s)
	}
	re := regexp.MustCompile(cost.Pattern)
	f.Fuzz(func(t *testing.T, s string) {
		x, err := cost.Parse(s)
		if re.MatchString(s) != (err == nil) {
			t.Fatalf("%q: pattern and Parse disagree (%v)", s, err)
		}
		if err != nil {
			return
		}
		f := cost.Format(x)
		if back, err := cost.Parse(f); err != nil || !back.Equal(x) {
			t.Fatalf("Parse(Format(Parse(%q))) = Parse(%q) = %s, %v", s, f, back, err)
		}
	})
}
