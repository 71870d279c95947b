package azq

// Version is the release of azq this code belongs to, as its modules are
// tagged: v0.1.0 is the tags v0.1.0, cmd/azqd/v0.1.0, gocloud/v0.1.0 and
// so on, one per module of the repository. It is the newest release
// heading of CHANGELOG.md (a test keeps the two equal) and changes only in
// the commit that cuts a release, so between releases it names the last
// one; the commands' -version adds the build's VCS revision, which tells
// the commits after it apart.
//
// It is not the Azure Storage service version (x-ms-version) that package
// server speaks.
const Version = "v0.1.0"
