// Command kubectl-baton is the kubectl plugin for Baton's runs: their timelines and transcripts,
// following them as they happen, and the decisions people make (approve, reject, reply, cancel,
// retry), all with the user's own kubeconfig, so RBAC and the approval webhook apply to the
// person at the keyboard. Put it on the PATH and run `kubectl baton`.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func main() {
	if err := newRoot(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}).Execute(); err != nil {
		// An error may quote what a server or a model wrote.
		fmt.Fprintln(terminalWriter{os.Stderr}, "error:", err)
		var code exitCode
		if errors.As(err, &code) {
			os.Exit(code.code)
		}
		os.Exit(1)
	}
}

// exitCode is an error with the exit status it ends the command with, where a script tells
// failures apart (kubectl baton test: 1 when a case failed, 2 when it could not be run).
type exitCode struct {
	code int
	err  error
}

func (e exitCode) Error() string { return e.err.Error() }
func (e exitCode) Unwrap() error { return e.err }

// options are what every command shares: the kubeconfig flags kubectl users know, and how to
// reach the operator's transcript API.
type options struct {
	config  *kubeFlags
	streams genericiooptions.IOStreams
	// operatorURL reaches the transcript API directly; empty, it is found through the
	// operator's Service.
	operatorURL string
	// operatorNamespace is where the operator's Service is.
	operatorNamespace string
}

// newRoot is the plugin's commands, writing to streams. Whatever they write passes
// terminalWriter: no text a model, an agent or a tool wrote reaches the terminal raw.
func newRoot(streams genericiooptions.IOStreams) *cobra.Command {
	streams.Out, streams.ErrOut = terminalWriter{streams.Out}, terminalWriter{streams.ErrOut}
	o := &options{config: newKubeFlags(), streams: streams}
	root := &cobra.Command{
		Use:           "kubectl-baton",
		Short:         "Follow, read and decide on Baton's agent runs",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	o.config.addFlags(root.PersistentFlags())
	root.PersistentFlags().StringVar(&o.operatorURL, "operator-url", os.Getenv("BATON_OPERATOR_URL"),
		"The transcript API's URL; by default it is reached through the operator's Service (port-forward, or the URL the Service names)")
	root.PersistentFlags().StringVar(&o.operatorNamespace, "operator-namespace", "baton-system", "The namespace of the operator's Service")
	root.AddCommand(o.getCmd(), o.describeCmd(), o.handoffsCmd(), o.transcriptCmd(), o.replayCmd(), o.testCmd(), o.logsCmd(),
		o.approveCmd(), o.rejectCmd(), o.replyCmd(), o.cancelCmd(), o.retryCmd(), o.uiCmd(), o.chatCmd())
	return root
}
