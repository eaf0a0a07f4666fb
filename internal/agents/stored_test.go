package agents

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/baton-dev/baton/internal/workflow"
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
		if got, want := StoredLen(s), len(stored(t, s))-2; got < want {
			t.Errorf("%s: StoredLen %d, the JSON takes %d", name, got, want)
		}
	}
}

func TestPropertyBoundStoredFitsItsBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.StringOf(rapid.RuneFrom([]rune{'a', '<', '"', '\n', '\x01', 'é', '🎉', '\u2028'})).Draw(t, "s")
		n := rapid.IntRange(0, 200).Draw(t, "n")
		cut := BoundStored(s, n)
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

func TestAnHTMLAnswerIsBoundedByItsStoredSize(t *testing.T) {
	html := strings.Repeat("<div>\x01</div>", 200000) // 2.6 MB of text, 3.8 MB as JSON
	res, err := checkAnswer(workflow.Result{Output: html}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(stored(t, res.Output)); n > maxAnswerBytes+2 {
		t.Fatalf("the output takes %d bytes stored, more than %d", n, maxAnswerBytes)
	}
	if len(res.Output) < maxAnswerBytes/3 {
		t.Fatalf("the output was cut to %d bytes, far below its bound", len(res.Output))
	}
}
