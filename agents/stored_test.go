package agents

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

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
