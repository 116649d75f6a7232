package httproute_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/testharness"
)

// TestGatewayListsAreChecked: mcp.reads and mcp.unprotected hold tool
// names, each once, never the route's write tool; each problem names its
// field.
func TestGatewayListsAreChecked(t *testing.T) {
	gh := readExample(t, "github_mcp.yaml")
	at := "      args: [stdio]\n"
	for _, c := range []struct{ name, lists, field, want string }{
		{"not a tool name", "      reads: [\"get issue\"]\n", "mcp.reads[0]", "is not a tool name"},
		{"the write tool", "      unprotected: [add_issue_comment]\n", "mcp.unprotected[0]", "the route's write tool"},
		{"in both lists", "      reads: [search_issues]\n      unprotected: [search_issues]\n", "mcp.unprotected[0]", "already listed in mcp.reads"},
	} {
		t.Run(c.name, func(t *testing.T) {
			oneError(t, mutate(t, gh, at, at+c.lists), mcpEnv(), "github_mcp_comment", c.field, c.want)
		})
	}
	if errs := httproute.Check(mutate(t, gh, at, at+"      reads: [search_issues]\n      unprotected: [add_labels]\n"), envOf(mcpEnv())); errs != nil {
		t.Fatal(errs)
	}
}

// TestWriteArguments: an agent's arguments of the write tool map back to
// the payload, parent and account the route templates them from (the
// GitHub file: body and issue_number; the memory file: name, note and the
// entity type as account); what the route would not send as given is
// refused naming the argument; a write whose arguments cannot be mapped
// back is a warning, and its adapter says why.
func TestWriteArguments(t *testing.T) {
	gh := testharness.CompileRoute(t, readExample(t, "github_mcp.yaml"), mcpEnv()).Adapter.(*httproute.Adapter)
	payload, parent, account, err := gh.WriteArguments(json.RawMessage(`{"owner":"octo-org","issue_number":7,"body":"hi"}`))
	if err != nil || string(payload) != `{"body":"hi"}` || parent != "7" || account != "" {
		t.Fatalf("github: %s %q %q %v", payload, parent, account, err)
	}
	mem := testharness.CompileRoute(t, readExample(t, "memory_mcp.yaml"), mcpEnv()).Adapter.(*httproute.Adapter)
	payload, _, account, err = mem.WriteArguments(json.RawMessage(`{"entities":[{"name":"Ada","entityType":"person","observations":["likes tea"]}]}`))
	if err != nil || !strings.Contains(string(payload), `"note":"likes tea"`) || account != "person" {
		t.Fatalf("memory: %s %q %v", payload, account, err)
	}
	for _, c := range []struct{ args, field string }{
		{`{"owner":"someone","issue_number":7,"body":"hi"}`, "owner"},
		{`{"issue_number":"7","body":"hi"}`, "issue_number"},
		{`{"issue_number":7,"body":"hi","labels":["x"]}`, "labels"},
		{`{"issue_number":7,"body":""}`, "body"},
		{`{"issue_number":7,"body":5}`, "body"},
	} {
		_, _, _, err := gh.WriteArguments(json.RawMessage(c.args))
		var fe *events.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: %v, want a refusal of %s", c.args, err, c.field)
		}
	}
	_, _, _, err = mem.WriteArguments(json.RawMessage(`{"entities":[{"name":"a","entityType":"p","observations":["x"]},{"name":"b"}]}`))
	var fe *events.FieldError
	if !errors.As(err, &fe) || fe.Field != "entities" {
		t.Errorf("two entities: %v", err)
	}
	odd := mutate(t, readExample(t, "github_mcp.yaml"), "        repo: hello-world\n        issue_number",
		"        repo: hello-world\n        ref: \"{{account}}/{{parent}}\"\n        issue_number")
	_, warnings := httproute.Lint(odd, envOf(mcpEnv()))
	if len(warnings) != 1 || !strings.Contains(warnings[0].Error(), "write.arguments.ref") {
		t.Fatalf("warnings %v", warnings)
	}
	a := testharness.CompileRoute(t, odd, mcpEnv()).Adapter.(*httproute.Adapter)
	if _, _, w := a.GatewayTools(); w == nil {
		t.Fatal("an unmappable write is offered")
	}
}
