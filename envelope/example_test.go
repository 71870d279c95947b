package envelope_test

import (
	"fmt"

	"github.com/azqlib/azq/envelope"
)

func ExampleEncode() {
	text, err := envelope.Encode(&envelope.Envelope{
		ID:       "order-42",
		Metadata: map[string]string{"type": "order.created"},
		Body:     []byte(`{"total":9.5}`),
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(text)
	// Output: {"azqenvelope":1,"id":"order-42","metadata":{"type":"order.created"},"body":"{\"total\":9.5}"}
}

func ExampleRead() {
	// An envelope, and a message that another producer wrote as plain text.
	for _, text := range []string{
		`{"azqenvelope":1,"metadata":{"lang":"en"},"body":"hello"}`,
		`hello from a shell script`,
	} {
		e, ok := envelope.Read(text)
		fmt.Printf("%v %q %v\n", ok, e.Body, e.Metadata)
	}
	// Output:
	// true "hello" map[lang:en]
	// false "hello from a shell script" map[]
}
