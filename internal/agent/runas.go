package agent

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"sort"
	"strconv"
	"syscall"
)

// cleanPath is the PATH replicas get unless their spec sets one.
const cleanPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ErrRunAsRoot is returned when replicas would run as root without
// --allow-root.
var ErrRunAsRoot = errors.New("agent: replicas would run as root; give --run-as USER to run them as an unprivileged user, or --allow-root to run them as root")

// runAs is who replicas run as: nil cred means the agent's own user.
type runAs struct {
	cred *syscall.Credential
	uid  int
	gid  int
	name string
}

// resolveRunAs looks up Options.RunAs (a user name or numeric uid) and
// checks that replicas do not run as root unless allowRoot.
func resolveRunAs(name string, allowRoot bool) (runAs, error) {
	if name == "" {
		r := runAs{uid: os.Geteuid(), gid: os.Getegid(), name: "the agent's user"}
		if r.uid == 0 && !allowRoot {
			return r, ErrRunAsRoot
		}
		return r, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		if _, nerr := strconv.Atoi(name); nerr == nil {
			u, err = user.LookupId(name)
		}
	}
	if err != nil {
		return runAs{}, fmt.Errorf("agent: --run-as %s: %w", name, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return runAs{}, fmt.Errorf("agent: --run-as %s: uid %q, gid %q are not numbers", name, u.Uid, u.Gid)
	}
	if uid == 0 && !allowRoot {
		return runAs{}, ErrRunAsRoot
	}
	if euid := os.Geteuid(); euid != 0 && euid != uid {
		return runAs{}, fmt.Errorf("agent: --run-as %s needs the agent to run as root (it runs as uid %d)", name, euid)
	}
	var groups []uint32
	if ids, err := u.GroupIds(); err == nil {
		for _, g := range ids {
			if n, err := strconv.Atoi(g); err == nil && n != gid {
				groups = append(groups, uint32(n))
			}
		}
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i] < groups[j] })
	return runAs{cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups}, uid: uid, gid: gid, name: u.Username}, nil
}

// own gives a directory the agent made for a replica to the user it runs
// as (the replica writes there).
func (r runAs) own(dir string) error {
	if r.cred == nil {
		return nil
	}
	if err := os.Lchown(dir, r.uid, r.gid); err != nil {
		return fmt.Errorf("giving %s to %s: %w", dir, r.name, err)
	}
	return nil
}
