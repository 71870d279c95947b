//go:build !unix

package faults

// openNonblock is 0 where there is no O_NONBLOCK: there, Load's look at
// the file before opening it is what keeps it from a named pipe.
const openNonblock = 0
