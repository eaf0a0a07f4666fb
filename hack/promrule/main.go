// Command promrule writes config/prometheus/prometheusrule.yaml: the rule file
// config/prometheus/rules.yaml as a PrometheusRule of the Prometheus Operator, so that the rules
// are written, tested (promtool) and shipped from one file. make manifests runs it, and make
// verify fails when its output is stale.
package main

import (
	"bytes"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: promrule RULES.yaml PROMETHEUSRULE.yaml")
		os.Exit(2)
	}
	if err := write(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "promrule:", err)
		os.Exit(1)
	}
}

func write(in, out string) error {
	raw, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var rules struct {
		Groups []any `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(raw, &rules); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	rule := map[string]any{
		"apiVersion": "monitoring.coreos.com/v1",
		"kind":       "PrometheusRule",
		"metadata": map[string]any{
			"name":   "rules",
			"labels": map[string]any{"app.kubernetes.io/name": "baton", "app.kubernetes.io/component": "alerts"},
		},
		"spec": map[string]any{"groups": rules.Groups},
	}
	data, err := yaml.Marshal(rule)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	b.WriteString("# Generated from rules.yaml by hack/promrule (make manifests). Do not edit.\n")
	b.Write(data)
	return os.WriteFile(out, b.Bytes(), 0o644)
}
