package transient_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"testing"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/internal/transient"
)

func answer(code string, status int) error {
	return &azq.Error{Code: azq.ErrorCode(code), StatusCode: status, Message: code}
}

// cut is a failed connection as net/http reports it.
func cut(err error) error {
	return &url.Error{Op: "Get", URL: "https://account.queue.core.windows.net/q/messages", Err: err}
}

func TestIs(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"ServerBusy", answer("ServerBusy", 503), true},
		{"InternalError", answer("InternalError", 500), true},
		{"OperationTimedOut", answer("OperationTimedOut", 500), true},
		{"too many requests", answer("TooManyRequests", 429), true},
		{"request timeout", answer("RequestTimeout", 408), true},
		{"bad gateway", answer("BadGateway", 502), true},
		{"gateway timeout", answer("GatewayTimeout", 504), true},
		{"wrapped ServerBusy", fmt.Errorf("put: %w", answer("ServerBusy", 503)), true},
		{"QueueNotFound", azq.ErrQueueNotFound, false},
		{"MessageNotFound", azq.ErrMessageNotFound, false},
		{"AuthenticationFailed", answer("AuthenticationFailed", 403), false},
		{"AuthorizationFailure", answer("AuthorizationFailure", 403), false},
		{"MessageTooLarge", azq.ErrMessageTooLarge, false},
		{"invalid argument", azq.ErrInvalidArgument, false},
		{"QueueBeingDeleted", answer(string(azq.CodeQueueBeingDeleted), 409), false},
		{"not implemented", answer("NotImplemented", 501), false},
		{"durable storage failed", fmt.Errorf("op: %w", azq.ErrStorageFailure), false},
		{"connection closed", cut(io.EOF), true},
		{"answer cut off", cut(io.ErrUnexpectedEOF), true},
		{"connection reset", cut(&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}), true},
		{"connection refused", cut(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), true},
		{"read timeout", cut(&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}), true},
		{"unknown host", cut(&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}}), false},
		{"resolver timeout", cut(&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "i/o timeout", Name: "x", IsTimeout: true}}), true},
		{"try timed out", cut(context.DeadlineExceeded), true},
		{"cancelled", cut(context.Canceled), false},
		{"unknown", errors.New("something else"), false},
	}
	for _, tt := range tests {
		if got := transient.Is(tt.err); got != tt.want {
			t.Errorf("%s: Is(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

// A connection to a port nobody listens on is refused: transient, as a
// service restarting is.
func TestRefusedConnectionIsTransient(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = http.Get("http://" + addr + "/")
	if err == nil {
		t.Fatal("a closed port answered")
	}
	if !transient.Is(err) {
		t.Fatalf("Is(%v) = false", err)
	}
}
