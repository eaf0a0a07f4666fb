// Package workflow is the pure core of the AgentRun controller: given a run's pinned config, its
// status and the result of one agent step, it decides the run's next status and the Events to
// emit. It imports no Kubernetes client and reads no clock: the caller passes the time in.
//
// A run moves one step at a time. Before a step starts, the guards (an ordered chain of small
// functions, see guards.go) may end the run. After a step, Apply classifies its result, records
// it and settles where the run goes (apply.go): the mode's routing rules (a table keyed by mode,
// see modes.go) say where control goes next, and one function says which gate, if any, holds the
// run there (gateAt, gates.go).
package workflow
