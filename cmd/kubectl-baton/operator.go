package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/baton-dev/baton/internal/transcriptclient"
)

// The operator's Service for the transcript API, and the annotations by which a Service names
// an operator that runs outside the cluster (the quickstart's, on this machine).
const (
	transcriptService  = "baton-transcript"
	annotationURL      = "agents.baton.dev/transcript-url"
	annotationCABundle = "agents.baton.dev/transcript-ca"
)

// operatorClient calls the transcript API with the user's own credentials; stop ends the
// port-forward it may run through.
type operatorClient struct {
	*transcriptclient.Client
	stop func()
}

// operator reaches the transcript API: at --operator-url; at the URL the operator's Service
// names; or through a port-forward, by way of the API server, to a pod behind the Service. The
// user's credentials go with every request, so the API answers as their RBAC allows.
func (o *options) operator(ctx context.Context) (*operatorClient, error) {
	cfg, err := o.config.restConfig()
	if err != nil {
		return nil, err
	}
	if o.operatorURL != "" {
		return newOperatorClient(cfg, o.operatorURL, nil, false, func() {})
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	svc, err := kube.CoreV1().Services(o.operatorNamespace).Get(ctx, transcriptService, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("finding Baton's transcript API (Service %s/%s): %w; set --operator-url if it is elsewhere",
			o.operatorNamespace, transcriptService, err)
	}
	if u := svc.Annotations[annotationURL]; u != "" {
		ca, err := base64.StdEncoding.DecodeString(svc.Annotations[annotationCABundle])
		if err != nil {
			return nil, fmt.Errorf("the %s annotation of Service %s/%s is not base64", annotationCABundle, o.operatorNamespace, transcriptService)
		}
		return newOperatorClient(cfg, u, ca, false, func() {})
	}
	return o.portForward(ctx, cfg, kube)
}

// portForward forwards a local port to a ready pod behind the operator's Service. The tunnel
// runs through the API server, which authenticates it, so the pod's certificate (issued for the
// Service's name) is not checked against the local address.
func (o *options) portForward(ctx context.Context, cfg *rest.Config, kube kubernetes.Interface) (*operatorClient, error) {
	slices, err := kube.DiscoveryV1().EndpointSlices(o.operatorNamespace).List(ctx,
		metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + transcriptService})
	if err != nil {
		return nil, err
	}
	pod, port := "", int32(0)
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.TargetRef != nil && e.TargetRef.Kind == "Pod" && (e.Conditions.Ready == nil || *e.Conditions.Ready) && len(s.Ports) > 0 && s.Ports[0].Port != nil {
				pod, port = e.TargetRef.Name, *s.Ports[0].Port
			}
		}
	}
	if pod == "" {
		return nil, fmt.Errorf("no ready operator pod behind Service %s/%s", o.operatorNamespace, transcriptService)
	}
	rt, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, err
	}
	target := kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(o.operatorNamespace).Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, target)
	stop, ready := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(int(port))}, stop, ready, io.Discard, o.streams.ErrOut)
	if err != nil {
		return nil, err
	}
	failed := make(chan error, 1)
	go func() { failed <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-failed:
		return nil, fmt.Errorf("port-forward to the operator pod %s/%s: %w", o.operatorNamespace, pod, err)
	case <-ctx.Done():
		close(stop)
		return nil, ctx.Err()
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) == 0 {
		close(stop)
		return nil, fmt.Errorf("port-forward to the operator pod: %w", err)
	}
	return newOperatorClient(cfg, fmt.Sprintf("https://127.0.0.1:%d", ports[0].Local), nil, true, func() { close(stop) })
}

// newOperatorClient calls base with the kubeconfig's credentials (token, exec plugin or client
// certificate), checking the server against ca (the system's roots when empty) unless the
// connection runs through an authenticated tunnel.
func newOperatorClient(cfg *rest.Config, base string, ca []byte, tunnel bool, stop func()) (*operatorClient, error) {
	c := rest.CopyConfig(cfg)
	c.CAData, c.CAFile, c.ServerName = ca, "", ""
	c.Insecure = tunnel
	rt, err := rest.TransportFor(c)
	if err != nil {
		return nil, err
	}
	return &operatorClient{Client: &transcriptclient.Client{Base: base, HTTP: &http.Client{Transport: rt}}, stop: stop}, nil
}
