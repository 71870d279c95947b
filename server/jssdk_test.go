package server_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/azqlib/azq/server"
)

// TestJavaScriptSDK drives the server with the newest JavaScript SDK,
// @azure/storage-queue (pinned in testdata/jssdk/package.json), through
// testdata/jssdk/sdk.mjs: queues, messages, stale receipts, service
// properties, stored access policies, a service SAS, the secondary
// endpoint and its statistics.
// It needs node and the SDK, which .ci/run installs (npm ci in
// testdata/jssdk); under CI a missing SDK fails the test instead of
// skipping it.
func TestJavaScriptSDK(t *testing.T) {
	srv := server.New(server.Options{})
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	out := runJavaScript(t, "sdk.mjs", server.DevelopmentAccount().ConnectionString(hs.URL+"/devstoreaccount1"))
	var res struct {
		OK      bool     `json:"ok"`
		Checked []string `json:"checked"`
	}
	if err := json.Unmarshal(out, &res); err != nil || !res.OK || len(res.Checked) != 9 {
		t.Fatalf("sdk.mjs reported %s (%v)", out, err)
	}
}

// runJavaScript runs script of testdata/jssdk with node, the SDK's
// connection string in AZQ_CONNECTION_STRING, and returns its standard
// output. Under CI a missing node or SDK fails the test.
func runJavaScript(t *testing.T, script, connectionString string) []byte {
	t.Helper()
	dir := filepath.Join("testdata", "jssdk")
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "@azure", "storage-queue", "package.json"))
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node or the JavaScript SDK is missing (%v); .ci/run installs them", err)
		}
		t.Skipf("node or the JavaScript SDK is missing (%v); from the repository's root, run: (cd server/testdata/jssdk && npm ci)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AZQ_CONNECTION_STRING="+connectionString)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("%s: %v\n%s\n%s", script, err, out, stderr)
	}
	return out
}
