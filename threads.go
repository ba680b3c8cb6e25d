package main

import (
	"runtime"
	"sync"
)

// spareThreads is how many OS threads the parent holds ready beyond one
// per processor: room for the goroutines that sit in a system call at
// once (a log write, a fork, a read of /proc) while the others run.
// Without the reserve the parent was measured at 9 threads on 2 cores
// after 100,000 replacements (the lifetime figures in bench/README.md).
const spareThreads = 6

var reserveOnce sync.Once

// reserveThreads makes the runtime start the threads the parent will
// need, once, before its first worker exists (or, in an upgraded image,
// before it adopts its workers). A host that refuses another process
// (ulimit -u and pids.max count threads, not processes) refuses the
// parent's next thread too, and the runtime cannot go on without one: it
// aborts (pthread_create failed) where servery means to roll back and
// name the limit. It aborted so in a rollback on a busy box, when the
// workers being killed still held the user's last tasks.
//
// There is no call that starts a thread. A goroutine locked to its thread
// and blocked keeps that thread from every other goroutine, so n of them
// blocked at once make the runtime start the threads it lacks for them.
// Unlocked before they exit, the threads go idle, and the runtime keeps
// an idle thread for good and hands it to the next goroutine that needs
// one. It lowers the odds, not to nothing: a parent that needs more
// threads at once than it holds, or whose GOMAXPROCS the runtime raises
// later, still starts one then, and off Linux each worker's wait holds a
// thread of its own (exit_other.go).
func reserveThreads() {
	reserveOnce.Do(func() {
		n := runtime.GOMAXPROCS(0) + spareThreads
		var locked, release sync.WaitGroup
		locked.Add(n)
		release.Add(1)
		for range n {
			go func() {
				runtime.LockOSThread()
				locked.Done()
				release.Wait()
				runtime.UnlockOSThread() // unlocked, the thread outlives its goroutine
			}()
		}
		locked.Wait()
		release.Done()
	})
}
