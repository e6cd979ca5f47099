// Package testthread gives the enforcement backends' tests OS threads of
// their own to set and restore.
package testthread

import (
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Locked returns the id of an OS thread that lives until end is closed: a
// goroutine locked to it and never unlocked, so that the thread ends with
// the goroutine. Never the main thread, which outlives its goroutine (it
// stays held and another is taken).
func Locked(end <-chan struct{}) int {
	for {
		tid := make(chan int)
		go func() {
			runtime.LockOSThread()
			tid <- unix.Gettid()
			<-end
		}()
		if id := <-tid; id != os.Getpid() {
			return id
		}
	}
}
