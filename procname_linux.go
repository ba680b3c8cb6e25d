package main

import "os"

// nameProcess gives this process the kernel's short name (comm: what
// pgrep -x, ps -e and top show; the kernel keeps its first 15 bytes),
// in each of its threads so far; threads started later inherit it. A
// worker calls it with the program's name at its start: the kernel names
// a process after the file it ran, and a worker runs /proc/self/fd/N
// (runPath), so it would be named N. A name is not worth a failure: it
// does nothing where /proc cannot be written.
//
// Rejected: prctl(PR_SET_NAME), which names only the calling thread, and
// a goroutine's thread need not be the main one, whose name pgrep reads.
func nameProcess(name string) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return
	}
	for _, task := range tasks {
		f, err := os.OpenFile("/proc/self/task/"+task.Name()+"/comm", os.O_WRONLY, 0)
		if err != nil {
			continue // the thread has exited since
		}
		f.WriteString(name)
		f.Close()
	}
}
