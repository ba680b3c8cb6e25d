package main

import (
	"runtime"
	"sync"
)

// spareThreads is how many OS threads the parent starts beyond one per
// processor before its first worker: room for the goroutines that sit in
// a system call at once (a log write, a fork, a read of /proc) while the
// others run. The parent runs fewer than this at rest (README, "Running
// for months").
const spareThreads = 6

var reserveOnce sync.Once

// reserveThreads makes the runtime start the threads the parent will
// need, once, before the first worker exists. A host that refuses
// another process (ulimit -u and pids.max count threads, not processes)
// refuses the parent's next thread too, and the runtime cannot go on
// without one: it aborts (pthread_create failed) where servery means to
// roll back and name the limit. It aborted so in a rollback on a busy
// box, when the workers it was killing still held the user's last tasks.
//
// The runtime keeps an idle thread for the next goroutine that needs
// one and never ends it, so threads started now are the ones it uses
// later. There is no call that starts one; a goroutine locked to its
// thread and blocked keeps that thread from every other goroutine, so n
// of them at once make the runtime start n threads, which go idle when
// they unlock.
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
