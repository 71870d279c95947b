package queuetest_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/queuetest"
	"github.com/benbjohnson/clock"
)

// serviceMutant is an in-memory service with one rule of the service
// contract broken.
type serviceMutant struct {
	*azq.Service
	name string
}

// refMutant is a QueueRef of a serviceMutant.
type refMutant struct {
	azq.QueueRef
	svc *serviceMutant
	// bound is the queue a "refBindsOnce" QueueRef stays on once it has
	// found one.
	bound *azq.Queue
}

func (m *serviceMutant) Ref(name string) (azq.QueueRef, error) {
	r, err := m.Service.Ref(name)
	if err != nil {
		return nil, err
	}
	return &refMutant{QueueRef: r, svc: m}, nil
}

func (m *serviceMutant) DeleteQueue(ctx context.Context, name string) error {
	err := m.Service.DeleteQueue(ctx, name)
	if m.name == "deleteOfAMissingQueueSucceeds" && errors.Is(err, azq.ErrQueueNotFound) {
		return nil
	}
	return err
}

func (m *serviceMutant) ListQueues(ctx context.Context, opts azq.ListQueuesOptions) (azq.ListQueuesPage, error) {
	switch m.name {
	case "listIgnoresMaxResults":
		opts.MaxResults = 0
	case "listIgnoresPrefix":
		// The prefix only starts the listing.
		if opts.Marker == "" && opts.Prefix != "" {
			p := opts.Prefix
			opts.Prefix = ""
			page, err := m.Service.ListQueues(ctx, opts)
			page.Queues = slices.DeleteFunc(page.Queues, func(it azq.QueueItem) bool { return it.Name < p })
			return page, err
		}
	case "listAcceptsAnyMarker":
		if _, err := m.Service.ListQueues(ctx, opts); errors.Is(err, azq.ErrInvalidMarker) {
			opts.Marker = ""
		}
	}
	return m.Service.ListQueues(ctx, opts)
}

func (r *refMutant) queue() (*azq.Queue, error) {
	if r.bound != nil {
		return r.bound, nil
	}
	q, err := r.svc.Queue(r.Name())
	if err == nil {
		r.bound = q
	}
	return q, err
}

func (r *refMutant) Create(ctx context.Context, md map[string]string) (bool, error) {
	switch r.svc.name {
	case "createAlwaysCreates":
		_, err := r.QueueRef.Create(ctx, md)
		return err == nil, err
	case "createIgnoresOtherMetadata":
		created, err := r.QueueRef.Create(ctx, md)
		if errors.Is(err, azq.ErrQueueAlreadyExists) {
			return false, nil
		}
		return created, err
	case "createComparesNamesExactly":
		p, err := r.QueueRef.Properties(ctx)
		if err == nil && len(p.Metadata) > 0 && !maps.Equal(p.Metadata, md) {
			return false, azq.ErrQueueAlreadyExists
		}
	case "invalidMetadataCreates":
		if err := azq.ValidateMetadata(md); err != nil {
			r.QueueRef.Create(ctx, nil)
			return false, err
		}
	}
	return r.QueueRef.Create(ctx, md)
}

func (r *refMutant) Put(ctx context.Context, content string, opts *azq.PutOptions) (azq.Message, error) {
	if r.svc.name == "refBindsOnce" {
		q, err := r.queue()
		if err != nil {
			return azq.Message{}, err
		}
		return q.Put(ctx, content, opts)
	}
	return r.QueueRef.Put(ctx, content, opts)
}

func (r *refMutant) Properties(ctx context.Context) (azq.Properties, error) {
	p, err := r.QueueRef.Properties(ctx)
	if r.svc.name == "countSkipsInvisible" && err == nil {
		ms, _ := r.QueueRef.Peek(ctx, 32)
		p.ApproximateMessagesCount = len(ms)
	}
	return p, err
}

func (r *refMutant) SetMetadata(ctx context.Context, md map[string]string) error {
	if r.svc.name == "setMetadataMerges" && len(md) > 0 {
		p, err := r.QueueRef.Properties(ctx)
		if err != nil {
			return err
		}
		merged := maps.Clone(p.Metadata)
		if merged == nil {
			merged = map[string]string{}
		}
		maps.Copy(merged, md)
		if azq.ValidateMetadata(merged) == nil {
			md = merged
		}
	}
	return r.QueueRef.SetMetadata(ctx, md)
}

func (r *refMutant) AccessPolicies(ctx context.Context) ([]azq.AccessPolicy, error) {
	ps, err := r.QueueRef.AccessPolicies(ctx)
	if r.svc.name == "policiesLoseTheirTimes" {
		for i := range ps {
			ps[i].Start = time.Time{}
		}
	}
	return ps, err
}

func (r *refMutant) SetAccessPolicies(ctx context.Context, ps []azq.AccessPolicy) error {
	if r.svc.name == "policiesKeepTheFirstFive" && len(ps) > azq.MaxAccessPolicies {
		ps = ps[:azq.MaxAccessPolicies]
	}
	return r.QueueRef.SetAccessPolicies(ctx, ps)
}

const serviceMutantEnv = "QUEUETEST_SERVICE_MUTANT"

// The service suite can fail: run in a child process against each broken
// back end, it reports a failure in the subtests that check what was
// broken, and none against the wrapper with nothing broken. One child runs
// every back end, skipping the queue contract, which the wrapper leaves
// as it is.
func TestServiceSuiteCatchesBrokenBackEnds(t *testing.T) {
	wantFailing := map[string][]string{
		"unbroken":                      nil,
		"createAlwaysCreates":           {"CreateAnswersAsAzure"},
		"createIgnoresOtherMetadata":    {"CreateAnswersAsAzure"},
		"createComparesNamesExactly":    {"CreateAnswersAsAzure"},
		"invalidMetadataCreates":        {"CreateRefusesInvalidMetadata"},
		"deleteOfAMissingQueueSucceeds": {"DeleteQueue", "RefOfAMissingQueue"},
		"refBindsOnce":                  {"RefFollowsARecreatedQueue"},
		"listIgnoresMaxResults":         {"ListQueuesByPrefixInPages", "ListQueuesMarkerGoesOnByName"},
		"listIgnoresPrefix":             {"ListQueuesByPrefixInPages"},
		"listAcceptsAnyMarker":          {"ListQueuesLimits"},
		"countSkipsInvisible":           {"PropertiesCount"},
		"setMetadataMerges":             {"Metadata"},
		"policiesLoseTheirTimes":        {"AccessPolicies"},
		"policiesKeepTheFirstFive":      {"AccessPolicyLimits"},
	}
	names := slices.Sorted(maps.Keys(wantFailing))
	if os.Getenv(serviceMutantEnv) != "" {
		for _, name := range names {
			t.Run(name, func(t *testing.T) {
				queuetest.RunServiceTests(t, func(t *testing.T) azq.QueueService {
					svc := azq.NewService(azq.WithClock(clock.NewMock()))
					t.Cleanup(func() { svc.Close() })
					return &serviceMutant{Service: svc, name: name}
				})
			})
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServiceSuiteCatchesBrokenBackEnds$", "-test.skip=^TestServiceSuiteCatchesBrokenBackEnds$/./^QueueContract$",
		"-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), serviceMutantEnv+"=1")
	out, _ := cmd.CombinedOutput()
	failed := map[string][]string{} // by back end
	ran := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		for verdict, into := range map[string]map[string][]string{"--- FAIL: ": failed, "--- PASS: ": nil} {
			_, path, ok := strings.Cut(line, verdict+"TestServiceSuiteCatchesBrokenBackEnds/")
			if !ok {
				continue
			}
			path, _, _ = strings.Cut(path, " ")
			name, sub, _ := strings.Cut(path, "/")
			if sub == "" {
				ran[name] = true
			} else if into != nil {
				into[name] = append(into[name], sub)
			}
		}
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			if !ran[name] {
				t.Fatalf("the suite did not run on %s:\n%s", name, out)
			}
			want := wantFailing[name]
			if len(want) == 0 && len(failed[name]) > 0 {
				t.Fatalf("the suite failed on the unbroken wrapper: %v", failed[name])
			}
			if len(want) > 0 && len(failed[name]) == 0 {
				t.Fatalf("the suite passed on a back end where %s", name)
			}
			for _, w := range want {
				if !slices.Contains(failed[name], w) {
					t.Errorf("%s: subtest %s passed; failed: %v", name, w, failed[name])
				}
			}
		})
	}
}
