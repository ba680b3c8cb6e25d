package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"syscall"
)

const rlimitNPROC = 6 // Linux's RLIMIT_NPROC, which package syscall does not name

// processLimits names the limits on processes that a refused fork may
// have met: the user's (ulimit -u, which counts every thread of every
// process the user runs) and the cgroup's (pids.max: a container's
// limit, or systemd's TasksMax=).
func processLimits() string {
	var parts []string
	var rl syscall.Rlimit
	if syscall.Getrlimit(rlimitNPROC, &rl) == nil && rl.Cur != ^uint64(0) {
		parts = append(parts, fmt.Sprintf("ulimit -u (RLIMIT_NPROC) allows this user %d tasks, threads included", rl.Cur))
	}
	if max, current := cgroupPids(); max != "" && max != "max" {
		parts = append(parts, fmt.Sprintf("the cgroup's pids.max is %s, %s in use", max, current))
	}
	if len(parts) == 0 {
		return "no process limit found: the kernel's own (kernel.threads-max, kernel.pid_max), or memory"
	}
	return strings.Join(parts, "; ")
}

// cgroupPids reads pids.max and pids.current of this process's cgroup,
// under cgroup v2 or v1's pids controller; empty where there is none.
func cgroupPids() (max, current string) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-id:controllers:path; v2's is "0::path".
		fields := strings.SplitN(sc.Text(), ":", 3)
		if len(fields) != 3 {
			continue
		}
		dir := ""
		switch {
		case fields[0] == "0" && fields[1] == "":
			dir = "/sys/fs/cgroup" + fields[2]
		case fields[1] == "pids":
			dir = "/sys/fs/cgroup/pids" + fields[2]
		default:
			continue
		}
		if m, err := os.ReadFile(dir + "/pids.max"); err == nil {
			c, _ := os.ReadFile(dir + "/pids.current")
			return strings.TrimSpace(string(m)), strings.TrimSpace(string(c))
		}
	}
	return "", ""
}

// fileLimit names the parent's limit on open files (ulimit -n).
func fileLimit() string {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) != nil {
		return "ulimit -n"
	}
	return fmt.Sprintf("ulimit -n (RLIMIT_NOFILE) is %d", rl.Cur)
}
