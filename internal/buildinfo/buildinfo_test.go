package buildinfo_test

import (
	"runtime/debug"
	"testing"

	"github.com/settle-dev/settle/internal/buildinfo"
)

func TestFromBuildInfo(t *testing.T) {
	cases := []struct {
		name string
		bi   debug.BuildInfo
		want buildinfo.Info
	}{
		{"go install of a tag", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "false"}}},
			buildinfo.Info{Version: "v1.2.3", Revision: "abc123", GoVersion: "go1.26.0"}},
		{"a dirty checkout", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}},
			buildinfo.Info{Version: "(devel)", Revision: "abc123-dirty", GoVersion: "go1.26.0"}},
		{"go install of a commit", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-20260102150405-abcdef123456"}},
			buildinfo.Info{Version: "v0.0.0-20260102150405-abcdef123456", Revision: "abcdef123456", GoVersion: "go1.26.0"}},
		{"go install of a tag after a commit", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.4-0.20260102150405-abcdef123456+dirty"}},
			buildinfo.Info{Version: "v1.2.4-0.20260102150405-abcdef123456+dirty", Revision: "abcdef123456", GoVersion: "go1.26.0"}},
		{"go test: no version, no VCS", debug.BuildInfo{GoVersion: "go1.26.0"},
			buildinfo.Info{Version: buildinfo.Devel, Revision: buildinfo.Unknown, GoVersion: "go1.26.0"}},
	}
	for _, c := range cases {
		if got := buildinfo.FromBuildInfo(&c.bi); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
	if s := buildinfo.Read().String(); s == "" {
		t.Fatal("empty")
	}
}
