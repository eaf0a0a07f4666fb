// Package benchmark measures Baton against a reference: a minimal baseline controller (one JSON
// merge patch of status per handoff, from an informer cache; baseline.go) runs the same
// workloads in the same process against the same kube-apiserver and etcd, and the report gives
// Baton/baseline ratios, which mean the same on any machine.
//
// For each workload, controller and repetition it measures: wall time and handoffs per second;
// the mutating requests the API server counted (apiserver_request_total, by verb and resource,
// the benchmark's own creates and the API server's own requests left out), conflicts among
// them; controller-runtime's reconciles and reconcile p99; the API server's and etcd's CPU
// seconds from their own metrics; this process's CPU seconds and peak RSS; the size of a
// finished run object and of each status write. Baton alone is also measured holding many live
// runs that wait on slow agents, and, as its own binary, killed and started again while it holds
// them (restart.go, MANAGER_BIN), running many runs from many namespaces on one model endpoint
// whose fake server allows fewer calls than they want (overload.go: goodput, 429s, fairness
// among the namespaces, memory, drain time), and spending within budgets in money on a priced
// endpoint (budget.go) and within a namespace's cost cap (quota.go). Run with 'make bench';
// BENCH_REPS (default 3), BENCH_SCALE (default 1; 10 divides the run counts, the long run's steps
// and the overload's server limit by 10) and BENCH_ONLY (say
// "W1,long,live,restart,overload,budget,quota,fanout,writecost") shape the run; BENCH_QUOTA puts an
// AgentQuota in the workloads' namespace, so that every call is checked against its caps;
// BENCH_GUARDRAIL asks a guardrail on loopback about every step's input and output;
// BENCH_UNTRUSTED makes every run's input untrusted, so that every step is tainted. Figures are
// recorded in docs/benchmarks.md.
package benchmark
