package main

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// switchUser makes the whole process u, with no supplementary group, for
// good: root's real, effective and saved IDs all go, on every thread.
func switchUser(u imageUser) error {
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("dropping root's groups: %w", err)
	}
	if err := syscall.Setgid(u.gid); err != nil {
		return fmt.Errorf("becoming group %d (%s): %w", u.gid, imageUserEnv, err)
	}
	if err := syscall.Setuid(u.uid); err != nil {
		return fmt.Errorf("becoming user %d (%s): %w", u.uid, imageUserEnv, err)
	}
	if os.Getuid() != u.uid || os.Geteuid() != u.uid || os.Getgid() != u.gid {
		return fmt.Errorf("still uid %d, gid %d after becoming %s", os.Geteuid(), os.Getegid(), u)
	}
	return nil
}

// ownerOf is the owner of the file fi describes.
func ownerOf(fi fs.FileInfo) (imageUser, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return imageUser{}, false
	}
	return imageUser{int(st.Uid), int(st.Gid)}, true
}
