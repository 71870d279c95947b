package azq

import (
	"strings"
	"time"
	"unicode/utf8"
)

// MaxAccessPolicies is the number of stored access policies Azure allows on
// one queue.
const MaxAccessPolicies = 5

// maxAccessPolicyID is the most characters (not bytes: Unicode code points)
// an access policy's ID may have.
const maxAccessPolicyID = 64

// AccessPolicy is a stored access policy of a queue (a signed identifier in
// Azure's Get/Set Queue ACL). A service SAS that names the policy by ID takes
// its start, expiry and permissions from it, so changing or removing the
// policy revokes such tokens.
type AccessPolicy struct {
	// ID names the policy; 1 to 64 characters (counted as Unicode code
	// points, not as bytes of UTF-8).
	ID string
	// Start is when the policy becomes valid; zero means "not set".
	Start time.Time
	// Expiry is when the policy stops being valid; zero means "not set".
	Expiry time.Time
	// Permission is a subset of "raup": read (peek, metadata), add (put),
	// update, process (get and delete). Empty means "not set".
	Permission string
}

// validateAccessPolicies checks a whole ACL as Set Queue ACL receives it.
func validateAccessPolicies(ps []AccessPolicy) error {
	if len(ps) > MaxAccessPolicies {
		return newError(ErrInvalidAccessPolicy, "", "at most 5 stored access policies are allowed on a queue")
	}
	for i, p := range ps {
		// A character takes at least one byte: only an ID of more than
		// 64 bytes needs counting.
		if p.ID == "" || len(p.ID) > maxAccessPolicyID && utf8.RuneCountInString(p.ID) > maxAccessPolicyID {
			return newError(ErrInvalidAccessPolicy, "", "a stored access policy ID must have 1 to 64 characters")
		}
		for j := 0; j < i; j++ {
			if ps[j].ID == p.ID {
				return newError(ErrInvalidAccessPolicy, "", "stored access policy IDs must be unique: "+p.ID)
			}
		}
		for _, c := range p.Permission {
			if !strings.ContainsRune("raup", c) {
				return newError(ErrInvalidAccessPolicy, "", "a stored access policy permission may contain only r, a, u and p")
			}
		}
	}
	return nil
}

// ValidateAccessPolicies checks a queue's stored access policies as
// Queue.SetAccessPolicies does: at most MaxAccessPolicies, with unique IDs
// of 1 to 64 characters and permissions drawn from "raup"; otherwise
// ErrInvalidAccessPolicy.
func ValidateAccessPolicies(ps []AccessPolicy) error { return validateAccessPolicies(ps) }
