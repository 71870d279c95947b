// Command release cuts azq's releases and checks what they publish. It is
// a module of its own, which go.work leaves out, so that its dependencies
// (golang.org/x/mod, golang.org/x/exp/apidiff, golang.org/x/tools) stay
// out of the workspace; .ci/release builds it with GOWORK=off and runs it
// on the clone:
//
//	.ci/release tag -dry-run [-remote origin]
//	.ci/release tag [-remote origin]
//	.ci/release api [-w]
//	.ci/release proxy -dir DIR
//	.ci/release tidy
//
// The modules are the ones go.work lists, but its test-only modules
// (testOnlyModules: the examples, server/sdktest, worker/sdktest), which
// are never released; the version is azq.Version (version.go), which
// CHANGELOG.md's newest release heading repeats.
//
// tag checks the clone (no changes; azq.Version is the changelog's newest
// release; a nested module requires the repository's modules at it; no replace
// directive users' builds would ignore, and none in a module with
// commands; no tag exists yet; the API baselines are this release's) and
// makes an annotated tag per module on HEAD: vX.Y.Z for the root module,
// DIR/vX.Y.Z for the module in DIR. -dry-run checks and lists them.
//
// api compares every module's exported API with its baseline in
// internal/release/api, the last release's, with golang.org/x/exp/apidiff,
// and fails on an incompatible change not listed in
// internal/release/api/accepted.txt; -w writes the baselines, as the
// commit that cuts a release does. A package carved out of a module into
// a new one since the last release is compared, in the new module, with
// its API in the baseline of the module it left.
//
// proxy writes a module proxy (GOPROXY=file://DIR) of every module at
// azq.Version, made by golang.org/x/mod/zip from the files git would
// commit: the modules as the tags would publish them.
//
// tidy runs go mod tidy in every module, outside the workspace, giving a
// nested module a replace for the run of each of the repository's modules
// it does not replace itself (the commands' modules, cmd/azqd, cmd/azqsim,
// cmd/azqload, which go install …@version needs without one, replace
// none), and then in the modules that are never released.
//
// docs/releasing.md has the whole process. The tests that drive the go
// command (the release in a copy of the clone, the API check, tidy, and
// the README's commands for using azq from another module, from a clone
// and through the proxy, the carved modules through a proxy of the last
// release and the next) are long runs: AZQ_LONG=1 GOWORK=off go test ./...
package main
