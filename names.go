package azq

import (
	"strconv"
	"strings"
)

// MaxMetadataSize is the most bytes of metadata names and values a queue
// may carry, Azure's 8 KiB.
const MaxMetadataSize = 8 << 10

// ValidateQueueName checks name against Azure's rules: 3 to 63 characters
// (else OutOfRangeInput); lower-case letters, digits and single hyphens,
// starting and ending with a letter or digit (else InvalidResourceName).
// Both errors match ErrInvalidQueueName.
func ValidateQueueName(name string) error {
	if len(name) < 3 || len(name) > 63 {
		return newError(ErrInvalidQueueName, CodeOutOfRangeInput,
			"the queue name "+quoteTrunc(name)+" must be 3 to 63 characters long")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(name)-1 && name[i-1] != '-':
		default:
			return newError(ErrInvalidQueueName, "",
				"the queue name "+quoteTrunc(name)+" may contain only lower-case letters, digits and single hyphens, and must start and end with a letter or digit")
		}
	}
	return nil
}

// ValidateMetadata checks metadata against Azure's rules: every name is a
// C# identifier (letters, digits and underscores, not starting with a
// digit; else InvalidMetadata), none is empty (EmptyMetadataKey), no two
// differ only in case (InvalidMetadata), and names plus values total at most
// 8 KiB (MetadataTooLarge). All of these match ErrInvalidMetadata.
func ValidateMetadata(md map[string]string) error {
	size := 0
	for k, v := range md {
		if k == "" {
			return newError(ErrInvalidMetadata, CodeEmptyMetadataKey, "a metadata name is empty")
		}
		if !isIdentifier(k) {
			return newError(ErrInvalidMetadata, "", "the metadata name "+quoteTrunc(k)+" is not a valid C# identifier",
				Detail{"MetadataName", k})
		}
		size += len(k) + len(v)
	}
	if size > MaxMetadataSize {
		return newError(ErrInvalidMetadata, CodeMetadataTooLarge,
			"the metadata is "+strconv.Itoa(size)+" bytes; at most 8192 are allowed")
	}
	if len(md) > 1 {
		seen := make(map[string]bool, len(md))
		for k := range md {
			l := strings.ToLower(k)
			if seen[l] {
				return newError(ErrInvalidMetadata, "", "the metadata name "+quoteTrunc(k)+" appears twice, ignoring case",
					Detail{"MetadataName", k})
			}
			seen[l] = true
		}
	}
	return nil
}

// isIdentifier reports whether s is an ASCII C# identifier. Header names are
// ASCII, so Unicode identifier letters cannot reach Azure anyway.
func isIdentifier(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}

// cloneMetadata copies md so that neither the caller nor azq can change the
// other's map. It returns nil for an empty map.
func cloneMetadata(md map[string]string) map[string]string {
	if len(md) == 0 {
		return nil
	}
	c := make(map[string]string, len(md))
	for k, v := range md {
		c[k] = v
	}
	return c
}
