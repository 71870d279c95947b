package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/server"
)

// refusedService is an Azurite service azqd does not serve (Blob, Table)
// but listens for when Azurite's flags name it, because tools written for
// Azurite's image (the Testcontainers Azurite modules) wait until every
// port they asked for accepts connections and has announced itself.
// Every request there is refused with a 501 that says why: azqd never
// pretends to store blobs or tables.
type refusedService struct {
	name string // "Blob" or "Table", as in Azurite's start-up lines
	addr string // host:port to listen on
}

// refuser serves one refusedService.
type refuser struct {
	name string
	ln   net.Listener
	hs   *http.Server
	done chan error // the result of hs.Serve, once
}

// refusers are the listeners of the refused services.
type refusers []*refuser

// listenRefused listens for every refused service; on an error it closes
// those already listening.
func listenRefused(services []refusedService, maxConnections int) (refusers, error) {
	var rs refusers
	for _, s := range services {
		ln, err := net.Listen("tcp", s.addr)
		if err != nil {
			for _, r := range rs {
				r.ln.Close()
			}
			return nil, fmt.Errorf("the %s service's address (azqd refuses its requests): %w", s.name, err)
		}
		rs = append(rs, &refuser{name: s.name, ln: newLimitListener(ln, maxConnections), done: make(chan error, 1)})
	}
	return rs, nil
}

// start starts serving, with the timeouts and TLS of the queue server
// qs, which it reads before qs serves.
func (rs refusers) start(qs *http.Server, queue net.Addr) {
	for _, r := range rs {
		r.hs = &http.Server{
			Handler:           refusal(r.name, portOf(queue)),
			TLSConfig:         qs.TLSConfig,
			ReadHeaderTimeout: qs.ReadHeaderTimeout,
			ReadTimeout:       qs.ReadTimeout,
			WriteTimeout:      qs.WriteTimeout,
			IdleTimeout:       qs.IdleTimeout,
			ErrorLog:          qs.ErrorLog,
		}
		go func() {
			if r.hs.TLSConfig != nil {
				r.done <- r.hs.ServeTLS(r.ln, "", "")
			} else {
				r.done <- r.hs.Serve(r.ln)
			}
		}()
	}
}

// announce prints Azurite's start-up line for each service on notes: the
// Queue service at queue, then each refused one, saying that it refuses.
func (rs refusers) announce(notes io.Writer, scheme string, queue net.Addr) {
	fmt.Fprintf(notes, "azqd: Queue service is successfully listening at %s://%s\n", scheme, queue)
	for _, r := range rs {
		fmt.Fprintf(notes, "azqd: %s service is successfully listening at %s://%s, and refuses every request with 501 %s: azqd serves the Queue service only (port %d)\n",
			r.name, scheme, r.ln.Addr(), notImplemented, portOf(queue))
	}
}

// portOf is the port of a TCP address.
func portOf(addr net.Addr) int {
	if ta, ok := addr.(*net.TCPAddr); ok {
		return ta.Port
	}
	return 0
}

// close closes the refused services at once and waits for them.
func (rs refusers) close() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rs.shutdown(ctx)
}

// shutdown stops the refused services gracefully within ctx, closing
// them when it runs out, and waits for their Serve calls to return.
func (rs refusers) shutdown(ctx context.Context) error {
	var errs []error
	for _, r := range rs {
		if err := r.hs.Shutdown(ctx); err != nil {
			r.hs.Close()
		}
		if err := <-r.done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("serving the %s service's refusals: %w", r.name, err))
		}
	}
	return errors.Join(errs...)
}

// notImplemented is the error code of the refusals, Azure's (and
// Azurite's) code for an operation the service does not implement.
const notImplemented = "NotImplemented"

// refusal answers every request with 501 and Azure's Error XML, whose
// x-ms-error-code and message the Azure SDKs show: service (Blob, Table)
// is not served here, and queues are on port queuePort.
func refusal(service string, queuePort int) http.Handler {
	e := &azq.Error{
		Code:       notImplemented,
		StatusCode: http.StatusNotImplemented,
		Message:    fmt.Sprintf("azqd serves the Azure Queue service only, on its port %d (a container may publish it under another); this port stands in for the %s service so that tools written for Azurite start, and refuses every request. Nothing is stored here.", queuePort, service),
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		server.WriteError(w, r, e)
	})
}
