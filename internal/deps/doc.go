// Package deps holds the test of the import directions between the root
// module's packages: what each package may link, so that a program that
// imports one does not pull in a stack it has no use for (an HTTP server
// in the queue, Prometheus in the REST server, the Azure SDK in the
// contract suites); and of the package map docs/internals.md draws, row
// by row against go list. It has no code of its own.
package deps
