// Package envelope is the message format that azq's messaging drivers (the
// gocloud.dev/pubsub driver and the Watermill Pub/Sub, each in a module of
// its own) share: a body plus a producer's message ID and metadata, written
// as one Azure queue message text that any Azure SDK can read.
//
// An Azure queue message is only text; the abstractions above it carry a
// body and string metadata. An envelope is a JSON object, version 1:
//
//	{"azqenvelope":1,"id":"4f1c…","metadata":{"k":"v"},"body":"hello"}
//
// Its members:
//
//   - "azqenvelope" is the version, the integer 1. It marks the text as an
//     envelope; a text without it is not one.
//   - "id" (optional) is the producer's message ID, such as a Watermill
//     message's UUID.
//   - "metadata" (optional) is an object of string values.
//   - "body" (optional) is the body as a JSON string when the body is valid
//     UTF-8, or "body64" its standard, padded base64 encoding when it is
//     not; never both.
//
// Encode writes the members in that order, metadata sorted by name, and
// escapes every control character, U+FFFE and U+FFFF, so that the text is
// ASCII-safe where it matters: every character of it may stand in an XML
// document, as the queue service's REST API requires of a message text. A
// consumer in any language reads it with a JSON parser. Decode accepts any
// JSON object with these members in any order and with any white space;
// members it does not know are skipped, so that a later minor addition does
// not break an older reader (a change that a reader must not ignore takes
// a new version number). A duplicated member, "body" beside "body64",
// invalid UTF-8, or a version other than 1 is an error.
//
// A message that another producer wrote without an envelope is delivered
// with its text as the body: Read returns the envelope if the text is one,
// and otherwise an Envelope holding the whole text as its Body and no
// metadata, so that no message is dropped for its format.
//
// # Cost
//
// Any producer with access to a queue chooses the texts its consumers
// decode, so Decode costs time linear in the text's length and allocates
// at most 18 bytes a byte of it, plus 1 KiB, whatever it holds: escapes,
// unknown members, nesting, duplicates, or an error at its end. Without
// metadata the bound is 2 bytes a byte plus 1 KiB: an escaped string's
// value is never longer than its text and is made only for the members
// kept, the body's in a buffer of its text's size, the others' through a
// scratch buffer that grows to the longest. Metadata costs the rest: a pair
// takes as little as 8 bytes of text ("ab":"",) and 32 bytes of slot in a
// Go map, whose tables are made for the number of pairs (counted first)
// but hold a power of two of slots and may split when 7/8 full: a text of
// nothing but such pairs, up to 64 KiB, costs 6 to 16 bytes a byte by
// their number and the map's hashing (encoding/json decodes a 64 KiB one
// into a map[string]string with 23). FuzzDecode holds every input it
// decodes to the bound. Read allocates the text's length more for a text
// that is not an envelope: the copy that it returns as the body.
package envelope
