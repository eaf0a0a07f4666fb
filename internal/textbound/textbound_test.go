package textbound_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/baton-dev/baton/internal/textbound"
)

// stored is s as the transcript writes it: JSON, HTML characters as they are.
func stored(t interface{ Fatal(...any) }, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// inStatus is s as the API server writes it: Go's JSON, HTML characters escaped.
func inStatus(t interface{ Fatal(...any) }, s string) []byte {
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestStoredLenIsTheLengthOfTheStoredJSON(t *testing.T) {
	for name, s := range map[string]string{
		"plain":            "hello",
		"html":             "<b>&amp;</b>",
		"controls":         "\x01\x02\x1b[31m\a\b\f",
		"quotes and lines": "say \"hi\"\n\r\t\\",
		"separators":       "a\u2028b\u2029c",
		"invalid bytes":    "a\xff\xfeb",
		"emoji":            "🎉é",
	} {
		if got, want := textbound.StoredLen(s), len(stored(t, s))-2; got < want {
			t.Errorf("%s: StoredLen %d, the JSON takes %d", name, got, want)
		}
	}
}

func TestPropertyStoredFitsItsBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.StringOf(rapid.RuneFrom([]rune{'a', '<', '"', '\n', '\x01', 'é', '🎉', '\u2028'})).Draw(t, "s")
		n := rapid.IntRange(0, 200).Draw(t, "n")
		cut := textbound.Stored(s, n)
		if !strings.HasPrefix(s, cut) {
			t.Fatalf("%q is not a prefix of %q", cut, s)
		}
		if got := len(stored(t, cut)) - 2; got > n {
			t.Fatalf("%q takes %d bytes stored, more than %d", cut, got, n)
		}
		if cut != s && len(stored(t, s[:len(cut)+len(string([]rune(s[len(cut):])[0]))]))-2 <= n {
			t.Fatalf("%q was cut short of its bound %d", cut, n)
		}
	})
}

// runes are the characters whose encodings differ the most between the units.
var runes = []rune{'a', '<', '&', '"', '\n', '\x01', 'é', '🎉', '\u2028'}

func TestPropertyStatusFitsItsBoundAsTheAPIServerWritesIt(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.StringOf(rapid.RuneFrom(runes)).Draw(t, "s")
		n := rapid.IntRange(len(textbound.Mark), 200).Draw(t, "n")
		cut := textbound.Status(s, n)
		if got := len(inStatus(t, cut)) - 2; got > n {
			t.Fatalf("%q takes %d bytes in status, more than %d", cut, got, n)
		}
		if textbound.FitsStatus(s, n) != (cut == s) {
			t.Fatalf("%q fits %d: %t, but was cut to %q", s, n, textbound.FitsStatus(s, n), cut)
		}
		if cut != s && !strings.HasPrefix(s, strings.TrimSuffix(cut, textbound.Mark)) {
			t.Fatalf("%q is not a beginning of %q", cut, s)
		}
	})
}

func TestPropertyBytesAndLineCutOnACharacter(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.StringOf(rapid.RuneFrom(append(runes, ' ', '\t'))).Draw(t, "s")
		n := rapid.IntRange(len(textbound.Mark)+1, 100).Draw(t, "n")
		for name, cut := range map[string]string{"Bytes": textbound.Bytes(s, n), "BytesMarked": textbound.BytesMarked(s, n)} {
			if len(cut) > n || !utf8.ValidString(cut) {
				t.Fatalf("%s(%q, %d) = %q: %d bytes, valid %t", name, s, n, cut, len(cut), utf8.ValidString(cut))
			}
		}
		line := textbound.Line(s, n)
		if utf8.RuneCountInString(line) > n || strings.ContainsAny(line, "\n\t") {
			t.Fatalf("Line(%q, %d) = %q", s, n, line)
		}
	})
}

func TestStoredNotedSaysHowLongItWas(t *testing.T) {
	s := strings.Repeat("x", 1000)
	got := textbound.StoredNoted(s, 100)
	if len(stored(t, got))-2 > 100 || !strings.HasSuffix(got, "[truncated: 1000 bytes in all]") {
		t.Fatalf("StoredNoted = %q", got)
	}
	if textbound.StoredNoted("short", 100) != "short" {
		t.Fatal("a text within its bound was changed")
	}
}
