package azure_test

import "github.com/azqlib/azq"

// unknownID names no message.
var unknownID, _ = azq.ParseMessageID("0f8fad5b-d9cb-469f-a165-70867728950e")
