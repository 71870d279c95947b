package queuetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/benbjohnson/clock"
)

// RunServiceTests checks the service contract, azq.QueueService, on the
// back end that newService makes services of: one service per subtest,
// and one for the queue contract's subtests. newService should register
// the service's cleanup (Close) with t.Cleanup.
//
// The subtests check Azure's rules for a storage account's queues, as a
// client of the contract observes them: Create answers created for a new
// queue, not created for one that exists with the same metadata (names
// compared ignoring case, values exactly) and ErrQueueAlreadyExists for
// other metadata; invalid metadata gives ErrInvalidMetadata and creates
// nothing; DeleteQueue of a missing queue gives ErrQueueNotFound; a
// QueueRef follows its queue through a deletion and a new creation, where
// a receipt from before is ErrMessageNotFound; ListQueues lists by prefix
// in name order, a page of at most MaxResults at a time, continued by its
// marker (also past queues deleted meanwhile), and refuses a bad marker
// (ErrInvalidMarker) and a MaxResults outside 1 to 5000 (ErrOutOfRange);
// metadata (at most 8 KiB) and stored access policies (at most five, IDs
// of 1 to 64 characters, permissions from "raup") round-trip, replace the
// old ones, and leave them as they were when refused; Properties counts
// invisible messages; and every operation on a QueueRef of a missing queue
// gives ErrQueueNotFound, a batch on a deleted queue too. Last, the queue
// contract (RunQueueTests) runs on a QueueRef of a created queue.
//
// The subtests name their queues with a random prefix and delete them
// when they end, so the services may share one account (a real storage
// account, one database): a subtest sees only its own queues. Metadata
// names are compared ignoring case, as Azure compares them (package azure
// reports them in the case the wire gives). If the service's Clock is a
// *clock.Mock, the queue contract moves it and checks times exactly; the
// back end must then keep its time on that clock (for a client of azq's
// server, the server's clock). A back end that, as Azure does, keeps a
// deleted queue's name unusable for a while (QueueBeingDeleted) is given
// up to DeletedNameWait to free it.
func RunServiceTests(t *testing.T, newService func(t *testing.T) azq.QueueService) {
	for _, tc := range serviceTests {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(newServiceSuite(t, newService(t)))
		})
	}
	t.Run("QueueContract", func(t *testing.T) {
		// One service, a queue of its own per subtest.
		svc := newService(t)
		RunQueueTests(t, func(t *testing.T) Fixture {
			s := newServiceSuite(t, svc)
			return Fixture{Queue: s.create("queue", nil), Clock: s.mock}
		})
	})
}

// DeletedNameWait is how long RunServiceTests waits, on a back end without
// a mock clock, for a deleted queue's name to become usable again.
const DeletedNameWait = 2 * time.Minute

var serviceTests = []struct {
	name string
	run  func(s *serviceSuite)
}{
	{"RefOfAMissingQueue", testRefOfAMissingQueue},
	{"RefRefusesInvalidNames", testRefRefusesInvalidNames},
	{"CreateAnswersAsAzure", testCreateAnswersAsAzure},
	{"CreateRefusesInvalidMetadata", testCreateRefusesInvalidMetadata},
	{"DeleteQueue", testDeleteQueue},
	{"DeleteQueueRefusesInvalidNames", testDeleteQueueRefusesInvalidNames},
	{"RefFollowsARecreatedQueue", testRefFollowsARecreatedQueue},
	{"ListQueuesByPrefixInPages", testListQueuesByPrefixInPages},
	{"ListQueuesMetadata", testListQueuesMetadata},
	{"ListQueuesMarkerGoesOnByName", testListQueuesMarkerGoesOnByName},
	{"ListQueuesLimits", testListQueuesLimits},
	{"HostileNames", testHostileNames},
	{"Metadata", testMetadata},
	{"MetadataLimits", testMetadataLimits},
	{"AccessPolicies", testAccessPolicies},
	{"AccessPolicyLimits", testAccessPolicyLimits},
	{"PropertiesCount", testPropertiesCount},
	{"BatchOnADeletedQueue", testBatchOnADeletedQueue},
}

// serviceSuite is one subtest's service, with the checks the subtests
// share.
type serviceSuite struct {
	t      *testing.T
	svc    azq.QueueService
	mock   *clock.Mock // nil: the service keeps real time
	ctx    context.Context
	prefix string // of every queue name the subtest uses
}

func newServiceSuite(t *testing.T, svc azq.QueueService) *serviceSuite {
	t.Helper()
	if svc == nil {
		t.Fatal("newService returned no service")
	}
	c := svc.Clock()
	if c == nil {
		t.Fatal("the service's Clock is nil")
	}
	mock, _ := c.(*clock.Mock)
	var b [5]byte
	rand.Read(b[:])
	return &serviceSuite{t: t, svc: svc, mock: mock, ctx: context.Background(), prefix: "t" + hex.EncodeToString(b[:]) + "-"}
}

// name is the subtest's queue name for suffix.
func (s *serviceSuite) name(suffix string) string { return s.prefix + suffix }

// ref returns a QueueRef of the subtest's queue suffix.
func (s *serviceSuite) ref(suffix string) azq.QueueRef {
	s.t.Helper()
	name := s.name(suffix)
	r, err := s.svc.Ref(name)
	if err != nil {
		s.t.Fatalf("Ref(%q): %v", name, err)
	}
	if r == nil {
		s.t.Fatalf("Ref(%q) returned no QueueRef", name)
	}
	if r.Name() != name {
		s.t.Fatalf("Ref(%q).Name() = %q", name, r.Name())
	}
	return r
}

// create creates the subtest's queue suffix, which must be new, and
// deletes it when the subtest ends.
func (s *serviceSuite) create(suffix string, md map[string]string) azq.QueueRef {
	s.t.Helper()
	r := s.ref(suffix)
	s.deleteAtEnd(r.Name())
	created, err := r.Create(s.ctx, md)
	if err != nil || !created {
		s.t.Fatalf("Create of the new queue %s = %v, %v; want created", r.Name(), created, err)
	}
	return r
}

// deleteAtEnd deletes the queue name, if it exists, when the subtest ends.
func (s *serviceSuite) deleteAtEnd(name string) {
	s.t.Cleanup(func() {
		if err := s.svc.DeleteQueue(context.Background(), name); err != nil && !errors.Is(err, azq.ErrQueueNotFound) {
			s.t.Errorf("deleting queue %s: %v", name, err)
		}
	})
}

// createAgain creates the queue of r, which was deleted, waiting on a
// real service while the deleted queue's name is not usable yet.
func (s *serviceSuite) createAgain(r azq.QueueRef, md map[string]string) {
	s.t.Helper()
	deadline := time.Now().Add(DeletedNameWait)
	for {
		created, err := r.Create(s.ctx, md)
		var ae *azq.Error
		if s.mock == nil && errors.As(err, &ae) && ae.Code == azq.CodeQueueBeingDeleted && time.Now().Before(deadline) {
			time.Sleep(time.Second) // the real service's time: see DeletedNameWait
			continue
		}
		if err != nil || !created {
			s.t.Fatalf("Create of the deleted queue %s = %v, %v; want created", r.Name(), created, err)
		}
		return
	}
}

func (s *serviceSuite) wantErr(err error, sentinel error, code string, status int, what string) {
	s.t.Helper()
	wantErr(s.t, err, sentinel, code, status, what)
}

// notFound checks that err is the queue's absence.
func (s *serviceSuite) notFound(err error, what string) {
	s.t.Helper()
	s.wantErr(err, azq.ErrQueueNotFound, "QueueNotFound", 404, what)
}

// list returns one page of ListQueues.
func (s *serviceSuite) list(opts azq.ListQueuesOptions) azq.ListQueuesPage {
	s.t.Helper()
	page, err := s.svc.ListQueues(s.ctx, opts)
	if err != nil {
		s.t.Fatalf("ListQueues(%+v): %v", opts, err)
	}
	return page
}

// listAll lists every page of opts, checking that no page has more than
// opts.MaxResults queues, and returns the queues and the number of pages.
func (s *serviceSuite) listAll(opts azq.ListQueuesOptions) ([]azq.QueueItem, int) {
	s.t.Helper()
	var all []azq.QueueItem
	for pages := 1; ; pages++ {
		page := s.list(opts)
		if opts.MaxResults > 0 && len(page.Queues) > opts.MaxResults {
			s.t.Fatalf("ListQueues(%+v) returned %d queues", opts, len(page.Queues))
		}
		all = append(all, page.Queues...)
		if page.NextMarker == "" {
			return all, pages
		}
		if page.NextMarker == opts.Marker || pages > 100 {
			s.t.Fatalf("ListQueues(%+v) does not end: page %d, marker %q", opts, pages, page.NextMarker)
		}
		opts.Marker = page.NextMarker
	}
}

// names returns the subtest's queues whose names start with the suffix
// prefix, in the order ListQueues gives them.
func (s *serviceSuite) names(prefix string) []string {
	s.t.Helper()
	items, _ := s.listAll(azq.ListQueuesOptions{Prefix: s.name(prefix)})
	return itemNames(items)
}

func itemNames(items []azq.QueueItem) []string {
	names := make([]string, len(items))
	for i, it := range items {
		names[i] = it.Name
	}
	return names
}

// wantNames checks a listing against the subtest's queues suffixes.
func (s *serviceSuite) wantNames(got []string, suffixes ...string) {
	s.t.Helper()
	want := make([]string, len(suffixes))
	for i, x := range suffixes {
		want[i] = s.name(x)
	}
	if !slices.Equal(got, want) {
		s.t.Fatalf("listed %q, want %q", got, want)
	}
}

// properties returns the queue's properties.
func (s *serviceSuite) properties(r azq.QueueRef) azq.Properties {
	s.t.Helper()
	p, err := r.Properties(s.ctx)
	if err != nil {
		s.t.Fatalf("Properties of %s: %v", r.Name(), err)
	}
	return p
}

// metadata checks the queue's metadata, names ignoring case.
func (s *serviceSuite) metadata(r azq.QueueRef, want map[string]string) {
	s.t.Helper()
	if got := s.properties(r).Metadata; !sameMetadataFold(got, want) {
		s.t.Fatalf("metadata of %s = %v, want %v", r.Name(), got, want)
	}
}

// count checks the queue's message count through Properties and
// ApproximateCount: exactly n on a mock clock, at least n otherwise.
func (s *serviceSuite) count(r azq.QueueRef, n int) {
	s.t.Helper()
	p := s.properties(r)
	c, err := r.ApproximateCount(s.ctx)
	if err != nil {
		s.t.Fatalf("ApproximateCount of %s: %v", r.Name(), err)
	}
	for _, got := range []int{p.ApproximateMessagesCount, c} {
		if got < n || s.mock != nil && got != n {
			s.t.Fatalf("count of %s: Properties %d, ApproximateCount %d; want %d", r.Name(), p.ApproximateMessagesCount, c, n)
		}
	}
}

// policies checks the queue's stored access policies, in any order.
func (s *serviceSuite) policies(r azq.QueueRef, want []azq.AccessPolicy) {
	s.t.Helper()
	got, err := r.AccessPolicies(s.ctx)
	if err != nil {
		s.t.Fatalf("AccessPolicies of %s: %v", r.Name(), err)
	}
	if !samePolicies(got, want) {
		s.t.Fatalf("access policies of %s =\n%v\nwant\n%v", r.Name(), got, want)
	}
}

func (s *serviceSuite) setPolicies(r azq.QueueRef, ps []azq.AccessPolicy) {
	s.t.Helper()
	if err := r.SetAccessPolicies(s.ctx, ps); err != nil {
		s.t.Fatalf("SetAccessPolicies of %s (%d policies): %v", r.Name(), len(ps), err)
	}
}

func (s *serviceSuite) setMetadata(r azq.QueueRef, md map[string]string) {
	s.t.Helper()
	if err := r.SetMetadata(s.ctx, md); err != nil {
		s.t.Fatalf("SetMetadata of %s: %v", r.Name(), err)
	}
}

func (s *serviceSuite) put(r azq.QueueRef, content string, opts *azq.PutOptions) azq.Message {
	s.t.Helper()
	m, err := r.Put(s.ctx, content, opts)
	if err != nil {
		s.t.Fatalf("Put on %s: %v", r.Name(), err)
	}
	return m
}

func (s *serviceSuite) get(r azq.QueueRef, n int) []azq.Message {
	s.t.Helper()
	ms, err := r.Get(s.ctx, n, time.Hour)
	if err != nil {
		s.t.Fatalf("Get on %s: %v", r.Name(), err)
	}
	return ms
}

// sameMetadataFold compares metadata as Azure does, names ignoring case
// and values exactly; nil and empty are the same.
func sameMetadataFold(got, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		found := false
		for gk, gv := range got {
			if strings.EqualFold(k, gk) {
				if gv != v {
					return false
				}
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// samePolicies compares stored access policies in any order, times as
// instants.
func samePolicies(got, want []azq.AccessPolicy) bool {
	if len(got) != len(want) {
		return false
	}
	byID := make(map[string]azq.AccessPolicy, len(want))
	for _, p := range want {
		byID[p.ID] = p
	}
	for _, g := range got {
		w, ok := byID[g.ID]
		if !ok || g.Permission != w.Permission || !g.Start.Equal(w.Start) || !g.Expiry.Equal(w.Expiry) {
			return false
		}
		delete(byID, g.ID)
	}
	return true
}

// invalidMetadata are metadata that break Azure's rules, with the code
// Azure answers (empty where only the sentinel is checked).
var invalidMetadata = []struct {
	what string
	md   map[string]string
	code string
}{
	{"an empty name", map[string]string{"": "v"}, "EmptyMetadataKey"},
	{"a name starting with a digit", map[string]string{"1st": "v"}, "InvalidMetadata"},
	{"a name with a hyphen", map[string]string{"first-name": "v"}, "InvalidMetadata"},
	{"names differing only in case", map[string]string{"team": "a", "Team": "b"}, ""},
	{"names and values of 8 KiB + 1 byte", map[string]string{"big": strings.Repeat("x", azq.MaxMetadataSize-2)}, "MetadataTooLarge"},
}

// largestMetadata is as much metadata as a queue may carry, 8 KiB.
var largestMetadata = map[string]string{"big": strings.Repeat("x", azq.MaxMetadataSize-3)}

// policyTime is a whole second, as the wire carries policy times.
var policyTime = time.Date(2031, time.March, 4, 5, 6, 7, 0, time.UTC)

// fivePolicies are as many stored access policies as a queue may have,
// using every field and none.
var fivePolicies = []azq.AccessPolicy{
	{ID: "read-only", Start: policyTime, Expiry: policyTime.Add(time.Hour), Permission: "r"},
	{ID: "everything", Start: policyTime, Expiry: policyTime.Add(24 * time.Hour), Permission: "raup"},
	{ID: strings.Repeat("i", 64), Expiry: policyTime, Permission: "ap"},
	{ID: "start-only", Start: policyTime},
	{ID: "bare"},
}

// invalidPolicies are sets of stored access policies Azure refuses.
var invalidPolicies = []struct {
	what string
	ps   []azq.AccessPolicy
}{
	{"six policies", []azq.AccessPolicy{{ID: "p1"}, {ID: "p2"}, {ID: "p3"}, {ID: "p4"}, {ID: "p5"}, {ID: "p6"}}},
	{"an empty ID", []azq.AccessPolicy{{ID: "", Permission: "r"}}},
	{"an ID of 65 characters", []azq.AccessPolicy{{ID: strings.Repeat("i", 65), Permission: "r"}}},
	{"an ID of 65 two-byte characters", []azq.AccessPolicy{{ID: strings.Repeat("é", 65), Permission: "r"}}},
	{"two policies with one ID", []azq.AccessPolicy{{ID: "twice", Permission: "r"}, {ID: "twice", Permission: "a"}}},
	{"a permission outside raup", []azq.AccessPolicy{{ID: "write", Permission: "rw"}}},
}

func testRefOfAMissingQueue(s *serviceSuite) {
	other := s.create("other", nil)
	m := s.put(other, "kept", nil)
	r := s.ref("missing")
	ctx := s.ctx
	_, err := r.Put(ctx, "x", nil)
	s.notFound(err, "Put")
	_, err = r.Get(ctx, 1, time.Minute)
	s.notFound(err, "Get")
	_, err = r.Peek(ctx, 1)
	s.notFound(err, "Peek")
	// A receipt of another queue's message reaches nothing here.
	_, err = r.Update(ctx, m.ID, m.PopReceipt, 0, nil)
	s.notFound(err, "Update")
	s.notFound(r.Delete(ctx, m.ID, m.PopReceipt), "Delete")
	s.notFound(r.Clear(ctx), "Clear")
	_, err = r.ApproximateCount(ctx)
	s.notFound(err, "ApproximateCount")
	_, err = r.Properties(ctx)
	s.notFound(err, "Properties")
	s.notFound(r.SetMetadata(ctx, map[string]string{"team": "blue"}), "SetMetadata")
	_, err = r.AccessPolicies(ctx)
	s.notFound(err, "AccessPolicies")
	s.notFound(r.SetAccessPolicies(ctx, fivePolicies[:1]), "SetAccessPolicies")
	s.notFound(s.svc.DeleteQueue(ctx, r.Name()), "DeleteQueue")
	// None of that created the queue, or touched the other one.
	s.wantNames(s.names(""), "other")
	if err := other.Delete(ctx, m.ID, m.PopReceipt); err != nil {
		s.t.Fatalf("Delete on the other queue: %v", err)
	}
}

func testRefRefusesInvalidNames(s *serviceSuite) {
	for _, name := range []string{"", "ab", strings.Repeat("a", 64), "Upper", "under_score", "-lead", "trail-", "dou--ble", "sp ace", "slash/name", "ünï"} {
		_, err := s.svc.Ref(name)
		s.wantErr(err, azq.ErrInvalidQueueName, "", 0, fmt.Sprintf("Ref(%q)", name))
	}
	for _, name := range []string{"abc", strings.Repeat("a", 63), "a-b-c", "0123"} {
		r, err := s.svc.Ref(name)
		if err != nil || r.Name() != name {
			s.t.Fatalf("Ref(%q) = %v, %v; want a QueueRef of it", name, r, err)
		}
	}
}

func testCreateAnswersAsAzure(s *serviceSuite) {
	ctx := s.ctx
	r := s.create("plain", nil)
	for _, md := range []map[string]string{nil, {}} {
		if created, err := r.Create(ctx, md); err != nil || created {
			s.t.Fatalf("Create(%v) of the existing queue without metadata = %v, %v; want not created (204)", md, created, err)
		}
	}
	m := s.put(r, "kept", nil)
	if created, err := r.Create(ctx, nil); err != nil || created {
		s.t.Fatalf("Create of the existing queue = %v, %v; want not created", created, err)
	}
	_, err := r.Create(ctx, map[string]string{"team": "blue"})
	s.wantErr(err, azq.ErrQueueAlreadyExists, "QueueAlreadyExists", 409, "Create with metadata of a queue without")
	// The queue and its message are as they were.
	s.count(r, 1)
	s.metadata(r, nil)
	if err := r.Delete(ctx, m.ID, m.PopReceipt); err != nil {
		s.t.Fatalf("Delete with Put's receipt after Creates: %v", err)
	}

	md := map[string]string{"team": "blue", "Owner": "ops"}
	r2 := s.create("with-metadata", md)
	s.metadata(r2, md)
	if created, err := r2.Create(ctx, map[string]string{"TEAM": "blue", "owner": "ops"}); err != nil || created {
		s.t.Fatalf("Create with the same metadata, names in another case = %v, %v; want not created", created, err)
	}
	for _, other := range []map[string]string{
		{"team": "Blue", "Owner": "ops"},
		{"team": "blue"},
		{"team": "blue", "Owner": "ops", "extra": "1"},
		{"team": "blue", "Owner": "Ops"},
		nil,
	} {
		_, err := r2.Create(ctx, other)
		s.wantErr(err, azq.ErrQueueAlreadyExists, "QueueAlreadyExists", 409, fmt.Sprintf("Create with metadata %v of a queue with %v", other, md))
	}
	_, err = r2.Create(ctx, map[string]string{"": "v"})
	s.wantErr(err, azq.ErrInvalidMetadata, "", 0, "Create with invalid metadata of an existing queue")
	s.metadata(r2, md)
}

func testCreateRefusesInvalidMetadata(s *serviceSuite) {
	for i, c := range invalidMetadata {
		r := s.ref(fmt.Sprintf("bad-%d", i))
		s.deleteAtEnd(r.Name())
		created, err := r.Create(s.ctx, c.md)
		if created {
			s.t.Fatalf("Create with %s: created", c.what)
		}
		s.wantErr(err, azq.ErrInvalidMetadata, c.code, 400, "Create with "+c.what)
		_, err = r.Properties(s.ctx)
		s.notFound(err, "Properties after Create with "+c.what)
	}
	s.wantNames(s.names(""))
	s.create("largest", largestMetadata)
}

func testDeleteQueue(s *serviceSuite) {
	ctx := s.ctx
	s.notFound(s.svc.DeleteQueue(ctx, s.name("never")), "DeleteQueue of a queue never created")
	keep := s.create("keep", nil)
	r := s.create("doomed", map[string]string{"team": "blue"})
	s.setPolicies(r, fivePolicies[:1])
	s.put(r, "a", nil)
	s.put(r, "b", nil)
	s.put(keep, "k", nil)
	if err := s.svc.DeleteQueue(ctx, r.Name()); err != nil {
		s.t.Fatalf("DeleteQueue: %v", err)
	}
	_, err := r.Put(ctx, "x", nil)
	s.notFound(err, "Put on a deleted queue")
	_, err = r.Properties(ctx)
	s.notFound(err, "Properties of a deleted queue")
	s.notFound(s.svc.DeleteQueue(ctx, r.Name()), "DeleteQueue of a deleted queue")
	s.wantNames(s.names(""), "keep")
	s.count(keep, 1)

	// A new queue of the name starts empty, without the old one's
	// metadata or policies.
	s.createAgain(r, nil)
	s.count(r, 0)
	s.metadata(r, nil)
	s.policies(r, nil)
	s.wantNames(s.names(""), "doomed", "keep")
}

// DeleteQueue of a name that breaks Azure's rules is refused as Azure
// refuses every request on such a queue: 400 OutOfRangeInput for a name
// of the wrong length, 400 InvalidResourceName for one of the wrong
// characters (both match azq.ErrInvalidQueueName), not 404 QueueNotFound.
func testDeleteQueueRefusesInvalidNames(s *serviceSuite) {
	keep := s.create("keep", nil)
	for _, c := range []struct{ name, code string }{
		{"", "OutOfRangeInput"},
		{"ab", "OutOfRangeInput"},
		{strings.Repeat("a", 64), "OutOfRangeInput"},
		{"Upper", "InvalidResourceName"},
		{"under_score", "InvalidResourceName"},
		{"-lead", "InvalidResourceName"},
		{"trail-", "InvalidResourceName"},
		{"dou--ble", "InvalidResourceName"},
		{"sp ace", "InvalidResourceName"},
		{"slash/name", "InvalidResourceName"},
		{"ünï", "InvalidResourceName"},
		{strings.ToUpper(keep.Name()), "InvalidResourceName"},
	} {
		err := s.svc.DeleteQueue(s.ctx, c.name)
		s.wantErr(err, azq.ErrInvalidQueueName, c.code, 400, fmt.Sprintf("DeleteQueue(%q)", c.name))
	}
	s.wantNames(s.names(""), "keep")
}

func testRefFollowsARecreatedQueue(s *serviceSuite) {
	ctx := s.ctx
	r := s.create("jobs", nil)
	s.put(r, "old", nil)
	old := s.get(r, 1)
	if len(old) != 1 {
		s.t.Fatalf("Get returned %d messages", len(old))
	}
	if err := s.svc.DeleteQueue(ctx, r.Name()); err != nil {
		s.t.Fatalf("DeleteQueue: %v", err)
	}
	s.createAgain(r, map[string]string{"generation": "2"})
	// The QueueRef made before the deletion addresses the new queue.
	s.metadata(r, map[string]string{"generation": "2"})
	_, err := r.Update(ctx, old[0].ID, old[0].PopReceipt, 0, nil)
	s.wantErr(err, azq.ErrMessageNotFound, "MessageNotFound", 404, "Update with a receipt of the deleted queue")
	err = r.Delete(ctx, old[0].ID, old[0].PopReceipt)
	s.wantErr(err, azq.ErrMessageNotFound, "MessageNotFound", 404, "Delete with a receipt of the deleted queue")
	m := s.put(r, "new", nil)
	// So does a QueueRef made afterwards.
	ms := s.get(s.ref("jobs"), 32)
	if len(ms) != 1 || ms[0].ID != m.ID || ms[0].Content != "new" || ms[0].DequeueCount != 1 {
		s.t.Fatalf("Get through a new QueueRef returned %+v, want only the new message", ms)
	}
	if err := r.Delete(ctx, ms[0].ID, ms[0].PopReceipt); err != nil {
		s.t.Fatalf("Delete through the old QueueRef: %v", err)
	}
	s.count(r, 0)
}

func testListQueuesByPrefixInPages(s *serviceSuite) {
	// Created out of order: the listing is in name order.
	for _, x := range []string{"a3", "b1", "a1", "a5", "a2", "a4"} {
		s.create(x, nil)
	}
	s.wantNames(s.names(""), "a1", "a2", "a3", "a4", "a5", "b1")
	s.wantNames(s.names("a"), "a1", "a2", "a3", "a4", "a5")
	s.wantNames(s.names("b"), "b1")
	s.wantNames(s.names("a3"), "a3")
	s.wantNames(s.names("c"))
	page := s.list(azq.ListQueuesOptions{Prefix: s.name("c")})
	if len(page.Queues) != 0 || page.NextMarker != "" {
		s.t.Fatalf("ListQueues of a prefix no queue has = %+v", page)
	}
	for _, max := range []int{1, 2, 5, 6, 5000} {
		items, pages := s.listAll(azq.ListQueuesOptions{Prefix: s.name(""), MaxResults: max})
		s.wantNames(itemNames(items), "a1", "a2", "a3", "a4", "a5", "b1")
		if max < 6 && pages < 2 {
			s.t.Fatalf("ListQueues of 6 queues with MaxResults %d returned them in one page", max)
		}
	}
}

func testListQueuesMetadata(s *serviceSuite) {
	md := map[string]string{"team": "blue", "Env": "dev"}
	s.create("a", md)
	s.create("b", nil)
	items, _ := s.listAll(azq.ListQueuesOptions{Prefix: s.name(""), IncludeMetadata: true})
	s.wantNames(itemNames(items), "a", "b")
	if !sameMetadataFold(items[0].Metadata, md) || len(items[1].Metadata) != 0 {
		s.t.Fatalf("ListQueues with metadata: %v and %v, want %v and none", items[0].Metadata, items[1].Metadata, md)
	}
	items, _ = s.listAll(azq.ListQueuesOptions{Prefix: s.name("")})
	for _, it := range items {
		if it.Metadata != nil {
			s.t.Fatalf("ListQueues without IncludeMetadata returned metadata %v of %s", it.Metadata, it.Name)
		}
	}
}

func testListQueuesMarkerGoesOnByName(s *serviceSuite) {
	for _, x := range []string{"a1", "a2", "a3", "a4", "a5"} {
		s.create(x, nil)
	}
	first := s.list(azq.ListQueuesOptions{Prefix: s.name(""), MaxResults: 2})
	s.wantNames(itemNames(first.Queues), "a1", "a2")
	if first.NextMarker == "" {
		s.t.Fatal("ListQueues of 5 queues with MaxResults 2 returned no marker")
	}
	// Between the pages, the queue the next page would start with is
	// deleted, one is created after it and one before the first page's
	// end: the listing goes on from the name where the page ended.
	if err := s.svc.DeleteQueue(s.ctx, s.name("a3")); err != nil {
		s.t.Fatalf("DeleteQueue: %v", err)
	}
	s.create("a0", nil)
	s.create("a3b", nil)
	rest, _ := s.listAll(azq.ListQueuesOptions{Prefix: s.name(""), Marker: first.NextMarker, MaxResults: 2})
	s.wantNames(itemNames(rest), "a3b", "a4", "a5")
	// The same marker may be used again.
	again, _ := s.listAll(azq.ListQueuesOptions{Prefix: s.name(""), Marker: first.NextMarker})
	s.wantNames(itemNames(again), "a3b", "a4", "a5")
}

func testListQueuesLimits(s *serviceSuite) {
	s.create("a", nil)
	for _, max := range []int{-1, 5001} {
		_, err := s.svc.ListQueues(s.ctx, azq.ListQueuesOptions{MaxResults: max})
		s.wantErr(err, azq.ErrOutOfRange, "OutOfRangeQueryParameterValue", 400, fmt.Sprintf("ListQueues with MaxResults %d", max))
	}
	for _, m := range []string{"bogus-marker", "not a marker!"} {
		_, err := s.svc.ListQueues(s.ctx, azq.ListQueuesOptions{Prefix: s.name(""), Marker: m})
		s.wantErr(err, azq.ErrInvalidMarker, "InvalidMarker", 400, fmt.Sprintf("ListQueues with marker %q", m))
	}
	items, _ := s.listAll(azq.ListQueuesOptions{Prefix: s.name(""), MaxResults: 5000})
	s.wantNames(itemNames(items), "a")
}

func testMetadata(s *serviceSuite) {
	r := s.create("q", map[string]string{"team": "blue"})
	s.metadata(r, map[string]string{"team": "blue"})
	md := map[string]string{"Env": "dev", "owner": "a value, with: punctuation; and = signs", "n_2": "2"}
	s.setMetadata(r, md)
	s.metadata(r, md)
	// SetMetadata replaces the whole set.
	s.setMetadata(r, map[string]string{"x": "1"})
	s.metadata(r, map[string]string{"x": "1"})
	s.setMetadata(r, largestMetadata)
	s.metadata(r, largestMetadata)
	// An empty set clears it.
	s.setMetadata(r, nil)
	s.metadata(r, nil)
	s.setMetadata(r, map[string]string{"y": "2"})
	s.setMetadata(r, map[string]string{})
	s.metadata(r, nil)
	// Metadata and messages do not touch one another.
	s.setMetadata(r, md)
	m := s.put(r, "m", nil)
	s.count(r, 1)
	s.metadata(r, md)
	if err := r.Delete(s.ctx, m.ID, m.PopReceipt); err != nil {
		s.t.Fatalf("Delete after SetMetadata: %v", err)
	}
}

func testMetadataLimits(s *serviceSuite) {
	md := map[string]string{"team": "blue"}
	r := s.create("q", md)
	for _, c := range invalidMetadata {
		err := r.SetMetadata(s.ctx, c.md)
		s.wantErr(err, azq.ErrInvalidMetadata, c.code, 400, "SetMetadata with "+c.what)
		s.metadata(r, md)
	}
}

func testAccessPolicies(s *serviceSuite) {
	r := s.create("q", nil)
	s.policies(r, nil)
	s.setPolicies(r, fivePolicies)
	s.policies(r, fivePolicies)
	// SetAccessPolicies replaces the whole set.
	s.setPolicies(r, fivePolicies[1:2])
	s.policies(r, fivePolicies[1:2])
	changed := fivePolicies[1]
	changed.Permission, changed.Expiry = "rp", changed.Expiry.Add(time.Hour)
	s.setPolicies(r, []azq.AccessPolicy{changed})
	s.policies(r, []azq.AccessPolicy{changed})
	// An empty set clears it.
	s.setPolicies(r, nil)
	s.policies(r, nil)
	s.setPolicies(r, fivePolicies[:2])
	s.setPolicies(r, []azq.AccessPolicy{})
	s.policies(r, nil)
	// The policies are the queue's own.
	s.setPolicies(r, fivePolicies[:2])
	other := s.create("other", nil)
	s.policies(other, nil)
	s.policies(r, fivePolicies[:2])
}

func testAccessPolicyLimits(s *serviceSuite) {
	r := s.create("q", nil)
	s.setPolicies(r, fivePolicies[:2])
	for _, c := range invalidPolicies {
		err := r.SetAccessPolicies(s.ctx, c.ps)
		s.wantErr(err, azq.ErrInvalidAccessPolicy, "InvalidXmlDocument", 400, "SetAccessPolicies with "+c.what)
		s.policies(r, fivePolicies[:2])
	}
	// An ID's 64 are characters, not bytes of UTF-8.
	wide := []azq.AccessPolicy{
		{ID: strings.Repeat("é", 64), Permission: "r"},
		{ID: strings.Repeat("界", 64), Permission: "a"},
	}
	s.setPolicies(r, wide)
	s.policies(r, wide)
}

func testPropertiesCount(s *serviceSuite) {
	r := s.create("q", map[string]string{"team": "blue"})
	s.count(r, 0)
	s.put(r, "a", nil)
	s.put(r, "b", &azq.PutOptions{VisibilityTimeout: time.Hour})
	s.put(r, "c", nil)
	got := s.get(r, 1)
	if len(got) != 1 {
		s.t.Fatalf("Get returned %d messages", len(got))
	}
	// Invisible messages count: one leased, one delayed.
	s.count(r, 3)
	if _, err := r.Peek(s.ctx, 32); err != nil {
		s.t.Fatalf("Peek: %v", err)
	}
	s.count(r, 3)
	if err := r.Delete(s.ctx, got[0].ID, got[0].PopReceipt); err != nil {
		s.t.Fatalf("Delete: %v", err)
	}
	s.count(r, 2)
	p := s.properties(r)
	if !sameMetadataFold(p.Metadata, map[string]string{"team": "blue"}) {
		s.t.Fatalf("Properties metadata = %v", p.Metadata)
	}
	if err := r.Clear(s.ctx); err != nil {
		s.t.Fatalf("Clear: %v", err)
	}
	s.count(r, 0)
	// Properties hands out a copy.
	for k := range p.Metadata {
		p.Metadata[k] = "red"
	}
	s.metadata(r, map[string]string{"team": "blue"})
}

// testHostileNames: a name or prefix with NUL or invalid UTF-8, which
// the REST server passes on as a client sent it, is answered as any
// other that matches no queue: an invalid name for Ref and DeleteQueue,
// an empty page for a prefix, never a failure of the back end (a
// database's text columns refuse such strings).
func testHostileNames(s *serviceSuite) {
	s.create("hostile", nil)
	hostile := []string{"\x00", s.name("hostile") + "\x00", s.name("\x00"), "\xff", s.name("hostile") + "\xff", s.name("\xc3"), "\xed\xa0\x80"}
	for _, h := range hostile {
		_, err := s.svc.Ref(h)
		s.wantErr(err, azq.ErrInvalidQueueName, "", 0, fmt.Sprintf("Ref(%q)", h))
		err = s.svc.DeleteQueue(s.ctx, h)
		s.wantErr(err, azq.ErrInvalidQueueName, "", 0, fmt.Sprintf("DeleteQueue(%q)", h))
		for _, opts := range []azq.ListQueuesOptions{{Prefix: h}, {Prefix: h, IncludeMetadata: true, MaxResults: 1}} {
			page, err := s.svc.ListQueues(s.ctx, opts)
			if err != nil || len(page.Queues) != 0 || page.NextMarker != "" {
				s.t.Errorf("ListQueues(prefix %q, %+v) = %+v, %v; want an empty page", opts.Prefix, opts, page, err)
			}
		}
	}
	// The queue is as it was.
	s.wantNames(s.names("hostile"), "hostile")
}
