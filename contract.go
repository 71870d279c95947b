package azq

import (
	"context"
	"time"

	"github.com/benbjohnson/clock"
)

// MessageQueue is the queue contract: everything a client can observe of
// one Azure-style queue, and the seam between code that uses a queue and
// the back end that keeps it. *Queue satisfies it in memory; package
// azure satisfies it over Azure Queue Storage (or azq's own REST server),
// so producers, consumers such as package worker, and their tests can be
// written once against MessageQueue and run on either back end.
//
// Every back end keeps the semantics documented on Queue's methods, as a
// client can observe them: a receipt dies when the message is dequeued
// again, updated or deleted, and not when its visibility timeout lapses;
// the receipt Put returns is valid until the first Get; DequeueCount
// counts Gets only; Peek changes nothing. Package azqtest checks a back
// end against this contract. Errors match this package's sentinels with
// errors.Is whichever back end returned them.
//
// Back ends differ where Azure is approximate or coarse: a remote
// service's ApproximateCount may exceed the true count for a while, and
// its times and durations are whole seconds (package azure rounds a
// duration up to the next second).
type MessageQueue interface {
	// Put adds a message and returns it with its ID, times and a pop
	// receipt that can Update or Delete it until its first Get.
	Put(ctx context.Context, content string, opts *PutOptions) (Message, error)
	// Get takes up to n (1 to 32) visible messages and hides them for
	// the visibility timeout, each with a fresh pop receipt and its
	// DequeueCount increased by one. It returns an empty slice, not an
	// error, when nothing is visible.
	Get(ctx context.Context, n int, visibility time.Duration) ([]Message, error)
	// Peek returns up to n (1 to 32) visible messages without a receipt
	// and without changing anything.
	Peek(ctx context.Context, n int) ([]Message, error)
	// Update makes the message id visible again after visibility and,
	// unless content is nil, replaces its content. It needs the current
	// receipt and returns the new one, which replaces it.
	Update(ctx context.Context, id MessageID, receipt PopReceipt, visibility time.Duration, content *string) (UpdateResult, error)
	// Delete removes the message id; it needs the current receipt.
	Delete(ctx context.Context, id MessageID, receipt PopReceipt) error
	// Clear deletes every message, visible or not.
	Clear(ctx context.Context) error
	// ApproximateCount returns the number of messages, visible or not;
	// never fewer than there are.
	ApproximateCount(ctx context.Context) (int, error)
}

// QueueOpener is implemented by a queue that can open other queues of
// the same account: a *Queue and a NamedQueue of a Service open queues of
// that Service, and a remote back end's queue (an *azure.Queue, a
// PostgreSQL queue) of its account. OpenQueue returns the queue name next
// to the receiver, creating it if it does not exist (an existing queue is
// opened whatever its metadata). A queue that belongs to no account, as a
// *Queue made by New, answers an error that matches errors.ErrUnsupported.
//
// Package worker uses it to open a source's poison queue
// ("<queue>-poison") in the source's own account, as the Azure Functions
// queue trigger does.
type QueueOpener interface {
	OpenQueue(ctx context.Context, name string) (MessageQueue, error)
}

// Queue is the in-memory back end of the contract, and opens the queues
// of its Service.
var (
	_ MessageQueue = (*Queue)(nil)
	_ QueueOpener  = (*Queue)(nil)
)

// QueueService is the service contract: the named queues of one storage
// account, as a back end keeps them. *Service keeps them in memory or on
// disk; package azure keeps them on Azure Queue Storage (or any server of
// its REST API); other back ends keep them elsewhere. azq's REST server,
// its metrics and web page, the worker's poison queues and the messaging
// drivers take a QueueService, so they run unchanged on any back end.
//
// Every back end keeps Azure's rules for names, metadata and access
// policies, and reports errors that match this package's sentinels with
// errors.Is. Package azqtest checks a back end against this contract.
//
// A back end that can read its queues' figures without touching their
// messages also implements QueueStatsReader, which monitors such as
// package metrics look for with a type assertion.
type QueueService interface {
	// Ref returns the queue name of the service, without a request: the
	// queue need not exist, and until it does every operation on the
	// QueueRef but Create gives ErrQueueNotFound. Each operation addresses
	// the queue the name stands for when it runs, so a queue deleted and
	// created again is followed. A name that breaks Azure's naming rules
	// gives ErrInvalidQueueName.
	Ref(name string) (QueueRef, error)
	// ListQueues returns one page of the service's queues in name order.
	// NextMarker is opaque: it continues the listing only on the back end
	// that returned it, from the name where the page ended, with the
	// queues as they are when the next page is read. A MaxResults outside
	// 1 to 5000 gives ErrOutOfRange (zero means 5000), and a marker the
	// back end did not return gives ErrInvalidMarker.
	ListQueues(ctx context.Context, opts ListQueuesOptions) (ListQueuesPage, error)
	// DeleteQueue deletes the queue name and its messages; a queue that
	// does not exist gives ErrQueueNotFound, and a name that breaks
	// Azure's rules ErrInvalidQueueName (OutOfRangeInput or
	// InvalidResourceName, 400), as Azure answers.
	DeleteQueue(ctx context.Context, name string) error
	// Clock returns the clock the service's queues report times on.
	Clock() clock.Clock
	// Close releases what the service holds (files, connections). What
	// Close does to the queues themselves is the back end's: an in-memory
	// service forgets them, the others keep them.
	Close() error
}

// QueueRef is a queue of a QueueService addressed by its name, as a client
// of Azure's REST API addresses one in every request: the queue contract,
// and the management of the queue itself (its creation, metadata and
// stored access policies).
type QueueRef interface {
	MessageQueue
	// Name returns the queue's name.
	Name() string
	// Create creates the queue with metadata (nil for none). If the queue
	// exists with the same metadata, Create returns created false and no
	// error; with other metadata it gives ErrQueueAlreadyExists. Invalid
	// metadata gives ErrInvalidMetadata and creates nothing.
	Create(ctx context.Context, metadata map[string]string) (created bool, err error)
	// Properties returns the queue's metadata and its approximate message
	// count.
	Properties(ctx context.Context) (Properties, error)
	// SetMetadata replaces the queue's metadata; an empty md clears it.
	SetMetadata(ctx context.Context, md map[string]string) error
	// AccessPolicies returns the queue's stored access policies (its ACL).
	AccessPolicies(ctx context.Context) ([]AccessPolicy, error)
	// SetAccessPolicies replaces the queue's stored access policies.
	SetAccessPolicies(ctx context.Context, ps []AccessPolicy) error
}
