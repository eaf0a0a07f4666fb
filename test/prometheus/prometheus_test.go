// Package prometheus checks what Baton ships for Prometheus and Grafana (config/prometheus)
// with promtool, Prometheus' own checker: the rules parse and pass their unit tests, the
// dashboard's queries parse, and both name only metrics the operator serves.
package prometheus

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/baton-dev/baton/internal/metrics"
)

var dir = filepath.Join("..", "..", "config", "prometheus")

// promtool runs the checker with args and fails the test if it finds anything: make test builds
// it (hack/tool.sh promtool).
func promtool(t *testing.T, args ...string) {
	t.Helper()
	bin := os.Getenv("PROMTOOL")
	if bin == "" {
		t.Fatal("PROMTOOL is not set: run make test-unit, which builds promtool (hack/tool.sh promtool)")
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestRulesParseAndPassTheirTests(t *testing.T) {
	promtool(t, "check", "rules", filepath.Join(dir, "rules.yaml"))
	promtool(t, "test", "rules", filepath.Join(dir, "rules_test.yaml"))
}

// dashboardQueries are the dashboard's PromQL expressions, with Grafana's variables made values.
func dashboardQueries(t *testing.T) []string {
	raw, err := os.ReadFile(filepath.Join(dir, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	vars := strings.NewReplacer("$__rate_interval", "5m", "$namespace", ".*", "$config", ".*")
	var out []string
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			out = append(out, vars.Replace(target.Expr))
		}
	}
	if len(out) < 10 {
		t.Fatalf("the dashboard has %d queries", len(out))
	}
	return out
}

// TestDashboardQueriesParse hands the dashboard's queries to promtool as recording rules: it
// parses each one as Prometheus would.
func TestDashboardQueriesParse(t *testing.T) {
	type rule struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var rules []rule
	for i, q := range dashboardQueries(t) {
		rules = append(rules, rule{Record: fmt.Sprintf("dashboard:query_%d", i), Expr: q})
	}
	data, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	promtool(t, "check", "rules", file)
}

// metricNames finds the metric names a query or rule uses: Baton's, and controller-runtime's and
// the workqueue's it also relies on.
// A name after a colon is part of a recording rule's name, not a metric's.
var metricNames = regexp.MustCompile(`(?:^|[^:\w])(baton_[a-z_]+|controller_runtime_[a-z_]+|workqueue_[a-z_]+)\b`)

// TestTheyNameOnlyTheOperatorsMetrics checks every metric the rules and the dashboard name
// against the families the operator serves (a histogram's _bucket, _sum and _count included),
// and that the dashboard shows every family.
func TestTheyNameOnlyTheOperatorsMetrics(t *testing.T) {
	served := map[string]bool{"controller_runtime_reconcile_time_seconds_bucket": true, "workqueue_depth": true}
	for _, n := range metrics.MetricNames() {
		for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
			served[n+suffix] = true
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Expr string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatal(err)
	}
	queries := dashboardQueries(t)
	exprs := slices.Clone(queries)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	for _, text := range exprs {
		for _, m := range metricNames.FindAllStringSubmatch(text, -1) {
			if !served[m[1]] {
				t.Errorf("%s is not a metric the operator serves (in %s)", m[1], text)
			}
		}
	}
	shown := strings.Join(queries, "\n")
	for _, n := range metrics.MetricNames() {
		if !strings.Contains(shown, n) && !slices.Contains([]string{"baton_steps_applied_from_transcript_total"}, n) {
			t.Errorf("the dashboard shows nothing of %s", n)
		}
	}
}

// TestTheDocsListEveryMetric checks the README's and docs/operations.md's tables of metrics
// against the families the operator serves: none missing, none that is not served.
func TestTheDocsListEveryMetric(t *testing.T) {
	row := regexp.MustCompile("(?m)^\\| (`baton_[^|]*)\\|")
	name := regexp.MustCompile("`(baton_[a-z_]+)`")
	for _, doc := range []string{"README.md", filepath.Join("docs", "operations.md")} {
		raw, err := os.ReadFile(filepath.Join("..", "..", doc))
		if err != nil {
			t.Fatal(err)
		}
		listed := map[string]bool{}
		for _, r := range row.FindAllStringSubmatch(string(raw), -1) {
			for _, n := range name.FindAllStringSubmatch(r[1], -1) {
				listed[n[1]] = true
			}
		}
		served := metrics.MetricNames()
		for _, n := range served {
			if !listed[n] {
				t.Errorf("%s does not list %s", doc, n)
			}
		}
		for n := range listed {
			if !slices.Contains(served, n) {
				t.Errorf("%s lists %s, which the operator does not serve", doc, n)
			}
		}
	}
}
