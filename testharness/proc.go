package testharness

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ProcSpec describes an OS process a fault test runs.
type ProcSpec struct {
	// Name labels the process in logs and failures ("settle-a", "n2").
	Name string
	// Path is the binary, Args its arguments, Env added to os.Environ().
	Path string
	Args []string
	Env  []string
	// Dir is the working directory ("" : the test's).
	Dir string
}

// Proc is one OS process of a fault test: started, signalled (SIGKILL,
// SIGTERM, SIGSTOP, SIGCONT) and restarted with the same spec. Its output
// (stdout and stderr together) is kept in memory and in a file under the
// test's temporary directory. A test only ever signals processes it
// started, by their pid; t.Cleanup kills what is still running.
type Proc struct {
	t    testing.TB
	spec ProcSpec
	log  string // path of the output file

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	err    error // Wait's error of the last run
	out    *SyncBuffer
	runs   int
	paused bool
}

// StartProc starts the process and registers its cleanup (skipped under
// -short: the fast tier starts no process).
func StartProc(t testing.TB, spec ProcSpec) *Proc {
	t.Helper()
	SkipShort(t, "an OS process")
	if spec.Name == "" {
		spec.Name = filepath.Base(spec.Path)
	}
	p := &Proc{t: t, spec: spec, out: &SyncBuffer{}, log: filepath.Join(t.TempDir(), spec.Name+".log")}
	t.Cleanup(p.kill)
	p.Start()
	return p
}

// Start runs the process again (it must not be running).
func (p *Proc) Start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !p.exitedLocked() {
		p.t.Fatalf("%s: start: already running (pid %d)", p.spec.Name, p.cmd.Process.Pid)
	}
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		p.t.Fatalf("%s: %v", p.spec.Name, err)
	}
	p.runs++
	fmt.Fprintf(f, "\n=== run %d at %s: %s %v\n", p.runs, time.Now().Format(time.RFC3339Nano), p.spec.Path, p.spec.Args)
	fmt.Fprintf(p.out, "\n=== run %d\n", p.runs)
	cmd := exec.Command(p.spec.Path, p.spec.Args...)
	cmd.Env = append(os.Environ(), p.spec.Env...)
	cmd.Dir = p.spec.Dir
	w := io.MultiWriter(p.out, f)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		f.Close()
		p.t.Fatalf("%s: start %s: %v", p.spec.Name, p.spec.Path, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.err, p.paused = cmd, done, nil, false
	go func() {
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
}

func (p *Proc) exitedLocked() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Running reports whether the process is alive (paused counts as alive).
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !p.exitedLocked()
}

// Pid is the pid of the current run.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// Done is closed when the current run exits.
func (p *Proc) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Output is everything the process printed, all runs.
func (p *Proc) Output() string { return p.out.String() }

// LogFile is the file holding the output of every run.
func (p *Proc) LogFile() string { return p.log }

// Name is the spec's name.
func (p *Proc) Name() string { return p.spec.Name }

// Spec returns the spec (to change arguments before a Start).
func (p *Proc) Spec() *ProcSpec { return &p.spec }

func (p *Proc) signal(sig syscall.Signal) {
	p.t.Helper()
	p.mu.Lock()
	cmd := p.cmd
	exited := cmd == nil || p.exitedLocked()
	p.mu.Unlock()
	if exited {
		p.t.Fatalf("%s: %s: the process is not running\n%s", p.spec.Name, sig, p.Tail(4000))
	}
	if err := cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("%s: %s: %v", p.spec.Name, sig, err)
	}
}

// Kill9 sends SIGKILL and waits for the process to be gone.
func (p *Proc) Kill9() {
	p.t.Helper()
	p.mu.Lock()
	paused := p.paused
	p.mu.Unlock()
	p.signal(syscall.SIGKILL)
	if paused {
		p.mu.Lock()
		p.paused = false
		p.mu.Unlock()
	}
	if !p.waitExit(30 * time.Second) {
		p.t.Fatalf("%s: still running 30s after SIGKILL", p.spec.Name)
	}
}

// Pause sends SIGSTOP: the process keeps its sockets and does nothing.
func (p *Proc) Pause() {
	p.t.Helper()
	p.pause(syscall.SIGSTOP, true)
}

// Resume sends SIGCONT.
func (p *Proc) Resume() {
	p.t.Helper()
	p.pause(syscall.SIGCONT, false)
}

// pause sends sig and records whether the process is now paused.
func (p *Proc) pause(sig syscall.Signal, paused bool) {
	p.t.Helper()
	p.signal(sig)
	p.mu.Lock()
	p.paused = paused
	p.mu.Unlock()
}

// Term sends SIGTERM and waits up to timeout for the exit. It returns the
// exit code (-1 when the process did not exit in time; it is then left
// running for the caller to judge).
func (p *Proc) Term(timeout time.Duration) int {
	p.t.Helper()
	p.signal(syscall.SIGTERM)
	if !p.waitExit(timeout) {
		return -1
	}
	return p.ExitCode()
}

// Wait waits up to timeout for the process to exit by itself and returns
// its exit code (-1: still running).
func (p *Proc) Wait(timeout time.Duration) int {
	if !p.waitExit(timeout) {
		return -1
	}
	return p.ExitCode()
}

// ExitCode of the last run (-1 while running; the signal number + 128
// when a signal ended it).
func (p *Proc) ExitCode() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || !p.exitedLocked() {
		return -1
	}
	st := p.cmd.ProcessState
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}

func (p *Proc) waitExit(timeout time.Duration) bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// Tail is the last n bytes of the output.
func (p *Proc) Tail(n int) string {
	s := p.out.String()
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// kill ends a run still going at cleanup (a paused process is continued
// first so that it can die).
func (p *Proc) kill() {
	p.mu.Lock()
	cmd := p.cmd
	alive := cmd != nil && !p.exitedLocked()
	done := p.done
	p.mu.Unlock()
	if !alive {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
	}
}
