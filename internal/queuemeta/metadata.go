// Package queuemeta holds what azq's back ends share about a queue's
// metadata beyond its validation (azq.ValidateMetadata): how Azure
// compares two sets of it.
package queuemeta

import "strings"

// Equal reports whether a and b are the same metadata as Azure compares
// them when a queue is created again: the same names, ignoring case, with
// the same values, exactly. Nil and empty are equal.
func Equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		found := false
		for k2, v2 := range b {
			if strings.EqualFold(k, k2) {
				if v != v2 {
					return false
				}
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
