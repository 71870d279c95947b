package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// rawWorkload is the queue cycle of queueWorkload sent as plain net/http
// requests without credentials (the server must allow anonymous
// requests): it shows what the server costs without the SDK's client-side
// work (signing, its policy pipeline, response decoding).
type rawWorkload struct {
	client  *http.Client
	base    string // queue URL
	body    []byte
	timeout time.Duration
}

// rawVersion is the x-ms-version the Go SDK sends.
const rawVersion = "2018-03-28"

func newRawWorkload(ctx context.Context, cfg *config, hc *http.Client) (*rawWorkload, error) {
	w := &rawWorkload{
		client:  hc,
		base:    strings.TrimSuffix(cfg.endpoint, "/") + "/" + cfg.queue,
		timeout: cfg.timeout,
	}
	w.body = []byte("<QueueMessage><MessageText>" + strings.Repeat("m", cfg.messageSize) + "</MessageText></QueueMessage>")
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	if _, err := w.do(ctx, http.MethodPut, w.base, nil, http.StatusCreated, http.StatusNoContent); err != nil {
		return nil, fmt.Errorf("creating queue %s: %w", cfg.queue, err)
	}
	if _, err := w.do(ctx, http.MethodDelete, w.base+"/messages", nil, http.StatusNoContent); err != nil {
		return nil, fmt.Errorf("clearing queue %s: %w", cfg.queue, err)
	}
	return w, nil
}

func (w *rawWorkload) ops() []string  { return []string{"put", "get", "delete"} }
func (w *rawWorkload) target() string { return w.base }

// do sends one request and returns the response body if the status is one
// of want.
func (w *rawWorkload) do(ctx context.Context, method, u string, body []byte, want ...int) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("x-ms-version", rawVersion)
	if body != nil {
		req.Header.Set("Content-Type", "application/xml")
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	for _, s := range want {
		if resp.StatusCode == s {
			return b, nil
		}
	}
	return nil, fmt.Errorf("%s %s: %s %s", method, u, resp.Status, resp.Header.Get("x-ms-error-code"))
}

type rawMessages struct {
	Messages []struct {
		ID         string `xml:"MessageId"`
		PopReceipt string `xml:"PopReceipt"`
	} `xml:"QueueMessage"`
}

func (w *rawWorkload) cycle(ctx context.Context, rec *recorder) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	t0 := time.Now()
	if _, err := w.do(ctx, http.MethodPost, w.base+"/messages", w.body, http.StatusCreated); err != nil {
		return fmt.Errorf("put: %w", err)
	}
	t1 := time.Now()
	rec.op(0, t1.Sub(t0))
	for tries := 0; ; tries++ {
		b, err := w.do(ctx, http.MethodGet, w.base+"/messages?numofmessages=1&visibilitytimeout=30", nil, http.StatusOK)
		if err != nil {
			return fmt.Errorf("get: %w", err)
		}
		var ms rawMessages
		if err := xml.Unmarshal(b, &ms); err != nil {
			return fmt.Errorf("get: %w", err)
		}
		t2 := time.Now()
		rec.op(1, t2.Sub(t1))
		if len(ms.Messages) == 0 {
			if rec != nil {
				rec.empty++
			}
			if tries >= maxEmptyGets {
				return errors.New("get: the queue stayed empty")
			}
			t1 = t2
			continue
		}
		m := ms.Messages[0]
		u := w.base + "/messages/" + url.PathEscape(m.ID) + "?popreceipt=" + url.QueryEscape(m.PopReceipt)
		if _, err := w.do(ctx, http.MethodDelete, u, nil, http.StatusNoContent); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		t3 := time.Now()
		rec.op(2, t3.Sub(t2))
		if rec != nil {
			rec.cycle = append(rec.cycle, t3.Sub(t0))
		}
		return nil
	}
}

// serveFloorFor serves the trivial floor handler on addr until ctx is
// done or d has passed, so that the floor can be measured against a
// separate process, as a real server is.
func serveFloorFor(ctx context.Context, addr string, d time.Duration, stdout io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: floorHandler()}
	fmt.Fprintf(stdout, "azqload: serving the floor handler on http://%s/ for %v\n", ln.Addr(), d)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	go func() {
		<-ctx.Done()
		hs.Close()
	}()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
