package azq

import (
	"reflect"
	"strings"
	"testing"
)

// An access policy's ID may have 1 to 64 characters, as Azure documents
// for Set Queue ACL: characters, not bytes, so an ID of 64 characters
// that take two or three bytes each in UTF-8 is accepted, and 65 of any
// kind is refused with InvalidXmlDocument.
func TestAccessPolicyIDLengthCountsCharacters(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   string
		ok   bool
	}{
		{"one character", "p", true},
		{"64 ASCII characters", strings.Repeat("i", 64), true},
		{"64 two-byte characters", strings.Repeat("é", 64), true},
		{"64 three-byte characters", strings.Repeat("界", 64), true},
		{"63 ASCII and one two-byte character", strings.Repeat("i", 63) + "é", true},
		{"empty", "", false},
		{"65 ASCII characters", strings.Repeat("i", 65), false},
		{"65 two-byte characters", strings.Repeat("é", 65), false},
		{"65 three-byte characters", strings.Repeat("界", 65), false},
		{"64 ASCII and one two-byte character", strings.Repeat("i", 64) + "é", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := []AccessPolicy{{ID: tc.id, Permission: "r"}}
			q := New()
			defer q.Close()
			err := q.SetAccessPolicies(ctx, ps)
			if verr := ValidateAccessPolicies(ps); !reflect.DeepEqual(verr, err) {
				t.Errorf("ValidateAccessPolicies = %v, SetAccessPolicies = %v", verr, err)
			}
			if tc.ok {
				if err != nil {
					t.Fatalf("SetAccessPolicies with an ID of %d bytes: %v", len(tc.id), err)
				}
				got, err := q.AccessPolicies(ctx)
				if err != nil || len(got) != 1 || got[0].ID != tc.id {
					t.Fatalf("AccessPolicies = %+v, %v; want the policy %q", got, err, tc.id)
				}
				return
			}
			wantError(t, err, ErrInvalidAccessPolicy, CodeInvalidXMLDocument, 400)
			if got, _ := q.AccessPolicies(ctx); len(got) != 0 {
				t.Fatalf("a refused ACL was stored: %+v", got)
			}
		})
	}
}
