package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	neturl "net/url"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/console"
)

func (o *options) uiCmd() *cobra.Command {
	var port int
	var openBrowser bool
	var namespaces []string
	cmd := &cobra.Command{
		Use:   "ui [LINK]",
		Short: "Serve the web console on localhost: runs and their timelines, live; the gates waiting for you; decisions, as you",
		Long: `Serve Baton's web console on localhost and print its URL.

Every request the console makes to the API server and to the transcript API carries your own
kubeconfig credentials, so RBAC, the approve verb and the approval webhook apply to you; the
browser never holds a Kubernetes credential. The URL carries a token made at each start: the
console answers only requests that carry it (as a cookie once the URL is opened), that name its
own loopback address, and, for decisions, that come from its own pages.

It looks for runs and model endpoints in every namespace you may list them in, or in
--namespaces, or in the namespace -n names.

LINK is a link a notification carried to a gate (https://CONSOLE/runs/NAMESPACE/RUN#gate, from the
manager's --console-url) or its path: the URL printed opens that page, in this console, once it
has traded its token. kubectl baton ui --open LINK opens it in the browser.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			page := ""
			if len(args) == 1 {
				var err error
				if page, err = linkPage(args[0]); err != nil {
					return err
				}
			}
			return o.serveUI(ctx, port, openBrowser, namespaces, page)
		},
	}
	cmd.Flags().IntVar(&port, "port", 0, "The local port to serve on (0: any free port)")
	cmd.Flags().BoolVar(&openBrowser, "open", false, "Open the console in the default browser")
	cmd.Flags().StringSliceVar(&namespaces, "namespaces", nil, "Look for runs and model endpoints only in these namespaces")
	return cmd
}

func (o *options) serveUI(ctx context.Context, port int, openBrowser bool, namespaces []string, page string) error {
	if port < 0 || port > 65535 {
		return fmt.Errorf("--port %d: must be from 0 to 65535", port)
	}
	cfg, err := o.config.restConfig()
	if err != nil {
		return err
	}
	scheme := kruntime.NewScheme()
	for _, add := range []func(*kruntime.Scheme) error{v1alpha1.AddToScheme, authorizationv1.AddToScheme, authenticationv1.AddToScheme, corev1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	kube, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	if ns := o.config.overrides.Context.Namespace; len(namespaces) == 0 && ns != "" {
		namespaces = []string{ns}
	}
	opts := console.Options{Kube: kube, Namespaces: namespaces, DefaultNamespace: ns}
	review := &authenticationv1.SelfSubjectReview{}
	if err := kube.Create(ctx, review); err != nil {
		// Kubernetes before 1.28 cannot say: decisions still carry who made them, but the
		// inbox cannot leave out the gates you approved or may not approve.
		fmt.Fprintf(o.streams.ErrOut, "warning: the API server did not say who you are: %v\n", err)
	} else {
		opts.User = review.Status.UserInfo.Username
	}
	if op, err := o.operator(ctx); err != nil {
		opts.TranscriptsErr = err
		fmt.Fprintf(o.streams.ErrOut, "warning: the transcript API was not reached, so timelines come from status only: %v\n", err)
	} else {
		defer op.stop()
		opts.Transcripts = op.Client
	}
	srv, err := console.New(opts)
	if err != nil {
		return err
	}
	l, err := listen(ctx, port)
	if err != nil {
		return err
	}
	url := srv.URLTo(l.Addr(), page)
	fmt.Fprintf(o.streams.Out, "Baton console, as %s: %s\nPress Ctrl-C to stop.\n", cmp.Or(opts.User, "you"), url)
	if openBrowser {
		if err := open(ctx, url); err != nil {
			fmt.Fprintf(o.streams.ErrOut, "warning: opening a browser: %v\n", err)
		}
	}
	return srv.Serve(ctx, l)
}

// listen listens on a loopback address of the console's own where the system routes all of
// 127.0.0.0/8 to the loopback interface (Linux): a browser sends a host's cookies to every
// port of that host, so on an address of its own the console's cookie goes to no other local
// server. Elsewhere, or if that fails, it listens on 127.0.0.1.
func listen(ctx context.Context, port int) (net.Listener, error) {
	var lc net.ListenConfig
	if runtime.GOOS == "linux" {
		b := make([]byte, 3)
		if _, err := rand.Read(b); err == nil {
			own := fmt.Sprintf("127.%d.%d.%d", b[0], b[1], 1+b[2]%254)
			if l, err := lc.Listen(ctx, "tcp", net.JoinHostPort(own, strconv.Itoa(port))); err == nil {
				return l, nil
			}
		}
	}
	l, err := lc.Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("listening on 127.0.0.1:%d: %w (choose another with --port)", port, err)
	}
	return l, nil
}

// open opens url in the desktop's default browser.
func open(ctx context.Context, url string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.CommandContext(ctx, "open", url)
	case "windows":
		cmd = exec.CommandContext(ctx, "rundll32", "url.dll,FileProtocolHandler", url)
	default:
		cmd = exec.CommandContext(ctx, "xdg-open", url)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}

// linkPage is the console page a notification's link names: its path and fragment, when the
// path is a run's, a session's or the inbox.
func linkPage(link string) (string, error) {
	u, err := neturl.Parse(link)
	if err != nil {
		return "", fmt.Errorf("LINK %q: %w", link, err)
	}
	page := u.EscapedPath()
	if !strings.HasPrefix(page, "/runs/") && !strings.HasPrefix(page, "/sessions/") && page != "/inbox" {
		return "", fmt.Errorf("LINK %q is no link to a run, a session or the inbox of the console (/runs/NAMESPACE/RUN)", link)
	}
	if u.Fragment != "" {
		page += "#" + u.EscapedFragment()
	}
	return page, nil
}
