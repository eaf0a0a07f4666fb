package transcriptapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// Server serves the API over HTTPS until its context ends. It is a manager Runnable that runs
// on every replica with controllers (the one that holds the transcript).
type Server struct {
	// Addr is the address to listen on, e.g. ":8444".
	Addr string
	// CertDir holds tls.crt and tls.key; empty, a self-signed certificate for localhost is made
	// at start (callers then cannot verify the server, only reach it).
	CertDir string
	Handler http.Handler
	Log     logr.Logger
	// Listening, when set, is told the address the server listens on.
	Listening func(addr string)
}

// NeedLeaderElection is false: every replica serves the transcript API.
func (s *Server) NeedLeaderElection() bool { return false }

// Start listens and serves until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	getCert, err := s.certificates(ctx)
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("the transcript API cannot listen on %s: %w", s.Addr, err)
	}
	srv := &http.Server{
		Handler:           s.Handler,
		ReadHeaderTimeout: 10 * time.Second,
		// A request is read whole within ReadTimeout (a body sent slowly holds nothing for
		// long); the answer, a stream among them, is not bounded by it.
		ReadTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute,
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: getCert,
			// Client certificates are verified by the authenticator against the cluster's CA.
			ClientAuth: tls.RequestClientCert,
			NextProtos: []string{"http/1.1"},
		},
	}
	s.Log.Info("Serving the transcript API", "address", l.Addr().String())
	if s.Listening != nil {
		s.Listening(l.Addr().String())
	}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.ServeTLS(l, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (s *Server) certificates(ctx context.Context) (func(*tls.ClientHelloInfo) (*tls.Certificate, error), error) {
	if s.CertDir != "" {
		w, err := certwatcher.New(filepath.Join(s.CertDir, "tls.crt"), filepath.Join(s.CertDir, "tls.key"))
		if err != nil {
			return nil, fmt.Errorf("the transcript API's certificate: %w", err)
		}
		go func() { _ = w.Start(ctx) }()
		return w.GetCertificate, nil
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil }, nil
}
