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

// ProcSpec describes an OS process a test runs.
type ProcSpec struct {
	// Name labels the process in logs and failures ("settle-a", "n2").
	Name string
	// Path is the binary, Args its arguments, Env added to os.Environ().
	Path string
	Args []string
	Env  []string
}

// Proc is one OS process of a test, started, signalled and restarted with
// its Spec (changed before a Start, it changes the next run). Its output
// (stdout and stderr, every run) is kept in memory and in a file under the
// test's temporary directory; t.Cleanup kills what is still running.
type Proc struct {
	Spec ProcSpec
	t    testing.TB
	log  string // path of the output file
	out  SyncBuffer

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the current run exits
	runs int
}

// StartProc starts the process and registers its cleanup (skipped under
// -short: the fast tier starts no process).
func StartProc(t testing.TB, spec ProcSpec) *Proc {
	t.Helper()
	SkipShort(t, "an OS process")
	if spec.Name == "" {
		spec.Name = filepath.Base(spec.Path)
	}
	p := &Proc{t: t, Spec: spec, log: filepath.Join(t.TempDir(), spec.Name+".log")}
	t.Cleanup(p.kill)
	p.Start()
	return p
}

// Start runs the process again (it must not be running).
func (p *Proc) Start() {
	p.t.Helper()
	if p.Running() {
		p.t.Fatalf("%s: start: already running (pid %d)", p.Spec.Name, p.Pid())
	}
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		p.t.Fatalf("%s: %v", p.Spec.Name, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runs++
	fmt.Fprintf(f, "\n=== run %d at %s: %s %v\n", p.runs, time.Now().Format(time.RFC3339Nano), p.Spec.Path, p.Spec.Args)
	fmt.Fprintf(&p.out, "\n=== run %d\n", p.runs)
	cmd := exec.Command(p.Spec.Path, p.Spec.Args...)
	cmd.Env = append(os.Environ(), p.Spec.Env...)
	w := io.MultiWriter(&p.out, f)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		f.Close()
		p.t.Fatalf("%s: start %s: %v", p.Spec.Name, p.Spec.Path, err)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(done)
	}()
}

// current is the current run and the channel closed when it exits.
func (p *Proc) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.done
}

// Running reports whether the process is alive (a stopped one counts).
func (p *Proc) Running() bool {
	cmd, done := p.current()
	if cmd == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Pid is the pid of the current run.
func (p *Proc) Pid() int {
	cmd, _ := p.current()
	return cmd.Process.Pid
}

// Output is everything the process printed, all runs.
func (p *Proc) Output() string { return p.out.String() }

// LogFile is the file holding the output of every run.
func (p *Proc) LogFile() string { return p.log }

func (p *Proc) Name() string { return p.Spec.Name }

// Signal sends sig to the running process (SIGSTOP pauses it: it keeps
// its sockets and does nothing; SIGCONT resumes it).
func (p *Proc) Signal(sig syscall.Signal) {
	p.t.Helper()
	if !p.Running() {
		p.t.Fatalf("%s: %s: the process is not running\n%s", p.Spec.Name, sig, p.Tail(4000))
	}
	cmd, _ := p.current()
	if err := cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("%s: %s: %v", p.Spec.Name, sig, err)
	}
}

// Kill9 sends SIGKILL and waits for the process to be gone.
func (p *Proc) Kill9() {
	p.t.Helper()
	p.Signal(syscall.SIGKILL)
	if p.Wait(30*time.Second) == -1 {
		p.t.Fatalf("%s: still running 30s after SIGKILL", p.Spec.Name)
	}
}

// Term sends SIGTERM and waits up to timeout for the exit, as Wait.
func (p *Proc) Term(timeout time.Duration) int {
	p.t.Helper()
	p.Signal(syscall.SIGTERM)
	return p.Wait(timeout)
}

// Wait waits up to timeout for the process to exit and returns its exit
// code: -1 when it is still running (it is left so for the caller to
// judge), the signal number + 128 when a signal ended it.
func (p *Proc) Wait(timeout time.Duration) int {
	cmd, done := p.current()
	select {
	case <-done:
	case <-time.After(timeout):
		return -1
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}

// Tail is the last n bytes of the output.
func (p *Proc) Tail(n int) string {
	s := p.out.String()
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// kill ends a run still going at cleanup (a stopped process is continued
// first so that it can die).
func (p *Proc) kill() {
	if !p.Running() {
		return
	}
	cmd, _ := p.current()
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	p.Wait(30 * time.Second)
}
