package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sync"

	"github.com/cockroachdb/errors"
)

// message is what mcpdrop reads of a JSON-RPC message.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name string `json:"name"`
	} `json:"params"`
}

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: mcpdrop TOOL FLAGFILE COMMAND ARGS...")
		os.Exit(2)
	}
	tool, flag := os.Args[1], os.Args[2]
	cmd := exec.Command(os.Args[3], os.Args[4:]...)
	cmd.Stderr = os.Stderr
	in, err1 := cmd.StdinPipe()
	out, err2 := cmd.StdoutPipe()
	if err := errors.Join(err1, err2, cmd.Start()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var mu sync.Mutex
	drop := map[string]bool{} // request ids whose response is lost
	go func() {
		r := bufio.NewReader(os.Stdin)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				var m message
				if json.Unmarshal(line, &m) == nil && m.Method == "tools/call" && m.Params.Name == tool && len(m.ID) > 0 && os.Remove(flag) == nil {
					mu.Lock()
					drop[string(m.ID)] = true
					mu.Unlock()
				}
				if _, err := in.Write(line); err != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		_ = in.Close()
	}()
	r := bufio.NewReader(out)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			var m message
			lost := false
			if json.Unmarshal(line, &m) == nil && m.Method == "" && len(m.ID) > 0 {
				mu.Lock()
				lost = drop[string(m.ID)]
				delete(drop, string(m.ID))
				mu.Unlock()
			}
			if !lost {
				_, _ = os.Stdout.Write(line)
			}
		}
		if err != nil {
			break
		}
	}
	_ = cmd.Wait()
}
