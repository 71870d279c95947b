package azq

import (
	"context"
	"slices"
)

// Properties are a queue's metadata and message count, what Azure's Get
// Queue Metadata returns.
type Properties struct {
	// Metadata are the queue's name-value pairs, names in the case they
	// were set with. The map is the caller's own copy.
	Metadata map[string]string
	// ApproximateMessagesCount is the number of messages, as
	// ApproximateCount returns it.
	ApproximateMessagesCount int
}

// Properties returns the queue's metadata and message count.
func (q *Queue) Properties(ctx context.Context) (Properties, error) {
	now := q.now()
	if err := q.lock(ctx, now); err != nil {
		return Properties{}, err
	}
	p := Properties{Metadata: cloneMetadata(q.metadata), ApproximateMessagesCount: q.count}
	q.mu.Unlock()
	return p, nil
}

// Metadata returns a copy of the queue's metadata.
func (q *Queue) Metadata(ctx context.Context) (map[string]string, error) {
	p, err := q.Properties(ctx)
	return p.Metadata, err
}

// SetMetadata replaces the queue's metadata with a copy of md; an empty md
// clears it. Invalid metadata gives ErrInvalidMetadata and changes nothing.
func (q *Queue) SetMetadata(ctx context.Context, md map[string]string) error {
	if err := ValidateMetadata(md); err != nil {
		return err
	}
	md = cloneMetadata(md)
	if err := q.lock(ctx, q.now()); err != nil {
		return err
	}
	q.metadata = md
	var lsn uint64
	if q.j != nil {
		lsn = q.j.metadata(md)
	}
	return q.unlockSynced(lsn)
}

// AccessPolicies returns a copy of the queue's stored access policies (its
// ACL).
func (q *Queue) AccessPolicies(ctx context.Context) ([]AccessPolicy, error) {
	if err := q.lock(ctx, q.now()); err != nil {
		return nil, err
	}
	ps := slices.Clone(q.policies)
	q.mu.Unlock()
	return ps, nil
}

// SetAccessPolicies replaces the queue's stored access policies. At most
// MaxAccessPolicies are allowed, with unique IDs of 1 to 64 characters and
// permissions drawn from "raup"; otherwise ErrInvalidAccessPolicy, and
// nothing changes.
func (q *Queue) SetAccessPolicies(ctx context.Context, ps []AccessPolicy) error {
	if err := validateAccessPolicies(ps); err != nil {
		return err
	}
	ps = slices.Clone(ps)
	if err := q.lock(ctx, q.now()); err != nil {
		return err
	}
	q.policies = ps
	var lsn uint64
	if q.j != nil {
		lsn = q.j.policies(ps)
	}
	return q.unlockSynced(lsn)
}

// AccessPolicy returns the stored access policy with the given ID.
func (q *Queue) AccessPolicy(ctx context.Context, id string) (AccessPolicy, bool, error) {
	if err := q.lock(ctx, q.now()); err != nil {
		return AccessPolicy{}, false, err
	}
	defer q.mu.Unlock()
	for _, p := range q.policies {
		if p.ID == id {
			return p, true, nil
		}
	}
	return AccessPolicy{}, false, nil
}
