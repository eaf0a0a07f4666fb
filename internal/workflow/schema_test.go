package workflow

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

func TestCompileSchemaResolvesOnlyWhatItHolds(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(secret, []byte(`{"type": "string", "const": "s3cr3t-token"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var fetched atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetched.Add(1)
		_, _ = w.Write([]byte(`{"type": "string"}`))
	}))
	defer srv.Close()

	cases := map[string]struct {
		schema string
		// wantErr is a part of the error, or empty when the schema compiles.
		wantErr string
	}{
		"a reference inside the schema resolves": {
			schema: `{"$defs": {"id": {"type": "string"}}, "type": "object", "properties": {"id": {"$ref": "#/$defs/id"}}}`,
		},
		"a draft's metaschema resolves without a fetch": {
			schema: `{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "string"}`,
		},
		"a file reference is refused": {
			schema:  `{"$ref": "file://` + secret + `"}`,
			wantErr: "refers to file://" + secret,
		},
		"a nested file reference is refused": {
			schema:  `{"type": "object", "properties": {"a": {"items": {"$ref": "file://` + secret + `#/const"}}}}`,
			wantErr: "Baton never reads a file or fetches a URL",
		},
		"a relative reference against a file $id is refused": {
			schema:  `{"$id": "file://` + filepath.Dir(secret) + `/", "$ref": "token"}`,
			wantErr: "refers to file://" + secret,
		},
		"a loopback URL is refused": {
			schema:  `{"$ref": "` + srv.URL + `/schema.json"}`,
			wantErr: "refers to " + srv.URL,
		},
		"an unknown $schema URL is refused": {
			schema:  `{"$schema": "` + srv.URL + `/meta", "type": "string"}`,
			wantErr: "refers to " + srv.URL,
		},
		"a schema nested past the bound is refused": {
			schema:  strings.Repeat(`{"items": `, 40) + `{}` + strings.Repeat(`}`, 40),
			wantErr: "nested 41 levels deep",
		},
		"a bracket inside a string does not count as nesting": {
			schema: `{"description": "` + strings.Repeat("[{", 100) + `", "type": "string"}`,
		},
		"a schema past the size bound is refused": {
			schema:  `{"description": "` + strings.Repeat("x", maxSchemaBytes) + `"}`,
			wantErr: "more than the 65536 a schema may have",
		},
		"a reference to itself is refused": {
			schema:  `{"$ref": "#"}`,
			wantErr: "its references go round in a cycle",
		},
		"references that go round are refused": {
			schema:  `{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}`,
			wantErr: "its references go round in a cycle",
		},
		"a recursive schema that consumes the value resolves": {
			schema: `{"type": "object", "properties": {"child": {"$ref": "#"}}}`,
		},
		"a schema that is not a schema says so": {
			schema:  `{"type": 7}`,
			wantErr: "not a valid JSON Schema",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := CompileSchema("baton:///agents/a/outputSchema.json", []byte(tc.schema))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("want it to compile, got %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("want an error with %q, it compiled", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("want an error with %q, got %v", tc.wantErr, err)
			}
			if err != nil && strings.Contains(err.Error(), "s3cr3t") {
				t.Fatalf("the error shows the file's content: %v", err)
			}
		})
	}
	if n := fetched.Load(); n != 0 {
		t.Fatalf("the schema server was called %d times", n)
	}
}
