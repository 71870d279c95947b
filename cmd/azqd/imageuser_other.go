//go:build !linux

package main

import (
	"fmt"
	"io/fs"
)

// switchUser refuses: the container image, which sets AZQD_USER, is
// Linux; elsewhere azqd does not change its user.
func switchUser(u imageUser) error {
	return fmt.Errorf("%s=%s: azqd changes its user on Linux only; unset it", imageUserEnv, u)
}

// ownerOf is unknown outside Linux.
func ownerOf(fs.FileInfo) (imageUser, bool) { return imageUser{}, false }
