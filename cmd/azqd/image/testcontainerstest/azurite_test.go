package testcontainerstest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/docker/docker/api/types/image"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/modules/azure/azurite"
)

// imageName is the name the docs give azqd's image (docker build -t azqd,
// and the Go builder's docker-archive), which a test of a team's own
// passes to azurite.Run in place of Azurite's, as this one does.
const imageName = "azqd:latest"

// need fails the test under CI, which sets up what it needs, and skips
// it elsewhere, saying why.
func need(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf(format+"; .ci/run sets it up", args...)
	}
	t.Skipf(format, args...)
}

// engine is a client of the container engine testcontainers-go finds
// (DOCKER_HOST, or Docker's usual sockets), once it answers.
// testcontainers-go panics where it finds none; that is an error here.
func engine(ctx context.Context) (cli *testcontainers.DockerClient, err error) {
	defer func() {
		if r := recover(); r != nil {
			cli, err = nil, fmt.Errorf("%v", r)
		}
	}()
	cli, err = testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := cli.Ping(ctx); err != nil {
		cli.Close()
		return nil, err
	}
	return cli, nil
}

// loadImage loads the docker-archive at AZQD_IMAGE_ARCHIVE, the Go
// builder's, into the engine, where it is named imageName: no registry
// is reachable, and testcontainers-go uses the image the engine has
// rather than pull it. It removes the image at the end if the engine did
// not have one of that name before.
func loadImage(ctx context.Context, t *testing.T) {
	t.Helper()
	archive := os.Getenv("AZQD_IMAGE_ARCHIVE")
	if archive == "" {
		need(t, "AZQD_IMAGE_ARCHIVE names no image: build one with go run ./cmd/azqd/image -docker-archive azqd.tar")
	}
	cli, err := engine(ctx)
	if err != nil {
		need(t, "no container engine answers (DOCKER_HOST=%q): %v; podman system service serves Docker's API", os.Getenv("DOCKER_HOST"), err)
	}
	defer cli.Close()
	_, err = cli.ImageInspect(ctx, imageName)
	hadImage := err == nil

	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	resp, err := cli.ImageLoad(ctx, f)
	if err != nil {
		t.Fatalf("loading %s: %v", archive, err)
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("loading %s: %v", archive, err)
	}
	// The engine reports each step as a JSON message; an error is one.
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var m struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&m); err != nil {
			break
		}
		if m.Error != "" {
			t.Fatalf("loading %s: %s", archive, m.Error)
		}
	}
	if _, err := cli.ImageInspect(ctx, imageName); err != nil {
		t.Fatalf("after loading %s, the engine has no %s: %v (it said %s)", archive, imageName, err, out)
	}
	if !hadImage {
		t.Cleanup(func() {
			cli, err := testcontainers.NewDockerClientWithOpts(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			defer cli.Close()
			if _, err := cli.ImageRemove(context.Background(), imageName, image.RemoveOptions{}); err != nil {
				t.Errorf("removing %s: %v", imageName, err)
			}
		})
	}
}

// TestAzuriteModuleStartsAzqd starts azqd's image with testcontainers-go's
// Azurite module exactly as a test of Azurite's queues does, the image's
// name in place of Azurite's, and puts and gets a message through the
// official Go SDK at the container's QueueServiceURL, with Azurite's
// well-known account. The module runs the image's azurite-queue (a link
// to azqd) with --queueHost 0.0.0.0 --queuePort 10001 and waits for the
// port. Ryuk, testcontainers' reaper, is an image of its own, which no
// registry here serves: with TESTCONTAINERS_RYUK_DISABLED=true the test
// terminates its container itself.
func TestAzuriteModuleStartsAzqd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	loadImage(ctx, t)

	// As docs/emulator.md shows it, "With testcontainers-go".
	ctr, err := azurite.Run(ctx, "azqd:latest", azurite.WithEnabledServices(azurite.QueueService))
	testcontainers.CleanupContainer(t, ctr) // terminates it when the test ends
	if err != nil {
		t.Fatal(err)
	}
	serviceURL, err := ctr.QueueServiceURL(ctx) // http://localhost:<mapped port>
	if err != nil {
		t.Fatal(err)
	}
	cred, err := azqueue.NewSharedKeyCredential(azurite.AccountName, azurite.AccountKey)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := azqueue.NewServiceClientWithSharedKeyCredential(serviceURL+"/"+azurite.AccountName, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(ctx, t, svc)

	// It is azqd that served, as its start-up line in the container's
	// log says.
	logs, err := ctr.Logs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(logs)
	logs.Close()
	if !strings.Contains(string(b), "azqd: Queue service is successfully listening at http://0.0.0.0:10001") {
		t.Errorf("the container's log is not azqd's:\n%s", b)
	}
}

// TestAzuriteModuleDefaultServices starts the image with the module's
// defaults, all three services, as versions before v0.40.0 always do
// (entrypoint azurite, with --blobHost, --queueHost and --tableHost): the
// module waits for the three ports, queues work, and the blob port
// refuses with 501 NotImplemented, saying that azqd serves queues only.
func TestAzuriteModuleDefaultServices(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	loadImage(ctx, t)

	ctr, err := azurite.Run(ctx, imageName)
	testcontainers.CleanupContainer(t, ctr)
	if err != nil {
		t.Fatal(err)
	}
	queueURL, err := ctr.QueueServiceURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cred, err := azqueue.NewSharedKeyCredential(azurite.AccountName, azurite.AccountKey)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := azqueue.NewServiceClientWithSharedKeyCredential(queueURL+"/"+azurite.AccountName, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(ctx, t, svc)

	blobURL, err := ctr.BlobServiceURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, blobURL+"/"+azurite.AccountName+"?comp=list", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotImplemented || resp.Header.Get("x-ms-error-code") != "NotImplemented" ||
		!strings.Contains(string(body), "azqd serves the Azure Queue service only") {
		t.Errorf("the blob port answered %s (%s): %s; want 501 NotImplemented from azqd", resp.Status, resp.Header.Get("x-ms-error-code"), body)
	}
}

// roundTrip creates a queue through svc, puts a message, gets it back and
// deletes it.
func roundTrip(ctx context.Context, t *testing.T, svc *azqueue.ServiceClient) {
	t.Helper()
	q := svc.NewQueueClient("testcontainers")
	if _, err := q.Create(ctx, nil); err != nil {
		t.Fatalf("create the queue at %s: %v", svc.URL(), err)
	}
	if _, err := q.EnqueueMessage(ctx, "hello from testcontainers-go", nil); err != nil {
		t.Fatalf("put: %v", err)
	}
	got, err := q.DequeueMessage(ctx, nil)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if len(got.Messages) != 1 || *got.Messages[0].MessageText != "hello from testcontainers-go" {
		t.Fatalf("got %d messages, want the one put", len(got.Messages))
	}
	m := got.Messages[0]
	if _, err := q.DeleteMessage(ctx, *m.MessageID, *m.PopReceipt, nil); err != nil {
		t.Fatalf("delete: %v", err)
	}
}
