package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The packages kubectl baton must not link, anywhere in its graph, and why: it runs beside
// kubectl on people's machines and is the operator's client, not a part of it.
var forbidden = []struct {
	pkg *regexp.Regexp
	why string
}{
	{regexp.MustCompile(`^github\.com/baton-dev/baton/(controllers|internal/(operator|steps|toolbox|webhook|telemetry|metrics|tools|a2aserver|transcriptapi|transcript/sqlstore))(/|$)`),
		"the operator's (the plugin reads transcripts with internal/transcriptclient)"},
	{regexp.MustCompile(`^go\.opentelemetry\.io/otel/(sdk|exporters)(/|$)`), "traces are the operator's"},
	{regexp.MustCompile(`^k8s\.io/apiserver(/|$)`), "the API server's library is for servers (the transcript API's authentication)"},
	{regexp.MustCompile(`^k8s\.io/apiextensions-apiserver/`), "beyond the types api/v1alpha1 uses, it is an API server's"},
	{regexp.MustCompile(`^sigs\.k8s\.io/controller-runtime/pkg/(manager|cluster|builder|controller|webhook|leaderelection|healthz|certwatcher|metrics/server|cache)(/|$)`),
		"a controller manager is the operator's; the plugin needs only a client"},
	{regexp.MustCompile(`^sigs\.k8s\.io/kueue(/|$)`), "Kueue's Workloads are the operator's"},
	{regexp.MustCompile(`^(github\.com/jackc/pgx|modernc\.org/sqlite)(/|$)`), "the transcript stores are the operator's"},
	{regexp.MustCompile(`^(k8s\.io/cli-runtime/pkg/(genericclioptions|resource)|sigs\.k8s\.io/kustomize/.*|plugin)$`),
		"kubectl's resource builder and kustomize bring Go's plugin package, which keeps every method of every type in the binary and exports every symbol"},
}

// allowed are exceptions to forbidden: what api/v1alpha1's types import, and the interfaces
// controller-runtime's client names its cache by.
var allowed = regexp.MustCompile(`^(k8s\.io/apiextensions-apiserver/pkg/apis/apiextensions(/v1)?|sigs\.k8s\.io/controller-runtime/pkg/cache/cacheapi)$`)

// The model, A2A and MCP SDKs and the providers built on them come in only through replay
// --live, the one place the plugin calls a model.
var (
	liveOnly = regexp.MustCompile(`^(github\.com/(openai/openai-go|a2aproject/a2a-go|modelcontextprotocol/go-sdk)|github\.com/baton-dev/baton/agents)(/|$)`)
	livePath = "github.com/baton-dev/baton/internal/replay/live"
)

// kubectl baton links none of the operator: no controller manager, API server library,
// OpenTelemetry SDK or store; the SDKs that call models only for replay --live; and not Go's
// plugin package, which would keep every exported symbol in the binary. Each package that
// should not be there is named with the imports that bring it in.
func TestThePluginLinksNoneOfTheOperator(t *testing.T) {
	root, graph := importGraph(t)
	for _, f := range forbidden {
		match := func(p string) bool { return f.pkg.MatchString(p) && !allowed.MatchString(p) }
		for _, chain := range reaching(root, graph, match, "") {
			t.Errorf("kubectl baton links %s, %s: %s", chain[len(chain)-1], f.why, strings.Join(chain, " -> "))
		}
	}
	for _, chain := range reaching(root, graph, liveOnly.MatchString, livePath) {
		t.Errorf("kubectl baton links %s other than through %s (replay --live): %s", chain[len(chain)-1], livePath, strings.Join(chain, " -> "))
	}
}

// importGraph is the plugin's import path and the imports of each package it links, as go list
// says.
func importGraph(t *testing.T) (string, map[string][]string) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command lists the plugin's imports: %v", err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(goTool, "list", "-deps", "-json=ImportPath,Imports", ".")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, stderr.String())
	}
	graph := map[string][]string{}
	root := ""
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		// -deps lists a package after everything it imports: the plugin comes last.
		graph[p.ImportPath], root = p.Imports, p.ImportPath
	}
	return root, graph
}

// reaching is, for each package that match holds for, the shortest chain of imports from root
// to it that does not pass through skip. Only the first package of a chain that match holds
// for is named: what it brings in with it comes out with it.
func reaching(root string, graph map[string][]string, match func(string) bool, skip string) [][]string {
	from := map[string]string{root: ""}
	queue := []string{root}
	var found []string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, next := range graph[p] {
			if _, seen := from[next]; seen || next == skip {
				continue
			}
			from[next] = p
			if match(next) {
				found = append(found, next)
				continue
			}
			queue = append(queue, next)
		}
	}
	sort.Strings(found)
	chains := make([][]string, 0, len(found))
	for _, p := range found {
		var chain []string
		for at := p; at != ""; at = from[at] {
			chain = append([]string{at}, chain...)
		}
		chains = append(chains, chain)
	}
	return chains
}
