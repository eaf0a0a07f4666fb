// Package docs checks that what the documentation says of Baton's API matches the code: the
// condition types the README, docs/ and the CRD's descriptions name are the ones api/v1alpha1
// defines.
package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var root = filepath.Join("..", "..")

// removedConditions are condition types Baton no longer sets, which the upgrade notes in
// docs/operations.md name so that people can change their scripts, and nothing else may name.
var removedConditions = map[string]bool{"Succeeded": true}

// definedConditions reads the condition types api/v1alpha1 defines: the value of each string
// constant named Condition..., keyed by the value, with the constant's name.
func definedConditions(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range apiFiles(t) {
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			addConditions(t, gen, out)
		}
	}
	if len(out) == 0 {
		t.Fatal("api/v1alpha1 defines no Condition constants: has the package moved?")
	}
	return out
}

// addConditions adds to out the string constants named Condition... of one const declaration,
// keyed by their value.
func addConditions(t *testing.T, gen *ast.GenDecl, out map[string]string) {
	t.Helper()
	for _, spec := range gen.Specs {
		vs := spec.(*ast.ValueSpec)
		for i, name := range vs.Names {
			if !strings.HasPrefix(name.Name, "Condition") || i >= len(vs.Values) {
				continue
			}
			lit, ok := vs.Values[i].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				continue
			}
			value, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatalf("constant %s: %v", name.Name, err)
			}
			out[value] = name.Name
		}
	}
}

// apiFiles parses api/v1alpha1's Go files, with their comments, leaving out tests.
func apiFiles(t *testing.T) []*ast.File {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(root, "api", "v1alpha1", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	fset := token.NewFileSet()
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// fieldDoc is the doc comment of a struct type's field in api/v1alpha1.
func fieldDoc(t *testing.T, typeName, fieldName string) string {
	t.Helper()
	for _, f := range apiFiles(t) {
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.TYPE {
				continue
			}
			for _, spec := range gen.Specs {
				ts := spec.(*ast.TypeSpec)
				st, ok := ts.Type.(*ast.StructType)
				if !ok || ts.Name.Name != typeName {
					continue
				}
				for _, field := range st.Fields.List {
					if len(field.Names) == 1 && field.Names[0].Name == fieldName && field.Doc != nil {
						return field.Doc.Text()
					}
				}
			}
		}
	}
	t.Fatalf("api/v1alpha1 has no documented field %s.%s", typeName, fieldName)
	return ""
}

func readDoc(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// compare reports, naming where, each condition type the code defines that a list leaves out
// and each the list names that the code does not define.
func compare(t *testing.T, where string, listed []string, defined map[string]string) {
	t.Helper()
	for _, c := range sortedKeys(defined) {
		if !slices.Contains(listed, c) {
			t.Errorf("%s does not list the condition %s (api/v1alpha1.%s)", where, c, defined[c])
		}
	}
	for _, c := range listed {
		if _, ok := defined[c]; !ok {
			t.Errorf("%s lists the condition %s, which api/v1alpha1 defines no Condition constant for", where, c)
		}
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// configOnly are the conditions of an AgentConfig alone: a run never has them.
var configOnly = []string{"Notifying"}

// runConditions are the conditions the code defines that a run may have.
func runConditions(t *testing.T) map[string]string {
	t.Helper()
	defined := definedConditions(t)
	for _, c := range configOnly {
		delete(defined, c)
	}
	return defined
}

// TestTheREADMEListsEveryConditionOfARun compares the conditions row of the README's table of an
// AgentRun's status with the condition types the code defines: each of them is a run's.
func TestTheREADMEListsEveryConditionOfARun(t *testing.T) {
	row := regexp.MustCompile("(?m)^\\| `conditions` \\|(.*)\\|$").FindStringSubmatch(readDoc(t, "README.md"))
	if row == nil {
		t.Fatal("README.md has no `conditions` row in its table of an AgentRun's status")
	}
	// A condition is written `Name` or `Name=True`; lower-case names in the row are fields.
	var listed []string
	for _, m := range regexp.MustCompile("`([A-Z][A-Za-z]*)(?:=[A-Za-z]+)?`").FindAllStringSubmatch(row[1], -1) {
		listed = append(listed, m[1])
	}
	compare(t, "README.md's conditions row of an AgentRun's status", listed, runConditions(t))
}

// TestTheCRDDescribesEveryCondition compares the conditions an AgentRun's status.conditions
// description lists in its first sentence (the CRD's schema description, from the field's doc
// comment) with the condition types the code defines, and checks that the AgentConfig's names
// only defined ones.
func TestTheCRDDescribesEveryCondition(t *testing.T) {
	defined := definedConditions(t)
	// The first sentence is the list: "conditions are A, B and C."
	firstSentence := func(doc string) []string {
		sentence, _, _ := strings.Cut(strings.Join(strings.Fields(doc), " "), ". ")
		if !strings.HasPrefix(sentence, "conditions are ") {
			t.Fatalf("a status.conditions description does not begin with the list of conditions (conditions are ...): %q", sentence)
		}
		return regexp.MustCompile(`\b[A-Z][A-Za-z]*\b`).FindAllString(sentence, -1)
	}
	compare(t, "AgentRunStatus.Conditions' doc comment (the CRD's description of status.conditions)",
		firstSentence(fieldDoc(t, "AgentRunStatus", "Conditions")), runConditions(t))

	configs := firstSentence(fieldDoc(t, "AgentConfigStatus", "Conditions"))
	for _, c := range configOnly {
		if !slices.Contains(configs, c) {
			t.Errorf("AgentConfigStatus.Conditions' doc comment does not list %s, a config's condition", c)
		}
	}
	for _, c := range configs {
		if _, ok := defined[c]; !ok {
			t.Errorf("AgentConfigStatus.Conditions' doc comment lists the condition %s, which api/v1alpha1 defines no Condition constant for", c)
		}
	}
}

// TestTheDocsNameOnlyDefinedConditions checks every condition the README and docs/ name with a
// status (`Ready=False`) or wait for (kubectl wait --for=condition=Ready) is one the code
// defines. Only the upgrade notes in docs/operations.md may name a removed condition.
func TestTheDocsNameOnlyDefinedConditions(t *testing.T) {
	defined := definedConditions(t)
	for c := range removedConditions {
		if _, ok := defined[c]; ok {
			t.Errorf("%s is listed as a removed condition but api/v1alpha1.%s defines it", c, defined[c])
		}
	}
	docs := []string{"README.md", "CONTRIBUTING.md"}
	for _, pattern := range []string{"docs/*.md", "docs/*/*.md"} {
		matches, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range matches {
			rel, _ := filepath.Rel(root, m)
			docs = append(docs, filepath.ToSlash(rel))
		}
	}
	named := []*regexp.Regexp{
		regexp.MustCompile("`([A-Z][A-Za-z]*)=(?:True|False)\\b"),
		regexp.MustCompile(`--for=condition=([A-Za-z]+)`),
	}
	checked := 0
	for _, doc := range docs {
		for i, line := range strings.Split(readDoc(t, doc), "\n") {
			for _, re := range named {
				for _, m := range re.FindAllStringSubmatch(line, -1) {
					checked++
					c := m[1]
					if _, ok := defined[c]; ok {
						continue
					}
					if removedConditions[c] && doc == "docs/operations.md" {
						continue
					}
					t.Errorf("%s:%d names the condition %s, which api/v1alpha1 defines no Condition constant for", doc, i+1, c)
				}
			}
		}
	}
	if checked == 0 {
		t.Error("found no condition named in the docs: has the way they write conditions changed?")
	}
}
