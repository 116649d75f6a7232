package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Unknown is a field the binary does not carry: a revision outside a VCS
// checkout (go test, a build with -buildvcs=false), a version of a build
// without module information.
const Unknown = "unknown"

// Devel is the module version of a build from a source tree rather than
// of a tagged module (go build ./cmd/settle prints "(devel)" or a
// pseudo-version; go install ...@v1.2.3 prints v1.2.3).
const Devel = "(devel)"

// Info is what the binary says about its build.
type Info struct {
	// Version is the main module's version (v1.2.3, a pseudo-version, or
	// Devel).
	Version string
	// Revision is the VCS revision, with "-dirty" when the tree had
	// uncommitted changes; Unknown when the build did not record one.
	Revision string
	// GoVersion is the toolchain's (go1.26.0).
	GoVersion string
}

// Read returns the binary's build information.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: Unknown, Revision: Unknown, GoVersion: runtime.Version()}
	}
	return FromBuildInfo(bi)
}

// FromBuildInfo interprets bi (Read's, or a test's).
func FromBuildInfo(bi *debug.BuildInfo) Info {
	in := Info{Version: bi.Main.Version, Revision: Unknown, GoVersion: bi.GoVersion}
	if in.Version == "" {
		in.Version = Devel
	}
	if in.GoVersion == "" {
		in.GoVersion = runtime.Version()
	}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if s.Value != "" {
				in.Revision = s.Value
			}
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && in.Revision != Unknown {
		in.Revision += "-dirty"
	}
	// go install ...@version stamps no VCS settings; a pseudo-version
	// (v0.0.0-20260102150405-abcdef123456) ends in the commit's prefix.
	if rev := pseudoRevision(in.Version); in.Revision == Unknown && rev != "" {
		in.Revision = rev
	}
	return in
}

// pseudoRevision is the commit prefix a pseudo-version ends in, "" for
// any other version.
func pseudoRevision(v string) string {
	v, _, _ = strings.Cut(v, "+")
	i := strings.LastIndexByte(v, '-')
	if i < 0 || len(v)-i-1 != 12 || strings.Count(v, "-") < 2 {
		return ""
	}
	if rev := v[i+1:]; strings.Trim(rev, "0123456789abcdef") == "" {
		return rev
	}
	return ""
}

// String is the one line settle --version prints:
// "settle VERSION (commit REVISION, GOVERSION)".
func (i Info) String() string {
	return "settle " + i.Version + " (commit " + i.Revision + ", " + i.GoVersion + ")"
}
